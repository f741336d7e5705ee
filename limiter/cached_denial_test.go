package limiter

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/slidegate/slidegate/kvstore"
	"github.com/slidegate/slidegate/kvstore/memstore"
	"github.com/slidegate/slidegate/window"
)

// cachedTable is DynamoDB's shape as one instance sees it: Load answers
// from the instance's cache (cache), Read, AddIf and Add go to the table
// (table), which other instances write to as well. reads counts the
// Reads.
type cachedTable struct {
	cache, table *memstore.Store
	reads        int
	fail         error // Read's error, when set
}

var _ kvstore.Reader = (*cachedTable)(nil)

func (c *cachedTable) Load(ctx context.Context, id string, slots []kvstore.Slot, counts []int64) error {
	return c.cache.Load(ctx, id, slots, counts)
}

func (c *cachedTable) Read(ctx context.Context, id string, slots []kvstore.Slot, counts []int64) error {
	c.reads++
	if c.fail != nil {
		return c.fail
	}
	return c.table.Load(ctx, id, slots, counts)
}

func (c *cachedTable) Add(ctx context.Context, id string, slots []kvstore.Slot, costs []int64) error {
	return c.table.Add(ctx, id, slots, costs)
}

func (c *cachedTable) AddIf(ctx context.Context, id string, conds []kvstore.Cond, counts []int64) (bool, error) {
	return c.table.AddIf(ctx, id, conds, counts)
}

// TestDenialOnCachedCountsWaitsForTheTable: on DynamoDB a denial decided
// on the instance's cached counts made no write, so its RetryAfter was
// that of the cached counts, lower bounds that miss what other instances
// added since: with a minute of 10 at 12:00:30, 6 of the previous minute
// cached where the table held 10 and 8 this minute, the client was told
// 10 s where the request fits after 18 s, and met a second 429 at its
// retry. The table is read once for such a denial, so RetryAfter is
// exact; and a cached count above the table's (another instance took
// back a count) no longer refuses a request the table has room for.
func TestDenialOnCachedCountsWaitsForTheTable(t *testing.T) {
	r := rule("minute", 10, time.Minute)
	at := time.Date(2026, 11, 22, 12, 0, 30, 0, time.UTC)
	i := window.Index(at, r.Period)
	prev := kvstore.Slot{Name: r.Name, Bucket: i - 1, Length: r.Period}
	cur := kvstore.Slot{Name: r.Name, Bucket: i, Length: r.Period}
	for _, tc := range []struct {
		name                 string
		cachePrev, tablePrev int64
		cacheCur, tableCur   int64
		allowed              bool
	}{
		{"cache below the table", 6, 10, 8, 8, false},
		{"cache above the table", 10, 10, 8, 3, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &cachedTable{cache: memstore.New(), table: memstore.New()}
			mustAdd := func(s *memstore.Store, sl kvstore.Slot, n int64) {
				if err := s.Add(ctx, "id", []kvstore.Slot{sl}, []int64{n}); err != nil {
					t.Fatal(err)
				}
			}
			mustAdd(st.cache, prev, tc.cachePrev)
			mustAdd(st.cache, cur, tc.cacheCur)
			mustAdd(st.table, prev, tc.tablePrev)
			mustAdd(st.table, cur, tc.tableCur)
			l := New(Options{Store: st})
			res := check(t, l, at, "id", 1, r)
			want := r.Decide(at, tc.tablePrev, tc.tableCur, 1)
			if res.Decision != want {
				t.Errorf("decision\n\tgot  %+v\n\twant %+v (the table's counts)", res.Decision, want)
			}
			if res.Allowed != tc.allowed {
				t.Errorf("allowed %t, want %t", res.Allowed, tc.allowed)
			}
			if st.reads != 1 {
				t.Errorf("%d reads of the table, want 1", st.reads)
			}
			// The denial is remembered on the table's counts: the next
			// request is answered from memory, without another read.
			if !tc.allowed {
				if res := check(t, l, at.Add(time.Second), "id", 1, r); !res.Cached || res.RetryAfter != want.RetryAfter-time.Second {
					t.Errorf("next request: cached %t, RetryAfter %v, want cached with %v", res.Cached, res.RetryAfter, want.RetryAfter-time.Second)
				}
				if st.reads != 1 {
					t.Errorf("%d reads of the table after the cached answer, want 1", st.reads)
				}
			}
		})
	}
}

// TestDenialOnCachedCountsReadFails: a read of the table that fails
// leaves the denial on the cached counts, not a store error (which
// on_store_error "allow" would admit); with CountDenied (no deny cache)
// the table is not read, as it would be for every denied request.
func TestDenialOnCachedCountsReadFails(t *testing.T) {
	r := rule("minute", 10, time.Minute)
	at := time.Date(2026, 11, 22, 12, 0, 30, 0, time.UTC)
	cur := kvstore.Slot{Name: r.Name, Bucket: window.Index(at, r.Period), Length: r.Period}
	for _, tc := range []struct {
		name        string
		fail        error
		countDenied bool
		reads       int
	}{
		{"read fails", errors.New("throttled"), false, 1},
		{"count denied", nil, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &cachedTable{cache: memstore.New(), table: memstore.New(), fail: tc.fail}
			for _, s := range []*memstore.Store{st.cache, st.table} {
				if err := s.Add(ctx, "id", []kvstore.Slot{cur}, []int64{10}); err != nil {
					t.Fatal(err)
				}
			}
			l := New(Options{Store: st, CountDenied: tc.countDenied})
			res, err := l.Check(ctx, at, "id", []Rule{r}, 1)
			if err != nil || res.Allowed {
				t.Fatalf("Allowed %t, err %v; want a denial without error", res.Allowed, err)
			}
			if want := r.Decide(at, 0, 10, 1).RetryAfter; !tc.countDenied && res.RetryAfter != want {
				t.Errorf("RetryAfter %v, want %v (the cached counts)", res.RetryAfter, want)
			}
			if st.reads != tc.reads {
				t.Errorf("%d reads of the table, want %d", st.reads, tc.reads)
			}
		})
	}
}

// instance is DynamoDB's store as one instance of several sees it: Load
// answers from its cache, which holds the counts the table returned to its
// last call (the item: every slot of slots), and Read, Add and AddIf go to
// the table.
type instance struct {
	cache, table *memstore.Store
	slots        func() []kvstore.Slot
}

// answer sets the cache to the table's counts, as DynamoDB's answer to a
// call replaces the cached item.
func (s *instance) answer(id string) {
	sl := s.slots()
	have, want := make([]int64, len(sl)), make([]int64, len(sl))
	if err := s.cache.Load(ctx, id, sl, have); err != nil {
		panic(err)
	}
	if err := s.table.Load(ctx, id, sl, want); err != nil {
		panic(err)
	}
	for i := range sl {
		want[i] -= have[i]
	}
	if err := s.cache.Add(ctx, id, sl, want); err != nil {
		panic(err)
	}
}

func (s *instance) Load(ctx context.Context, id string, slots []kvstore.Slot, counts []int64) error {
	return s.cache.Load(ctx, id, slots, counts)
}

func (s *instance) Read(ctx context.Context, id string, slots []kvstore.Slot, counts []int64) error {
	s.answer(id)
	return s.table.Load(ctx, id, slots, counts)
}

func (s *instance) Add(ctx context.Context, id string, slots []kvstore.Slot, costs []int64) error {
	defer s.answer(id)
	return s.table.Add(ctx, id, slots, costs)
}

func (s *instance) AddIf(ctx context.Context, id string, conds []kvstore.Cond, counts []int64) (bool, error) {
	defer s.answer(id)
	return s.table.AddIf(ctx, id, conds, counts)
}

// TestRetryAfterExactAcrossInstances: a client served by two instances on
// one table, one to three rules, costs of 1 to 3. Every denial's
// RetryAfter is exact against the table's counts at the time of the
// denial: at now+RetryAfter the table admits the request, a nanosecond
// earlier it does not. Decided on an instance's cached counts, 1,101 of
// the denials of these seeds were not (costs of 1 alone were all exact: a
// cached count another instance has since raised then admits, and the
// failed conditional write returns the table's counts).
func TestRetryAfterExactAcrossInstances(t *testing.T) {
	periods := []time.Duration{time.Second, 10 * time.Second, time.Minute, time.Hour}
	checked := 0
	for seed := range uint64(400) {
		rng := rand.New(rand.NewPCG(seed, 3))
		rules := make([]Rule, 1+rng.IntN(3))
		for i := range rules {
			rules[i] = rule(fmt.Sprint("r", i), 2+rng.Int64N(8), periods[rng.IntN(len(periods))])
		}
		now := t0.Add(time.Duration(rng.Int64N(int64(time.Hour))))
		slots := func() []kvstore.Slot { // the item: the buckets a write near now can touch
			var out []kvstore.Slot
			for _, r := range rules {
				i := window.Index(now, r.Period)
				for b := i - 2; b <= i+1; b++ {
					out = append(out, kvstore.Slot{Name: r.Name, Bucket: b, Length: r.Period})
				}
			}
			return out
		}
		table := memstore.New()
		var instances [2]*Limiter
		for i := range instances {
			instances[i] = New(Options{Store: &instance{cache: memstore.New(), table: table, slots: slots}})
		}
		for range 80 {
			now = now.Add(time.Duration(rng.Int64N(int64(700 * time.Millisecond))))
			cost := 1 + rng.Int64N(3)
			res := check(t, instances[rng.IntN(2)], now, "id", cost, rules...)
			if res.Allowed || res.RetryAfter == window.Never {
				continue
			}
			checked++
			admits := func(at time.Time) bool {
				for _, r := range rules {
					i := window.Index(at, r.Period)
					c := make([]int64, 2)
					sl := []kvstore.Slot{{Name: r.Name, Bucket: i - 1, Length: r.Period}, {Name: r.Name, Bucket: i, Length: r.Period}}
					if err := table.Load(ctx, "id", sl, c); err != nil {
						t.Fatal(err)
					}
					if !r.Decide(at, c[0], c[1], cost).Allowed {
						return false
					}
				}
				return true
			}
			if !admits(now.Add(res.RetryAfter)) || admits(now.Add(res.RetryAfter-1)) {
				t.Fatalf("seed %d, rules %v, cost %d at %s: RetryAfter %v (cached %t) is not the table's",
					seed, rules, cost, now.Format(time.TimeOnly), res.RetryAfter, res.Cached)
			}
		}
	}
	if checked < 500 {
		t.Errorf("only %d denials checked", checked)
	}
}
