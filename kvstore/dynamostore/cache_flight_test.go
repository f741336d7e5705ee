package dynamostore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/slidegate/slidegate/internal/dynalite"
	"github.com/slidegate/slidegate/kvstore"
	"github.com/slidegate/slidegate/kvstore/dynamostore"
	"github.com/slidegate/slidegate/limiter"
)

// lockedAPI is a fake API safe for concurrent use: every call answers
// through update or get, under no lock of its own.
type lockedAPI struct {
	update func(context.Context, *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error)
	get    func(context.Context, *dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error)
}

func (f *lockedAPI) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return f.update(ctx, in)
}

func (f *lockedAPI) GetItem(ctx context.Context, in *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if f.get == nil {
		return &dynamodb.GetItemOutput{}, nil
	}
	return f.get(ctx, in)
}

func answer(n int64) func(context.Context, *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
	return func(context.Context, *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
		return &dynamodb.UpdateItemOutput{Attributes: item("minute#1m0s#29384720", n)}, nil
	}
}

// loaded is the Store's cached count of the minute bucket b0 of "k".
func loaded(t *testing.T, s *dynamostore.Store) int64 {
	t.Helper()
	counts := make([]int64, 1)
	if err := s.Load(context.Background(), "k", []kvstore.Slot{minute(b0)}, counts); err != nil {
		t.Fatal(err)
	}
	return counts[0]
}

// TestFailedCallEndsItsFlight: a call of an identity that fails in
// any way (an error from DynamoDB, a malformed or short answer, the read
// after a failed condition failing, a cancelled context, a panic in the
// client) ends its place among the calls in flight: the next call of the
// identity, alone, replaces the cached counts with its answer. A call
// left in flight would have made every later answer of the identity
// merge by maximum for the life of the instance (the count another
// instance took back kept, and refused on, as before e497462), and grown
// the Store's map of calls by an identity per failure.
func TestFailedCallEndsItsFlight(t *testing.T) {
	ctx := context.Background()
	one := []kvstore.Cond{{Slot: minute(b0), Max: 100, Add: 1}}
	failure := errors.New("dynamodb: 500")
	addIf := func(s *dynamostore.Store) error {
		_, err := s.AddIf(ctx, "k", one, make([]int64, 1))
		return err
	}
	tests := []struct {
		name string
		api  lockedAPI
		call func(*dynamostore.Store) error
	}{
		{"write fails", lockedAPI{update: func(context.Context, *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
			return nil, failure
		}}, addIf},
		{"write answered malformed", lockedAPI{update: func(context.Context, *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
			return &dynamodb.UpdateItemOutput{Attributes: map[string]types.AttributeValue{"minute#1m0s#29384720": &types.AttributeValueMemberS{Value: "x"}}}, nil
		}}, addIf},
		{"write answered without its counter", lockedAPI{update: func(context.Context, *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
			return &dynamodb.UpdateItemOutput{}, nil
		}}, addIf},
		{"read after a failed condition fails", lockedAPI{
			update: func(context.Context, *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
				return nil, &types.ConditionalCheckFailedException{Message: new("failed")}
			},
			get: func(context.Context, *dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) { return nil, failure },
		}, addIf},
		{"write cancelled", lockedAPI{update: func(ctx context.Context, _ *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}}, func(s *dynamostore.Store) error {
			ctx, cancel := context.WithCancel(ctx)
			cancel()
			_, err := s.AddIf(ctx, "k", one, make([]int64, 1))
			return err
		}},
		{"client panics", lockedAPI{update: func(context.Context, *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
			panic("client")
		}}, func(s *dynamostore.Store) (err error) {
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("panic: %v", r)
				}
			}()
			return addIf(s)
		}},
		{"undo fails", lockedAPI{update: func(context.Context, *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
			return nil, failure
		}}, func(s *dynamostore.Store) error {
			return s.Add(ctx, "k", []kvstore.Slot{minute(b0)}, []int64{-1})
		}},
		{"read fails", lockedAPI{get: func(context.Context, *dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) {
			return nil, failure
		}}, func(s *dynamostore.Store) error {
			return s.Read(ctx, "k", []kvstore.Slot{minute(b0)}, make([]int64, 1))
		}},
		{"read answered malformed", lockedAPI{get: func(context.Context, *dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) {
			return &dynamodb.GetItemOutput{Item: map[string]types.AttributeValue{"ttl": &types.AttributeValueMemberS{Value: "x"}}}, nil
		}}, func(s *dynamostore.Store) error {
			return s.Read(ctx, "k", []kvstore.Slot{minute(b0)}, make([]int64, 1))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := &lockedAPI{update: answer(8)}
			s := mustNew(t, api)
			if err := addIf(s); err != nil {
				t.Fatal(err)
			}
			*api = tt.api
			if err := tt.call(s); err == nil {
				t.Fatal("the failing call succeeded")
			}
			api.update, api.get = answer(6), nil
			if err := addIf(s); err != nil {
				t.Fatal(err)
			}
			if got := loaded(t, s); got != 6 {
				t.Errorf("Load = %d, want 6: the answer of the next call, alone, replaces the cached 8", got)
			}
		})
	}
}

// TestReadOverlappingWrite: a check of cost 0 (Read) while a write
// of the same identity is in flight in the Store (serve --store dynamodb
// serves many requests at once): either answer may be the older one and
// arrive last. The older never lowers the count the newer brought, nor
// does a read finding no item drop the identity a write in flight
// re-creates; the next call alone then replaces them.
func TestReadOverlappingWrite(t *testing.T) {
	ctx := context.Background()
	one := []kvstore.Cond{{Slot: minute(b0), Max: 100, Add: 1}}
	tests := []struct {
		name        string
		write, read int64 // answers; read < 0: no item
		readLast    bool
		want        int64
	}{
		{"read older, answered last", 10, 9, true, 10},
		{"write older, answered last", 9, 10, false, 10},
		{"read finds no item, answered last", 10, -1, true, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := &lockedAPI{update: answer(8)}
			s := mustNew(t, api)
			if _, err := s.AddIf(ctx, "k", one, make([]int64, 1)); err != nil {
				t.Fatal(err)
			}
			writing, readingIn := make(chan struct{}), make(chan struct{})
			releaseW, releaseR := make(chan struct{}), make(chan struct{})
			api.update = func(context.Context, *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
				close(writing)
				<-releaseW
				return &dynamodb.UpdateItemOutput{Attributes: item("minute#1m0s#29384720", tt.write)}, nil
			}
			api.get = func(context.Context, *dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) {
				close(readingIn)
				<-releaseR
				if tt.read < 0 {
					return &dynamodb.GetItemOutput{}, nil
				}
				return &dynamodb.GetItemOutput{Item: item("minute#1m0s#29384720", tt.read)}, nil
			}
			wDone, rDone := make(chan error, 1), make(chan error, 1)
			go func() {
				_, err := s.AddIf(ctx, "k", one, make([]int64, 1))
				wDone <- err
			}()
			<-writing
			go func() { rDone <- s.Read(ctx, "k", []kvstore.Slot{minute(b0)}, make([]int64, 1)) }()
			<-readingIn
			first, firstDone, last, lastDone := releaseW, wDone, releaseR, rDone
			if !tt.readLast {
				first, firstDone, last, lastDone = releaseR, rDone, releaseW, wDone
			}
			close(first)
			if err := <-firstDone; err != nil {
				t.Fatal(err)
			}
			close(last)
			if err := <-lastDone; err != nil {
				t.Fatal(err)
			}
			if got := loaded(t, s); got != tt.want {
				t.Errorf("Load = %d, want %d (the larger of two overlapping answers)", got, tt.want)
			}
			api.update = answer(4)
			if _, err := s.AddIf(ctx, "k", one, make([]int64, 1)); err != nil {
				t.Fatal(err)
			}
			if got := loaded(t, s); got != 4 {
				t.Errorf("Load after a call alone = %d, want 4 (its answer replaces)", got)
			}
		})
	}
}

// TestConcurrentCallsEndTheirFlights: many calls of a few identities
// at once (writes, undos, reads, some failing), under the race detector:
// once all have ended, the next call of each identity is alone and its
// answer replaces the cached counts.
func TestConcurrentCallsEndTheirFlights(t *testing.T) {
	ctx := context.Background()
	one := []kvstore.Cond{{Slot: minute(b0), Max: 100, Add: 1}}
	var mu sync.Mutex
	n := int64(0)
	next := func() (int64, bool) {
		mu.Lock()
		defer mu.Unlock()
		n++
		return n, n%7 == 0
	}
	api := &lockedAPI{
		update: func(context.Context, *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
			c, fail := next()
			if fail {
				return nil, errors.New("dynamodb: 500")
			}
			return &dynamodb.UpdateItemOutput{Attributes: item("minute#1m0s#29384720", 100+c)}, nil
		},
		get: func(context.Context, *dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) {
			c, fail := next()
			if fail {
				return nil, errors.New("dynamodb: 500")
			}
			return &dynamodb.GetItemOutput{Item: item("minute#1m0s#29384720", 100+c)}, nil
		},
	}
	s := mustNew(t, api)
	ids := []string{"k", "j", "l"}
	var wg sync.WaitGroup
	for g := range 12 {
		wg.Go(func() {
			for i := range 50 {
				id := ids[(g+i)%len(ids)]
				switch i % 3 {
				case 0:
					_, _ = s.AddIf(ctx, id, one, make([]int64, 1))
				case 1:
					_ = s.Add(ctx, id, []kvstore.Slot{minute(b0)}, []int64{-1})
				default:
					_ = s.Read(ctx, id, []kvstore.Slot{minute(b0)}, make([]int64, 1))
				}
			}
		})
	}
	wg.Wait()
	api.update = answer(3)
	for _, id := range ids {
		if _, err := s.AddIf(ctx, id, one, make([]int64, 1)); err != nil {
			t.Fatal(err)
		}
		counts := make([]int64, 1)
		if err := s.Load(ctx, id, []kvstore.Slot{minute(b0)}, counts); err != nil {
			t.Fatal(err)
		}
		if counts[0] != 3 {
			t.Errorf("%s: Load = %d, want 3: a call of it was still counted in flight", id, counts[0])
		}
	}
}

// lateAnswerAPI delays the answer of the writes of one Store: DynamoDB
// applies the write, then before its answer reaches the instance, during
// runs (another instance's writes).
type lateAnswerAPI struct {
	dynamostore.API
	during func()
}

func (a *lateAnswerAPI) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	out, err := a.API.UpdateItem(ctx, in, opts...)
	if f := a.during; f != nil {
		a.during = nil
		f()
	}
	return out, err
}

// TestLateAnswerIsALowerBound: instance A's write is applied, then
// instance B admits 5 before A's answer arrives. A's answer, its only call
// in flight, replaces A's cache with the table as it was when A's write
// was applied: below the table, a lower bound. A then admits exactly the
// room the table has (limit 10: 1 + 5 counted, 4 more), never more on the
// cache's word, and refuses the rest.
func TestLateAnswerIsALowerBound(t *testing.T) {
	t.Parallel()
	tb := newTable(t, dynalite.Shared(t).Endpoint)
	rules := []limiter.Rule{rule("minute", 10, time.Minute)}
	ctx := context.Background()
	b := limiter.New(limiter.Options{Store: tb.store(t)})
	api := &lateAnswerAPI{API: tb.client}
	sa, err := dynamostore.New(api, tb.name)
	if err != nil {
		t.Fatal(err)
	}
	a := limiter.New(limiter.Options{Store: sa})
	api.during = func() {
		for i := range 5 {
			if res, err := b.Check(ctx, t0.Add(time.Duration(i)*time.Second), "ip:192.0.2.1", rules, 1); err != nil || !res.Allowed {
				t.Errorf("B's check %d: allowed %v, %v", i+1, res.Allowed, err)
			}
		}
	}
	if res, err := a.Check(ctx, t0, "ip:192.0.2.1", rules, 1); err != nil || !res.Allowed {
		t.Fatalf("A's first check: allowed %v, %v", res.Allowed, err)
	}
	counts := make([]int64, 1)
	slot := kvstore.Slot{Name: "minute", Bucket: t0.Unix() / 60, Length: time.Minute}
	if err := sa.Load(ctx, "ip:192.0.2.1", []kvstore.Slot{slot}, counts); err != nil || counts[0] != 1 {
		t.Fatalf("A's cache holds %d, %v; want 1, the table when A's write was applied", counts[0], err)
	}
	admitted := 0
	for range 8 {
		res, err := a.Check(ctx, t0.Add(10*time.Second), "ip:192.0.2.1", rules, 1)
		if err != nil {
			t.Fatal(err)
		}
		if res.Allowed {
			admitted++
		}
	}
	if admitted != 4 {
		t.Errorf("A admitted %d after B's 5, want 4 (the table's room)", admitted)
	}
	if got := tb.stored(t, "ip:192.0.2.1")[attr("minute", time.Minute, t0)]; got != 10 {
		t.Errorf("the table holds %d, want 10", got)
	}
}
