package dynamostore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/slidegate/slidegate/config"
	"github.com/slidegate/slidegate/kvstore"
	"github.com/slidegate/slidegate/kvstore/dynamostore"
	"github.com/slidegate/slidegate/window"
)

// fakeAPI records requests and answers them with the functions it is given.
type fakeAPI struct {
	updates []*dynamodb.UpdateItemInput
	gets    []*dynamodb.GetItemInput
	update  func(*dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error)
	get     func(*dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error)
}

func (f *fakeAPI) UpdateItem(_ context.Context, in *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	f.updates = append(f.updates, in)
	return f.update(in)
}

func (f *fakeAPI) GetItem(_ context.Context, in *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	f.gets = append(f.gets, in)
	if f.get == nil {
		return &dynamodb.GetItemOutput{}, nil
	}
	return f.get(in)
}

// item builds a returned item from "attribute", count pairs.
func item(kv ...any) map[string]types.AttributeValue {
	m := map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "k"}}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i].(string)] = &types.AttributeValueMemberN{Value: fmt.Sprint(kv[i+1])}
	}
	return m
}

// returns answers every UpdateItem with attrs.
func returns(attrs map[string]types.AttributeValue) func(*dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
	return func(*dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
		return &dynamodb.UpdateItemOutput{Attributes: attrs}, nil
	}
}

const b0 = int64(29384720) // a minute bucket in 2025

func minute(b int64) kvstore.Slot {
	return kvstore.Slot{Name: "minute", Bucket: b, Length: time.Minute}
}
func day(b int64) kvstore.Slot { return kvstore.Slot{Name: "day", Bucket: b, Length: 24 * time.Hour} }

func mustNew(t testing.TB, api dynamostore.API, opts ...dynamostore.Option) *dynamostore.Store {
	t.Helper()
	s, err := dynamostore.New(api, "tbl", opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

func TestNewRejects(t *testing.T) {
	if _, err := dynamostore.New(nil, "tbl"); !errors.Is(err, dynamostore.ErrClient) {
		t.Errorf("New(nil client) = %v, want ErrClient", err)
	}
	if _, err := dynamostore.New(&fakeAPI{}, ""); !errors.Is(err, dynamostore.ErrTable) {
		t.Errorf("New(empty table) = %v, want ErrTable", err)
	}
}

// resolve replaces the placeholders of expr with attribute names and values.
func resolve(in *dynamodb.UpdateItemInput, expr string) string {
	var pairs []string
	for k, v := range in.ExpressionAttributeNames {
		pairs = append(pairs, k, v)
	}
	for k, v := range in.ExpressionAttributeValues {
		pairs = append(pairs, k, v.(*types.AttributeValueMemberN).Value)
	}
	// Longest placeholders first, so that ":m1" never eats ":m10".
	type kv struct{ k, v string }
	var kvs []kv
	for i := 0; i < len(pairs); i += 2 {
		kvs = append(kvs, kv{pairs[i], pairs[i+1]})
	}
	slices.SortFunc(kvs, func(a, b kv) int { return len(b.k) - len(a.k) })
	for _, p := range kvs {
		expr = strings.ReplaceAll(expr, p.k, p.v)
	}
	return expr
}

func TestAddIfIsOneConditionalUpdate(t *testing.T) {
	api := &fakeAPI{update: returns(item("minute#1m0s#29384719", 4, "minute#1m0s#29384720", 3, "day#24h0m0s#20406", 9, "ttl", 1))}
	s := mustNew(t, api)
	conds := []kvstore.Cond{
		{Slot: minute(b0 - 1), Max: 4},
		{Slot: minute(b0), Max: 5, Add: 2},
		{Slot: day(20406 - 1), Max: 0},
		{Slot: day(20406), Max: 97, Add: 2},
	}
	counts := make([]int64, len(conds))
	ok, err := s.AddIf(context.Background(), "k", conds, counts)
	if err != nil || !ok {
		t.Fatalf("AddIf = %v, %v; want true, nil", ok, err)
	}
	if got, want := fmt.Sprint(counts), "[4 3 0 9]"; got != want {
		t.Errorf("counts = %s, want %s (from the returned item)", got, want)
	}
	if len(api.updates) != 1 || len(api.gets) != 0 {
		t.Fatalf("requests: %d updates, %d gets; want 1, 0", len(api.updates), len(api.gets))
	}
	in := api.updates[0]
	if got, want := resolve(in, aws.ToString(in.ConditionExpression)),
		"(attribute_not_exists(minute#1m0s#29384719) OR minute#1m0s#29384719 <= 4) AND "+
			"(attribute_not_exists(minute#1m0s#29384720) OR minute#1m0s#29384720 <= 5) AND "+
			"(attribute_not_exists(day#24h0m0s#20405) OR day#24h0m0s#20405 <= 0) AND "+
			"(attribute_not_exists(day#24h0m0s#20406) OR day#24h0m0s#20406 <= 97)"; got != want {
		t.Errorf("condition\n got %s\nwant %s", got, want)
	}
	// The TTL is the end of the day bucket after the current one.
	ttl := time.Unix(0, 0).Add(20408 * 24 * time.Hour).Unix()
	if got, want := resolve(in, aws.ToString(in.UpdateExpression)),
		fmt.Sprintf("SET ttl = %d ADD minute#1m0s#29384720 2, day#24h0m0s#20406 2", ttl); got != want {
		t.Errorf("update\n got %s\nwant %s", got, want)
	}
	if in.ReturnValues != types.ReturnValueAllNew || in.ReturnValuesOnConditionCheckFailure != types.ReturnValuesOnConditionCheckFailureAllOld {
		t.Errorf("ReturnValues = %q, on failure %q; want ALL_NEW, ALL_OLD", in.ReturnValues, in.ReturnValuesOnConditionCheckFailure)
	}
	if got := in.Key["id"].(*types.AttributeValueMemberS).Value; got != "k" || aws.ToString(in.TableName) != "tbl" {
		t.Errorf("key %q in table %q, want k in tbl", got, aws.ToString(in.TableName))
	}
}

func TestAddIfNegativeMaxNeedsTheAttribute(t *testing.T) {
	api := &fakeAPI{update: returns(item("minute#1m0s#29384720", 1))}
	s := mustNew(t, api)
	_, err := s.AddIf(context.Background(), "k", []kvstore.Cond{{Slot: minute(b0), Max: -1, Add: 1}}, make([]int64, 1))
	if err != nil {
		t.Fatal(err)
	}
	in := api.updates[0]
	if got, want := resolve(in, aws.ToString(in.ConditionExpression)), "minute#1m0s#29384720 <= -1"; got != want {
		t.Errorf("condition = %s, want %s: a missing counter (0) must fail a negative max", got, want)
	}
}

func TestAddIfFailureUsesReturnedItem(t *testing.T) {
	ccf := func(attrs map[string]types.AttributeValue) func(*dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
		return func(*dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
			return nil, fmt.Errorf("operation error: %w", &types.ConditionalCheckFailedException{Message: aws.String("failed"), Item: attrs})
		}
	}
	api := &fakeAPI{update: ccf(item("minute#1m0s#29384720", 10))}
	s := mustNew(t, api)
	counts := make([]int64, 2)
	conds := []kvstore.Cond{{Slot: minute(b0 - 1), Max: 0}, {Slot: minute(b0), Max: 9, Add: 1}}
	ok, err := s.AddIf(context.Background(), "k", conds, counts)
	if err != nil || ok {
		t.Fatalf("AddIf = %v, %v; want false, nil", ok, err)
	}
	if got, want := fmt.Sprint(counts), "[0 10]"; got != want {
		t.Errorf("counts = %s, want %s", got, want)
	}
	if len(api.gets) != 0 {
		t.Errorf("%d GetItem after a failure that returned the item, want 0", len(api.gets))
	}
	// The failure refreshed the cache.
	loaded := make([]int64, 2)
	if err := s.Load(context.Background(), "k", []kvstore.Slot{minute(b0 - 1), minute(b0)}, loaded); err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(loaded), "[0 10]"; got != want {
		t.Errorf("Load after failure = %s, want %s", got, want)
	}
	// The server has shown that it returns items: a failure without one
	// means no item, and needs no read.
	api.update = ccf(nil)
	if ok, err := s.AddIf(context.Background(), "other", conds, counts); err != nil || ok {
		t.Fatalf("AddIf = %v, %v; want false, nil", ok, err)
	}
	if len(api.gets) != 0 {
		t.Errorf("%d GetItem, want 0", len(api.gets))
	}
}

func TestAddIfFailureWithoutItemReads(t *testing.T) {
	api := &fakeAPI{
		update: func(*dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
			return nil, &types.ConditionalCheckFailedException{Message: aws.String("failed")}
		},
		get: func(*dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) {
			return &dynamodb.GetItemOutput{Item: item("minute#1m0s#29384720", 7)}, nil
		},
	}
	s := mustNew(t, api)
	counts := make([]int64, 1)
	ok, err := s.AddIf(context.Background(), "k", []kvstore.Cond{{Slot: minute(b0), Max: 6, Add: 1}}, counts)
	if err != nil || ok || counts[0] != 7 {
		t.Fatalf("AddIf = %v, %v, counts %v; want false, nil, [7]", ok, err, counts)
	}
	if len(api.gets) != 1 || !aws.ToBool(api.gets[0].ConsistentRead) {
		t.Fatalf("want one consistent GetItem, got %d", len(api.gets))
	}
}

func TestErrorsAreWrapped(t *testing.T) {
	boom := errors.New("boom")
	api := &fakeAPI{update: func(*dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) { return nil, boom }}
	s := mustNew(t, api)
	_, err := s.AddIf(context.Background(), "k", []kvstore.Cond{{Slot: minute(b0), Max: 1, Add: 1}}, make([]int64, 1))
	if !errors.Is(err, boom) || !strings.HasPrefix(err.Error(), "dynamostore: ") {
		t.Errorf("AddIf error = %v, want dynamostore-prefixed wrap of boom", err)
	}
	if err := s.Add(context.Background(), "k", []kvstore.Slot{minute(b0)}, []int64{1}); !errors.Is(err, boom) {
		t.Errorf("Add error = %v, want wrap of boom", err)
	}
}

func TestBadInput(t *testing.T) {
	api := &fakeAPI{update: returns(item("minute#1m0s#29384720", "x"))}
	s := mustNew(t, api)
	ctx := context.Background()
	tests := []struct {
		name string
		err  error
		want error
	}{
		{"load length", s.Load(ctx, "k", []kvstore.Slot{minute(b0)}, nil), dynamostore.ErrLength},
		{"add length", s.Add(ctx, "k", []kvstore.Slot{minute(b0)}, nil), dynamostore.ErrLength},
		{"addif slot", func() error {
			_, err := s.AddIf(ctx, "k", []kvstore.Cond{{Slot: kvstore.Slot{Name: "m"}, Add: 1}}, make([]int64, 1))
			return err
		}(), dynamostore.ErrSlot},
		{"malformed count", s.Add(ctx, "k", []kvstore.Slot{minute(b0)}, []int64{1}), dynamostore.ErrItem},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !errors.Is(tt.err, tt.want) {
				t.Errorf("error = %v, want %v", tt.err, tt.want)
			}
		})
	}
}

func TestLoadSendsNoRequest(t *testing.T) {
	api := &fakeAPI{update: returns(item("minute#1m0s#29384719", 5, "minute#1m0s#29384720", 2))}
	s := mustNew(t, api)
	ctx := context.Background()
	counts := make([]int64, 2)
	if err := s.Load(ctx, "never-seen", []kvstore.Slot{minute(b0 - 1), minute(b0)}, counts); err != nil {
		t.Fatal(err)
	}
	if err := s.Add(ctx, "k", []kvstore.Slot{minute(b0)}, []int64{1}); err != nil {
		t.Fatal(err)
	}
	if err := s.Load(ctx, "k", []kvstore.Slot{minute(b0 - 1), minute(b0)}, counts); err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(counts), "[5 2]"; got != want {
		t.Errorf("Load = %s, want %s from the last returned item", got, want)
	}
	if len(api.updates) != 1 || len(api.gets) != 0 {
		t.Errorf("requests: %d updates, %d gets; want 1 (the Add), 0", len(api.updates), len(api.gets))
	}
}

func TestNothingToWriteSendsNothing(t *testing.T) {
	api := &fakeAPI{update: returns(item())}
	s := mustNew(t, api)
	if err := s.Add(context.Background(), "k", []kvstore.Slot{minute(b0), day(20406)}, []int64{0, 0}); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.AddIf(context.Background(), "k", nil, nil); !ok || err != nil {
		t.Errorf("AddIf without clauses = %v, %v; want true, nil", ok, err)
	}
	if len(api.updates) != 0 {
		t.Errorf("%d updates with nothing to add, want 0", len(api.updates))
	}
}

func TestOldBucketsRemovedAndTTLNeverShrinks(t *testing.T) {
	dayTTL := time.Unix(0, 0).Add(20408 * 24 * time.Hour).Unix()
	api := &fakeAPI{update: returns(item(
		"minute#1m0s#29384717", 1, "minute#1m0s#29384718", 2, "minute#1m0s#29384719", 3,
		"minute#1m0s#29384720", 1, "day#24h0m0s#20406", 6, "other#1m0s#1", 1, "ttl", dayTTL))}
	s := mustNew(t, api)
	ctx := context.Background()
	if err := s.Add(ctx, "k", []kvstore.Slot{minute(b0 - 1)}, []int64{1}); err != nil {
		t.Fatal(err)
	}
	// Now in bucket b0: buckets before b0-2 of the same rule go; the
	// previous bucket and the one before it (still the previous bucket of
	// a node whose clock lags), other rules and other lengths stay. Only the minute
	// slot is written, but the cached day TTL is kept.
	if err := s.Add(ctx, "k", []kvstore.Slot{minute(b0)}, []int64{1}); err != nil {
		t.Fatal(err)
	}
	in := api.updates[1]
	want := fmt.Sprintf("SET ttl = %d ADD minute#1m0s#29384720 1 REMOVE ", dayTTL)
	got := resolve(in, aws.ToString(in.UpdateExpression))
	if !strings.HasPrefix(got, want) {
		t.Fatalf("update = %s, want prefix %s", got, want)
	}
	removed := strings.Split(strings.TrimPrefix(got, want), ", ")
	slices.Sort(removed)
	if got, want := fmt.Sprint(removed), "[minute#1m0s#29384717]"; got != want {
		t.Errorf("removed %s, want %s", got, want)
	}
}

func TestDuplicateSlotsMerge(t *testing.T) {
	api := &fakeAPI{update: returns(item("minute#1m0s#29384720", 3))}
	s := mustNew(t, api)
	counts := make([]int64, 2)
	if _, err := s.AddIf(context.Background(), "k", []kvstore.Cond{{Slot: minute(b0), Max: 5, Add: 1}, {Slot: minute(b0), Max: 4, Add: 2}}, counts); err != nil {
		t.Fatal(err)
	}
	in := api.updates[0]
	if got, want := resolve(in, aws.ToString(in.UpdateExpression)), "ADD minute#1m0s#29384720 3"; !strings.HasSuffix(got, want) {
		t.Errorf("update = %s, want one ADD of 3 (two paths must not overlap)", got)
	}
	if got, want := fmt.Sprint(counts), "[3 3]"; got != want {
		t.Errorf("counts = %s, want %s", got, want)
	}
}

func TestNegativeAddReplacesCache(t *testing.T) {
	api := &fakeAPI{update: returns(item("minute#1m0s#29384720", 5))}
	s := mustNew(t, api)
	ctx := context.Background()
	if err := s.Add(ctx, "k", []kvstore.Slot{minute(b0)}, []int64{5}); err != nil {
		t.Fatal(err)
	}
	api.update = returns(item("minute#1m0s#29384720", 3))
	if err := s.Add(ctx, "k", []kvstore.Slot{minute(b0)}, []int64{-2}); err != nil {
		t.Fatal(err)
	}
	counts := make([]int64, 1)
	if err := s.Load(ctx, "k", []kvstore.Slot{minute(b0)}, counts); err != nil {
		t.Fatal(err)
	}
	if counts[0] != 3 {
		t.Errorf("Load after undo = %d, want 3 (an undo must not keep the higher count)", counts[0])
	}
}

// TestStaleResponseDoesNotLowerCache: of two writes in flight at once,
// either may be answered last with the older state; the cache keeps the
// larger count of each counter.
func TestStaleResponseDoesNotLowerCache(t *testing.T) {
	for _, last := range []int{0, 1} {
		t.Run(fmt.Sprintf("write %d answered last", last+1), func(t *testing.T) {
			api := &fakeAPI{}
			s := mustNew(t, api)
			ctx := context.Background()
			one := []kvstore.Cond{{Slot: minute(b0), Max: 100, Add: 1}}
			write := func() error {
				_, err := s.AddIf(ctx, "k", one, make([]int64, 1))
				return err
			}
			answers := [2]map[string]types.AttributeValue{item("minute#1m0s#29384720", 8), item("minute#1m0s#29384720", 8)}
			answers[last] = item("minute#1m0s#29384720", 6)
			overlap(t, api, answers, last, [2]func() error{write, write})
			counts := make([]int64, 1)
			if err := s.Load(ctx, "k", []kvstore.Slot{minute(b0)}, counts); err != nil {
				t.Fatal(err)
			}
			if counts[0] != 8 {
				t.Errorf("Load = %d, want 8 (the larger of two observations)", counts[0])
			}
		})
	}
}

// overlap runs two calls that each send one UpdateItem through api, the
// first sent before the second, so that both are in flight at once: the
// i-th sent is answered with answers[i], calls[last]'s after the other's.
func overlap(t *testing.T, api *fakeAPI, answers [2]map[string]types.AttributeValue, last int, calls [2]func() error) {
	t.Helper()
	var entered, release [2]chan struct{}
	for i := range 2 {
		entered[i], release[i] = make(chan struct{}), make(chan struct{})
	}
	var mu sync.Mutex
	sent := 0
	api.update = func(*dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
		mu.Lock()
		i := sent
		sent++
		mu.Unlock()
		if i >= len(answers) {
			// A raise of the TTL after a write (keepTTL), which is not
			// one of the two calls.
			return &dynamodb.UpdateItemOutput{}, nil
		}
		close(entered[i])
		<-release[i]
		return &dynamodb.UpdateItemOutput{Attributes: answers[i]}, nil
	}
	var done [2]chan error
	for i, call := range calls {
		done[i] = make(chan error, 1)
		go func() { done[i] <- call() }()
		<-entered[i]
	}
	for _, i := range []int{1 - last, last} {
		close(release[i])
		if err := <-done[i]; err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
	}
}

// TestLaterAnswerReplacesCache: the answer to a call that overlapped no
// other is the newest state the Store knows, lower counts included
// (another instance took counts back, or the item was deleted): it
// replaces the cached counts. Kept as the larger of the two, 8 stood above
// the table's 6, and the limiter refused on it, as final, requests the
// table had room for until the bucket stopped being read.
func TestLaterAnswerReplacesCache(t *testing.T) {
	ctx := context.Background()
	one := []kvstore.Cond{{Slot: minute(b0), Max: 100, Add: 1}}
	tests := []struct {
		name string
		call func(api *fakeAPI, s *dynamostore.Store) error
		want int64
	}{
		{"write", func(api *fakeAPI, s *dynamostore.Store) error {
			api.update = returns(item("minute#1m0s#29384720", 6))
			_, err := s.AddIf(ctx, "k", one, make([]int64, 1))
			return err
		}, 6},
		{"read of an item deleted", func(_ *fakeAPI, s *dynamostore.Store) error {
			return s.Read(ctx, "k", []kvstore.Slot{minute(b0)}, make([]int64, 1))
		}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := &fakeAPI{update: returns(item("minute#1m0s#29384720", 8))}
			s := mustNew(t, api)
			if _, err := s.AddIf(ctx, "k", one, make([]int64, 1)); err != nil {
				t.Fatal(err)
			}
			if err := tt.call(api, s); err != nil {
				t.Fatal(err)
			}
			counts := make([]int64, 1)
			if err := s.Load(ctx, "k", []kvstore.Slot{minute(b0)}, counts); err != nil {
				t.Fatal(err)
			}
			if counts[0] != tt.want {
				t.Errorf("Load = %d, want %d (the latest answer)", counts[0], tt.want)
			}
		})
	}
}

// TestEveryPlaceholderIsUsed: DynamoDB rejects an expression attribute name
// or value that no expression uses (dynalite does not check).
func TestEveryPlaceholderIsUsed(t *testing.T) {
	api := &fakeAPI{update: returns(item("minute#1m0s#29384717", 1, "minute#1m0s#29384720", 2))}
	s := mustNew(t, api)
	ctx := context.Background()
	_ = s.Add(ctx, "k", []kvstore.Slot{minute(b0 - 3)}, []int64{1})
	_, _ = s.AddIf(ctx, "k", []kvstore.Cond{{Slot: minute(b0 - 1), Max: 3}, {Slot: minute(b0), Max: 5, Add: 1}, {Slot: day(20406), Max: -1, Add: 1}}, make([]int64, 3))
	_ = s.Add(ctx, "k", []kvstore.Slot{minute(b0), day(20406)}, []int64{-1, 0})
	if len(api.updates) != 3 {
		t.Fatalf("%d updates, want 3", len(api.updates))
	}
	for i, in := range api.updates {
		exprs := aws.ToString(in.UpdateExpression) + " " + aws.ToString(in.ConditionExpression)
		for k := range in.ExpressionAttributeNames {
			if !usesPlaceholder(exprs, k) {
				t.Errorf("update %d: name %s unused in %q", i, k, exprs)
			}
		}
		for k := range in.ExpressionAttributeValues {
			if !usesPlaceholder(exprs, k) {
				t.Errorf("update %d: value %s unused in %q", i, k, exprs)
			}
		}
	}
}

// usesPlaceholder reports whether p occurs in expr as a whole token.
func usesPlaceholder(expr, p string) bool {
	for i := 0; ; {
		j := strings.Index(expr[i:], p)
		if j < 0 {
			return false
		}
		end := i + j + len(p)
		if end == len(expr) || !strings.ContainsRune("abcdefghijklmnopqrstuvwxyz0123456789", rune(expr[end])) {
			return true
		}
		i = end
	}
}

// TestTTLFromMaxPeriod: with MaxPeriod (of a configuration's LongestWindow),
// a write's TTL is at least the end of its bucket plus two such periods,
// whatever the rules it writes; without, the written slots decide.
func TestTTLFromMaxPeriod(t *testing.T) {
	cfg, err := config.Parse([]byte(`{"plans":{"p":{"limits":[{"name":"minute","limit":5,"window":"1m"},{"name":"day","limit":9,"window":"24h"}]}},` +
		`"default_plan":"p","ip_limits":[{"name":"week","limit":9,"window":"168h"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	end := window.Start(b0+1, time.Minute)
	tests := []struct {
		name string
		opts []dynamostore.Option
		want time.Time
	}{
		{"none", nil, window.Start(b0+2, time.Minute)},
		{"zero", []dynamostore.Option{dynamostore.MaxPeriod(0)}, window.Start(b0+2, time.Minute)},
		{"one day", []dynamostore.Option{dynamostore.MaxPeriod(24 * time.Hour)}, end.Add(48 * time.Hour)},
		{"of a configuration: ip_limits' week", []dynamostore.Option{dynamostore.MaxPeriod(cfg.LongestWindow())}, end.Add(2 * 168 * time.Hour)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := &fakeAPI{update: returns(item("minute#1m0s#29384720", 1))}
			s := mustNew(t, api, tt.opts...)
			if err := s.Add(context.Background(), "k", []kvstore.Slot{minute(b0)}, []int64{1}); err != nil {
				t.Fatal(err)
			}
			in := api.updates[0]
			got := resolve(in, aws.ToString(in.UpdateExpression))
			if want := fmt.Sprintf("SET ttl = %d ADD ", tt.want.Unix()); !strings.HasPrefix(got, want) {
				t.Errorf("update = %s, want prefix %s", got, want)
			}
		})
	}
}

// TestRaiseMaxPeriod: RaiseMaxPeriod lengthens the TTL of the writes that
// follow (a reloaded configuration's longer window), and a shorter period
// never shortens it: counters written under the longer one may still be
// read.
func TestRaiseMaxPeriod(t *testing.T) {
	end := window.Start(b0+1, time.Minute)
	api := &fakeAPI{update: returns(item("minute#1m0s#29384720", 1))}
	s := mustNew(t, api, dynamostore.MaxPeriod(24*time.Hour))
	for i, tt := range []struct {
		raise time.Duration
		want  time.Time
	}{
		{0, end.Add(48 * time.Hour)},
		{168 * time.Hour, end.Add(2 * 168 * time.Hour)},
		{time.Hour, end.Add(2 * 168 * time.Hour)},
	} {
		s.RaiseMaxPeriod(tt.raise)
		if err := s.Add(context.Background(), "k", []kvstore.Slot{minute(b0)}, []int64{1}); err != nil {
			t.Fatal(err)
		}
		in := api.updates[i]
		got := resolve(in, aws.ToString(in.UpdateExpression))
		if want := fmt.Sprintf("SET ttl = %d ADD ", tt.want.Unix()); !strings.HasPrefix(got, want) {
			t.Errorf("after RaiseMaxPeriod(%s): update = %s, want prefix %s", tt.raise, got, want)
		}
	}
}

// TestAnswerWithoutCounters: a write answered without the counters it
// added (an endpoint that answers 200 "{}") is an ErrItem, not a success
// with counts of zero, and caches nothing.
func TestAnswerWithoutCounters(t *testing.T) {
	for _, answer := range []map[string]types.AttributeValue{nil, item(), item("ttl", 1, "minute#1m0s#29384719", 3)} {
		t.Run(fmt.Sprint(len(answer)), func(t *testing.T) {
			s := mustNew(t, &fakeAPI{update: returns(answer)})
			ctx := context.Background()
			if ok, err := s.AddIf(ctx, "k", []kvstore.Cond{{Slot: minute(b0 - 1), Max: 5}, {Slot: minute(b0), Max: 5, Add: 1}}, make([]int64, 2)); ok || !errors.Is(err, dynamostore.ErrItem) {
				t.Errorf("AddIf = %v, %v; want false, ErrItem", ok, err)
			}
			if err := s.Add(ctx, "k", []kvstore.Slot{minute(b0)}, []int64{1}); !errors.Is(err, dynamostore.ErrItem) {
				t.Errorf("Add = %v, want ErrItem", err)
			}
			counts := make([]int64, 2)
			if err := s.Load(ctx, "k", []kvstore.Slot{minute(b0 - 1), minute(b0)}, counts); err != nil || counts[0] != 0 || counts[1] != 0 {
				t.Errorf("Load = %v, %v; want [0 0]: nothing cached from the answer", counts, err)
			}
		})
	}
}

// TestTTLOfEachPeriod: for a rule of any period (a second, an odd 90 s, a
// minute, a day, the longest window), the item lives at least until the
// written bucket stops being read as the previous one (two periods from its
// start): exactly then without MaxPeriod, and one period later with
// MaxPeriod set to the rule's own period, never longer.
func TestTTLOfEachPeriod(t *testing.T) {
	for _, period := range []time.Duration{time.Second, 90 * time.Second, time.Minute, 24 * time.Hour, config.MaxWindow} {
		b := window.Index(time.Date(2026, 11, 22, 12, 0, 7, 0, time.UTC), period)
		sl := kvstore.Slot{Name: "r", Bucket: b, Length: period}
		for _, tt := range []struct {
			name string
			opts []dynamostore.Option
			want time.Time
		}{
			{"alone", nil, window.Start(b+2, period)},
			{"MaxPeriod", []dynamostore.Option{dynamostore.MaxPeriod(period)}, window.Start(b+3, period)},
		} {
			t.Run(period.String()+"/"+tt.name, func(t *testing.T) {
				api := &fakeAPI{update: returns(item(sl.Name+"#"+period.String()+"#"+fmt.Sprint(b), 1))}
				s := mustNew(t, api, tt.opts...)
				if ok, err := s.AddIf(context.Background(), "k", []kvstore.Cond{{Slot: sl, Max: 5, Add: 1}}, make([]int64, 1)); err != nil || !ok {
					t.Fatalf("AddIf = %v, %v", ok, err)
				}
				got := resolve(api.updates[0], aws.ToString(api.updates[0].UpdateExpression))
				if want := fmt.Sprintf("SET ttl = %d ADD ", tt.want.Unix()); !strings.HasPrefix(got, want) {
					t.Errorf("update = %s, want prefix %s (bucket start + %s)", got, want, tt.want.Sub(window.Start(b, period)))
				}
			})
		}
	}
}
