package limiter

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slidegate/slidegate/kvstore"
	"github.com/slidegate/slidegate/kvstore/memstore"
	"github.com/slidegate/slidegate/window"
)

var (
	ctx = context.Background()
	// t0 is 30 s into a minute bucket.
	t0     = time.Date(2026, 11, 22, 11, 59, 30, 0, time.UTC)
	minute = Rule{Rule: window.Rule{Name: "minute", Limit: 10, Period: time.Minute}}
	day    = Rule{Rule: window.Rule{Name: "day", Limit: 15, Period: 24 * time.Hour}}
)

func rule(name string, limit int64, period time.Duration) Rule {
	return Rule{Rule: window.Rule{Name: name, Limit: limit, Period: period}}
}

// counting wraps a store and counts calls; hideCond turns a Conditional
// into a plain Store; staleLoad makes Load report zeros (a cold cache).
type counting struct {
	kvstore.Conditional
	loads, adds, addIfs atomic.Int64
	staleLoad           bool
	fail                error
}

func (c *counting) Load(ctx context.Context, id string, slots []kvstore.Slot, counts []int64) error {
	c.loads.Add(1)
	if c.fail != nil {
		return c.fail
	}
	if c.staleLoad {
		clear(counts)
		return nil
	}
	return c.Conditional.Load(ctx, id, slots, counts)
}

func (c *counting) Add(ctx context.Context, id string, slots []kvstore.Slot, costs []int64) error {
	c.adds.Add(1)
	if c.fail != nil {
		return c.fail
	}
	return c.Conditional.Add(ctx, id, slots, costs)
}

func (c *counting) AddIf(ctx context.Context, id string, conds []kvstore.Cond, counts []int64) (bool, error) {
	c.addIfs.Add(1)
	if c.fail != nil {
		return false, c.fail
	}
	return c.Conditional.AddIf(ctx, id, conds, counts)
}

func (c *counting) calls() int64 { return c.loads.Load() + c.adds.Load() + c.addIfs.Load() }

// plain hides AddIf, as Workers KV does.
type plain struct{ kvstore.Store }

// updater hides UpdateRule: the limiter takes its general path, with an
// Admitter, for one rule too.
type updater struct{ kvstore.Updater }

func load(t *testing.T, s kvstore.Store, id string, r Rule, at time.Time) int64 {
	t.Helper()
	counts := []int64{0}
	sl := kvstore.Slot{Name: r.Name, Bucket: window.Index(at, r.Period), Length: r.Period}
	if err := s.Load(ctx, id, []kvstore.Slot{sl}, counts); err != nil {
		t.Fatal(err)
	}
	return counts[0]
}

func check(t *testing.T, l *Limiter, at time.Time, id string, cost int64, rules ...Rule) Result {
	t.Helper()
	res, err := l.Check(ctx, at, id, rules, cost)
	if err != nil {
		t.Fatalf("Check(%s, %s, cost %d): %v", at.Format(time.TimeOnly), id, cost, err)
	}
	return res
}

func TestAdmitsUpToLimitThenDenies(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store func() kvstore.Store
	}{
		{"conditional", func() kvstore.Store { return memstore.New() }},
		{"plain", func() kvstore.Store { return plain{memstore.New()} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.store()
			l := New(Options{Store: s})
			for i := range 10 {
				res := check(t, l, t0, "k", 1, minute)
				if !res.Allowed || res.Remaining != int64(9-i) {
					t.Fatalf("request %d: allowed=%v remaining=%d, want true %d", i+1, res.Allowed, res.Remaining, 9-i)
				}
			}
			res := check(t, l, t0, "k", 1, minute)
			if res.Allowed || res.Rule != "minute" || res.Remaining != 0 {
				t.Fatalf("11th: %+v, want denied by minute with 0 remaining", res.Decision)
			}
			// The 10 become the previous bucket at the boundary, weighted 1
			// there; floor(10 × overlap) <= 9 from 1 ns after it.
			if got, want := res.RetryAfter, 30*time.Second+1; got != want {
				t.Errorf("RetryAfter = %v, want %v", got, want)
			}
			if got := load(t, s, "k", minute, t0); got != 10 {
				t.Errorf("stored count = %d, want 10 (denied requests are not counted)", got)
			}
		})
	}
}

func TestBoundaryBurst(t *testing.T) {
	// 100 at 11:59:59 and 100 at 12:00:01 against 100/min must not all pass.
	l := New(Options{DisableDenyCache: true})
	r := rule("minute", 100, time.Minute)
	admitted := 0
	for _, at := range []time.Time{t0.Add(29 * time.Second), t0.Add(31 * time.Second)} {
		for range 100 {
			if check(t, l, at, "burst", 1, r).Allowed {
				admitted++
			}
		}
	}
	// 100 before the boundary; after it floor(100 × 59/60) = 98 are still
	// inside the window, so 2 more.
	if got, want := admitted, 102; got != want {
		t.Errorf("admitted %d of 200, want %d", got, want)
	}
}

func TestRetryAfterIsExact(t *testing.T) {
	for _, countDenied := range []bool{false, true} {
		t.Run(fmt.Sprintf("countDenied=%v", countDenied), func(t *testing.T) {
			r := rule("minute", 5, time.Minute)
			// setup returns a limiter with 5 in the previous bucket and 3 in
			// this one, and the answer to one more request at t0. Each probe
			// gets its own, since CountDenied counts the probe itself.
			setup := func() (*Limiter, Result) {
				l := New(Options{CountDenied: countDenied, DisableDenyCache: true})
				for range 5 {
					check(t, l, t0.Add(-time.Minute), "k", 1, r)
				}
				for range 3 {
					check(t, l, t0, "k", 1, r)
				}
				return l, check(t, l, t0, "k", 1, r)
			}
			l, res := setup()
			if res.Allowed {
				t.Fatalf("allowed at estimate %d", res.Used)
			}
			at := t0.Add(res.RetryAfter)
			if check(t, l, at.Add(-time.Millisecond), "k", 1, r).Allowed {
				t.Errorf("admitted 1 ms before RetryAfter %v", res.RetryAfter)
			}
			l, _ = setup()
			if !check(t, l, at, "k", 1, r).Allowed {
				t.Errorf("denied at RetryAfter %v", res.RetryAfter)
			}
		})
	}
}

func TestRulesAreChargedTogether(t *testing.T) {
	s := memstore.New()
	l := New(Options{Store: s, DisableDenyCache: true})
	// The day rule (15) runs out before the minute rule (10) does over two
	// minutes.
	for range 10 {
		check(t, l, t0, "k", 1, minute, day)
	}
	later := t0.Add(2 * time.Minute) // minute window empty again
	for range 5 {
		if res := check(t, l, later, "k", 1, minute, day); !res.Allowed {
			t.Fatalf("denied early: %+v", res.Decision)
		}
	}
	res := check(t, l, later, "k", 1, minute, day)
	if res.Allowed || res.Rule != "day" {
		t.Fatalf("got %+v, want denial by day", res.Decision)
	}
	if !res.Rules[0].Allowed || res.Rules[1].Allowed {
		t.Errorf("per-rule = %v/%v, want minute allowed, day denied", res.Rules[0].Allowed, res.Rules[1].Allowed)
	}
	// The minute rule alone would have admitted, but nothing was counted:
	// it reports the state without this request.
	if got, want := res.Rules[0].Remaining, int64(5); got != want {
		t.Errorf("minute Remaining = %d, want %d (the denied request is not counted)", got, want)
	}
	if got, want := res.Rules[0].Used, int64(5); got != want {
		t.Errorf("minute Used = %d, want %d", got, want)
	}
	if got := load(t, s, "k", minute, later); got != 5 {
		t.Errorf("minute count = %d, want 5: a request the day rule denied must not charge the minute rule", got)
	}
}

func TestExactUnderConcurrency(t *testing.T) {
	for _, tc := range []struct {
		name  string
		stale bool
	}{{"fresh loads", false}, {"stale loads", true}} {
		t.Run(tc.name, func(t *testing.T) {
			mem := memstore.New()
			s := &counting{Conditional: mem, staleLoad: tc.stale}
			l := New(Options{Store: s, DisableDenyCache: true})
			rules := []Rule{rule("minute", 150, time.Minute), rule("day", 1000, 24*time.Hour)}
			// Half the limit already sits in the previous minute, weighted
			// by the overlap at t0 (one half): floor(100 × 0.5) = 50.
			for range 100 {
				check(t, l, t0.Add(-time.Minute), "hot", 1, rules[0])
			}
			admitted := burst(t, 200, func(int) (Result, error) { return l.Check(ctx, t0, "hot", rules, 1) })
			if got, want := admitted, int64(100); got != want {
				t.Errorf("admitted %d of 200, want %d", got, want)
			}
			if got := load(t, mem, "hot", rules[0], t0); got != 100 {
				t.Errorf("stored count = %d, want 100", got)
			}
		})
	}
}

// refusing is a Conditional store whose every conditional write is
// refused with the counts unchanged: a store at odds with the decision.
type refusing struct {
	kvstore.Conditional
	addIfs int
}

func (r *refusing) AddIf(ctx context.Context, id string, conds []kvstore.Cond, counts []int64) (bool, error) {
	r.addIfs++
	slots := make([]kvstore.Slot, len(conds))
	for i, c := range conds {
		slots[i] = c.Slot
	}
	return false, r.Conditional.Load(ctx, id, slots, counts)
}

// TestContentionEndsWithoutProgress: the conditional writes go on only
// while the counts move (another writer took room: TestExactUnderConcurrency
// needs more than four rounds when many writers race for the room left);
// a write refused on the very counts it was built on is not tried again.
func TestContentionEndsWithoutProgress(t *testing.T) {
	st := &refusing{Conditional: memstore.New()}
	l := New(Options{Store: st, DisableDenyCache: true})
	_, err := l.Check(ctx, t0, "k", []Rule{rule("minute", 10, time.Minute), rule("day", 100, 24*time.Hour)}, 1)
	if !errors.Is(err, ErrContention) || st.addIfs != 1 {
		t.Errorf("error %v after %d conditional writes; want ErrContention after 1", err, st.addIfs)
	}
}

func TestExactUnderConcurrencyStoreDecides(t *testing.T) {
	// The memory store decides under its lock: one rule through
	// UpdateRule, two through Update with the limiter's Admitter.
	minute150 := rule("minute", 150, time.Minute)
	for _, tc := range []struct {
		name  string
		rules []Rule
	}{
		{"one rule", []Rule{minute150}},
		{"two rules", []Rule{minute150, rule("day", 1000, 24*time.Hour)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := memstore.New()
			l := New(Options{Store: mem})
			// floor(100 × 0.5) = 50 of the previous minute count at t0.
			for range 100 {
				check(t, l, t0.Add(-time.Minute), "hot", 1, minute150)
			}
			admitted := burst(t, 200, func(int) (Result, error) {
				var res Result
				err := l.CheckInto(ctx, t0, "hot", tc.rules, 1, &res)
				return res, err
			})
			if got, want := admitted, int64(100); got != want {
				t.Errorf("admitted %d of 200, want %d", got, want)
			}
			if got := load(t, mem, "hot", minute150, t0); got != 100 {
				t.Errorf("stored count = %d, want 100", got)
			}
		})
	}
}

// burst runs check in n goroutines released at once, g being each one's
// number, and returns how many checks were admitted; an error fails the
// test.
func burst(t *testing.T, n int, check func(g int) (Result, error)) int64 {
	t.Helper()
	var admitted atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for g := range n {
		wg.Go(func() {
			<-start
			res, err := check(g)
			if err != nil {
				t.Error(err)
			}
			if res.Allowed {
				admitted.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	return admitted.Load()
}

func TestOneRulePathMatchesGeneral(t *testing.T) {
	// A lone rule, shared or local, on a store with UpdateRule skips the
	// scratch and the Admitter; every answer must be the one the general
	// path gives, deny cache included.
	for _, o := range []struct {
		noDenyCache, local bool
	}{{false, false}, {true, false}, {false, true}, {true, true}} {
		shared, local := memstore.New(), memstore.New()
		fast := New(Options{Store: shared, Local: local, DisableDenyCache: o.noDenyCache})
		general := New(Options{Store: updater{memstore.New()}, Local: updater{memstore.New()}, DisableDenyCache: o.noDenyCache})
		r := rule("minute", 7, time.Minute)
		r.Local = o.local
		if fast.single([]Rule{r}, 1) == nil || general.single([]Rule{r}, 1) != nil {
			t.Fatal("the two limiters do not take different paths")
		}
		at := t0
		for i := range 2000 {
			// Steps of 0 to 9 s cross bucket boundaries often; a few
			// steps go back in time.
			at = at.Add(time.Duration((i*7919)%10-1) * time.Second)
			id := fmt.Sprint("id-", i%3)
			cost := int64(i % 4)
			if i%97 == 0 {
				cost = 8 // more than the limit: never admitted
			}
			var want, got Result
			errW := general.CheckInto(ctx, at, id, []Rule{r}, cost, &want)
			errG := fast.CheckInto(ctx, at, id, []Rule{r}, cost, &got)
			if got != want || (errG == nil) != (errW == nil) {
				t.Fatalf("check %d (%s at %s, cost %d): one-rule path %+v, %v; general %+v, %v",
					i, id, at.Format(time.TimeOnly), cost, got.Decision, errG, want.Decision, errW)
			}
		}
		// Each rule is counted in its own scope's store only.
		counted, other := shared.Len(), local.Len()
		if o.local {
			counted, other = other, counted
		}
		if counted == 0 || other != 0 {
			t.Errorf("local %t: %d identities in the rule's store, %d in the other; want some and none", o.local, counted, other)
		}
	}
}

func TestDecideIsChecksDecision(t *testing.T) {
	// Decide returns what Check returns as its Decision and counts the
	// same: two limiters fed the same requests, one through each, agree on
	// every answer. One rule takes the one-rule path, two the general one;
	// both deny (from the store, then from the deny cache) along the way.
	// Every other request goes through DecideInto, over the previous
	// answer: it must write every field.
	for _, rules := range [][]Rule{{rule("minute", 7, time.Minute)}, {rule("minute", 7, time.Minute), rule("hour", 20, time.Hour)}} {
		byCheck, byDecide := New(Options{}), New(Options{})
		at, denied, cached := t0, 0, 0
		prev := window.Decision{Allowed: true, Rule: "old", Limit: -1, Period: -1, Used: -1, Remaining: -1, ResetAfter: -1, RetryAfter: -1}
		for i := range 2000 {
			at = at.Add(time.Duration((i*7919)%10-1) * time.Second / 3)
			id := fmt.Sprint("id-", i%3)
			cost := int64(i % 4)
			want, errW := byCheck.Check(ctx, at, id, rules, cost)
			var got window.Decision
			var errG error
			if i%2 == 0 {
				got, errG = byDecide.Decide(ctx, at, id, rules, cost)
			} else {
				got = prev
				errG = byDecide.DecideInto(ctx, at, id, rules, cost, &got)
			}
			prev = got
			if got != want.Decision || (errG == nil) != (errW == nil) {
				t.Fatalf("%d rules, request %d (%s at %s, cost %d): Decide %+v, %v; Check %+v, %v",
					len(rules), i, id, at.Format(time.TimeOnly), cost, got, errG, want.Decision, errW)
			}
			if !want.Allowed {
				denied++
			}
			if want.Cached {
				cached++
			}
		}
		if denied == 0 || cached == 0 {
			t.Errorf("%d rules: %d denials, %d from the deny cache; the test needs both", len(rules), denied, cached)
		}
	}
	if _, err := New(Options{}).Decide(ctx, t0, "k", nil, 1); !errors.Is(err, ErrRules) {
		t.Errorf("Decide without rules: %v, want ErrRules", err)
	}
	l := New(Options{})
	one := []Rule{rule("minute", 1<<40, time.Minute)}
	allocs := testing.AllocsPerRun(1000, func() {
		if d, err := l.Decide(ctx, t0, "k", one, 1); !d.Allowed || err != nil {
			t.Fatal(d, err)
		}
	})
	if allocs != 0 {
		t.Errorf("admitted Decide allocates %.1f times, want 0", allocs)
	}
}

func TestDenyCacheSparesTheStore(t *testing.T) {
	s := &counting{Conditional: memstore.New()}
	l := New(Options{Store: s})
	r := rule("minute", 3, time.Minute)
	for range 3 {
		check(t, l, t0, "k", 1, r)
	}
	first := check(t, l, t0, "k", 1, r)
	if first.Allowed || first.Cached {
		t.Fatalf("first denial: %+v cached=%v, want a denial from the store", first.Decision, first.Cached)
	}
	before := s.calls()
	for i := range 50 {
		at := t0.Add(time.Duration(i) * 100 * time.Millisecond)
		res := check(t, l, at, "k", 1, r)
		if res.Allowed || !res.Cached {
			t.Fatalf("at +%v: allowed=%v cached=%v, want a cached denial", at.Sub(t0), res.Allowed, res.Cached)
		}
		if got, want := res.RetryAfter, first.RetryAfter-at.Sub(t0); got != want {
			t.Fatalf("cached RetryAfter at +%v = %v, want %v", at.Sub(t0), got, want)
		}
	}
	// A larger request is denied from the cache too, with its own RetryAfter.
	if res := check(t, l, t0, "k", 2, r); !res.Cached || res.RetryAfter <= first.RetryAfter {
		t.Errorf("cost 2: cached=%v RetryAfter=%v, want cached and later than %v", res.Cached, res.RetryAfter, first.RetryAfter)
	}
	if got := s.calls() - before; got != 0 {
		t.Errorf("store calls while blocked = %d, want 0", got)
	}
	if res := check(t, l, t0.Add(first.RetryAfter), "k", 1, r); !res.Allowed || res.Cached {
		t.Errorf("at RetryAfter: allowed=%v cached=%v, want admitted by the store", res.Allowed, res.Cached)
	}

	t.Run("disabled", func(t *testing.T) {
		s := &counting{Conditional: memstore.New()}
		l := New(Options{Store: s, DisableDenyCache: true})
		for range 4 {
			check(t, l, t0, "k", 1, r)
		}
		before := s.calls()
		if res := check(t, l, t0, "k", 1, r); res.Cached || res.Allowed {
			t.Errorf("cached=%v allowed=%v, want a denial from the store", res.Cached, res.Allowed)
		}
		if s.calls() == before {
			t.Error("store untouched with the deny cache disabled")
		}
	})

	t.Run("other rules miss", func(t *testing.T) {
		if res := check(t, l, t0.Add(time.Second), "k", 1, rule("minute", 100, time.Minute)); res.Cached || !res.Allowed {
			t.Errorf("cached=%v allowed=%v for a different rule set, want a store answer", res.Cached, res.Allowed)
		}
	})
}

func TestDenyCacheIsBounded(t *testing.T) {
	l := New(Options{DenyCacheSize: 64})
	r := rule("minute", 1, time.Minute)
	for i := range 1000 {
		id := fmt.Sprint("id-", i)
		check(t, l, t0, id, 1, r)
		check(t, l, t0, id, 1, r)
	}
	n := 0
	for i := range l.deny.shards {
		n += len(l.deny.shards[i].m)
	}
	if n > 64 {
		t.Errorf("deny cache holds %d identities, want at most 64", n)
	}
}

func TestLocalRules(t *testing.T) {
	shared := &counting{Conditional: memstore.New()}
	local := memstore.New()
	l := New(Options{Store: shared, Local: local, DisableDenyCache: true})
	flood := Rule{Rule: window.Rule{Name: "ip-second", Limit: 3, Period: time.Second}, Local: true}
	perKey := rule("minute", 4, time.Minute)

	for range 3 {
		if !check(t, l, t0, "k", 1, flood, perKey).Allowed {
			t.Fatal("denied under both limits")
		}
	}
	res := check(t, l, t0, "k", 1, flood, perKey)
	if res.Allowed || res.Rule != "ip-second" {
		t.Fatalf("got %+v, want denial by the local rule", res.Decision)
	}
	if got := load(t, shared, "k", perKey, t0); got != 3 {
		t.Errorf("shared count = %d, want 3: a local denial must not charge the shared rule", got)
	}
	if got := load(t, shared, "k", flood, t0); got != 0 {
		t.Errorf("local rule reached the shared store with count %d", got)
	}
	// Next second: the shared rule denies the 5th; the local add is undone.
	next := t0.Add(2 * time.Second)
	check(t, l, next, "k", 1, flood, perKey)
	res = check(t, l, next, "k", 1, flood, perKey)
	if res.Allowed || res.Rule != "minute" {
		t.Fatalf("got %+v, want denial by the shared rule", res.Decision)
	}
	if got := load(t, local, "k", flood, next); got != 1 {
		t.Errorf("local count = %d, want 1: a shared denial must not charge the local rule", got)
	}
}

func TestCountDenied(t *testing.T) {
	s := memstore.New()
	l := New(Options{Store: s, CountDenied: true})
	r := rule("minute", 3, time.Minute)
	for range 5 {
		check(t, l, t0, "k", 1, r)
	}
	if got := load(t, s, "k", r, t0); got != 5 {
		t.Errorf("count = %d, want 5 (denied requests counted)", got)
	}
	res := check(t, l, t0, "k", 1, r)
	if res.Cached {
		t.Error("deny cache answered with CountDenied on")
	}
	// 6 in this bucket: in the next one floor(6 × overlap) <= 2 needs
	// overlap < 1/2, i.e. 30 s + 1 ns into it, 60 s + 1 ns from now.
	if got, want := res.RetryAfter, time.Minute+1; got != want {
		t.Errorf("RetryAfter = %v, want %v", got, want)
	}
}

// failingAdds is a memory store whose Add fails while fail is set.
type failingAdds struct {
	kvstore.Conditional
	fail error
}

func (f *failingAdds) Add(ctx context.Context, id string, slots []kvstore.Slot, costs []int64) error {
	if f.fail != nil {
		return f.fail
	}
	return f.Conditional.Add(ctx, id, slots, costs)
}

// TestCountDeniedStoreFails: with CountDenied, a request the counters deny
// stays denied when counting its cost fails: the error wraps ErrUncounted
// and the store's, and the Result is the denial. (An error alone was
// answered as a store error: let through under on_store_error allow.)
func TestCountDeniedStoreFails(t *testing.T) {
	boom := errors.New("boom")
	r := rule("minute", 3, time.Minute)
	for _, tt := range []struct {
		name  string
		rules []Rule
	}{
		{"shared rule", []Rule{r}},
		{"local and shared rules", []Rule{{Rule: window.Rule{Name: "second", Limit: 100, Period: time.Second}, Local: true}, r}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := &failingAdds{Conditional: memstore.New()}
			l := New(Options{Store: s, CountDenied: true})
			for range 3 {
				if res := check(t, l, t0, "k", 1, tt.rules...); !res.Allowed {
					t.Fatalf("denied before the limit: %+v", res.Decision)
				}
			}
			s.fail = boom
			res, err := l.Check(context.Background(), t0, "k", tt.rules, 1)
			if !errors.Is(err, ErrUncounted) || !errors.Is(err, boom) {
				t.Fatalf("err = %v, want wrapping ErrUncounted and boom", err)
			}
			if res.Allowed || res.Rule != "minute" || res.RetryAfter <= 0 || res.N != len(tt.rules) {
				t.Errorf("got %+v (N %d), want the minute rule's denial with a RetryAfter", res.Decision, res.N)
			}
		})
	}
}

// TestCountDeniedPartialCount: with CountDenied, a denied request is
// counted in its local rules first; when the shared store then fails to
// count it, the local count stays, and the rules are decided on the counts
// as they stand: the RetryAfter is the moment every rule admits the retry.
// It was the shared rule's 1 s, while the local rule, counted to its limit,
// refused the retry for most of a minute.
func TestCountDeniedPartialCount(t *testing.T) {
	rules := []Rule{rule("second", 1, time.Second), {Rule: window.Rule{Name: "burst", Limit: 2, Period: time.Minute}, Local: true}}
	s := &failingAdds{Conditional: memstore.New()}
	l := New(Options{Store: s, CountDenied: true})
	at := t0.Add(10 * time.Second)
	check(t, l, at, "k", 1, rules...)
	s.fail = errors.New("boom")
	at = at.Add(100 * time.Millisecond)
	res, err := l.Check(context.Background(), at, "k", rules, 1)
	if !errors.Is(err, ErrUncounted) || res.Allowed {
		t.Fatalf("got %+v, %v; want a denial and ErrUncounted", res.Decision, err)
	}
	s.fail = nil
	var peek Result
	if err := l.PeekInto(context.Background(), at.Add(res.RetryAfter-time.Nanosecond), "k", rules, 1, &peek); err != nil || peek.Allowed {
		t.Errorf("RetryAfter %v: 1 ns earlier allowed %t (%v), want denied", res.RetryAfter, peek.Allowed, err)
	}
	if retry := check(t, l, at.Add(res.RetryAfter), "k", 1, rules...); !retry.Allowed {
		t.Errorf("RetryAfter %v: the retry then denied by %q, want admitted", res.RetryAfter, retry.Rule)
	}
}

// peeking is a store that counts its reads: through Load, and through
// Peek, which answers from memory alone (as the Worker's store does).
type peeking struct {
	kvstore.Store
	loads, peeks int
}

func (p *peeking) Load(ctx context.Context, id string, slots []kvstore.Slot, counts []int64) error {
	p.loads++
	return p.Store.Load(ctx, id, slots, counts)
}

func (p *peeking) Peek(ctx context.Context, id string, slots []kvstore.Slot, counts []int64) error {
	p.peeks++
	return p.Store.Load(ctx, id, slots, counts)
}

// TestPeekReadsThroughPeeker: PeekInto reads a kvstore.Peeker with Peek,
// with no call to its backend (a refused request's peek at a made-up key
// listed Workers KV); checks read with Load, a check of cost 0 too, whose
// answer is the state.
func TestPeekReadsThroughPeeker(t *testing.T) {
	rules := []Rule{rule("minute", 5, time.Minute), rule("hour", 50, time.Hour)}
	for _, tt := range []struct {
		name         string
		do           func(l *Limiter) error
		loads, peeks int
	}{
		{"peek", func(l *Limiter) error { var r Result; return l.PeekInto(context.Background(), t0, "k", rules, 1, &r) }, 0, 1},
		{"check", func(l *Limiter) error { _, err := l.Check(context.Background(), t0, "k", rules, 1); return err }, 1, 0},
		{"check of cost 0", func(l *Limiter) error { _, err := l.Check(context.Background(), t0, "k", rules, 0); return err }, 1, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := &peeking{Store: memstore.New()}
			if err := tt.do(New(Options{Store: s})); err != nil {
				t.Fatal(err)
			}
			if s.loads != tt.loads || s.peeks != tt.peeks {
				t.Errorf("%d Loads and %d Peeks, want %d and %d", s.loads, s.peeks, tt.loads, tt.peeks)
			}
		})
	}
}

// lagging is a conditional store (no Updater: the limiter takes Load then
// AddIf, as on DynamoDB) where, between each Load and AddIf, other writers
// add prevLag to the bucket before now's (a clock a little behind, just
// after the boundary) and curLag to now's. After each AddIf that applied,
// it records the estimate of r at at, the most the limiter can have let
// the counts reach.
type lagging struct {
	kvstore.Conditional
	prevLag, curLag int64
	r               Rule
	at              time.Time
	addIfs          int
	highest         int64
}

func (s *lagging) AddIf(ctx context.Context, id string, conds []kvstore.Cond, counts []int64) (bool, error) {
	s.addIfs++
	for k, lag := range []int64{s.prevLag, s.curLag} {
		if lag > 0 {
			if err := s.Conditional.Add(ctx, id, []kvstore.Slot{conds[k].Slot}, []int64{lag}); err != nil {
				return false, err
			}
		}
	}
	ok, err := s.Conditional.AddIf(ctx, id, conds, counts)
	if ok && err == nil {
		pc := make([]int64, 2)
		if err := s.Conditional.Load(ctx, id, []kvstore.Slot{conds[0].Slot, conds[1].Slot}, pc); err != nil {
			return false, err
		}
		s.highest = max(s.highest, s.r.Estimate(s.at, pc[0], pc[1]))
	}
	return ok, err
}

// TestLaggingWriters: writers still counting in the previous bucket do not
// make checks far from the limit fail: once a write fails because the
// previous bucket grew, the room left is shared between the clauses of both
// buckets (the previous one had to stay exactly as read, and every retry
// failed). Near the limit the clauses
// still hold: no write is applied that takes the estimate past the limit,
// whatever the other writers added since the read, and the checks end in
// denials, not errors.
func TestLaggingWriters(t *testing.T) {
	r := rule("minute", 100, time.Minute)
	// 1 ms into a bucket: the previous one's overlap is nearly 1.
	at := window.Start(window.Index(t0, r.Period)+1, r.Period).Add(time.Millisecond)
	type lags struct {
		name            string
		prevLag, curLag int64
		minAdmitted     int
	}
	// With a lag of 1 on every write (this fake's), a check spends three:
	// its first write fails on a load the store's answer shows stale,
	// the second on growth between two answers, and the third shares.
	tests := []lags{{"previous bucket", 1, 0, 25}}
	for p := int64(1); p <= 3; p++ {
		for c := int64(1); c <= 8; c++ {
			tests = append(tests, lags{fmt.Sprintf("previous %d, current %d", p, c), p, c, 1})
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &lagging{Conditional: memstore.New(), prevLag: tt.prevLag, curLag: tt.curLag, r: r, at: at}
			l := New(Options{Store: s, DisableDenyCache: true})
			admitted, denied := 0, 0
			for i := range 60 {
				res, err := l.Check(ctx, at, "k", []Rule{r}, 1)
				if err != nil {
					t.Fatalf("check %d: %v", i+1, err)
				}
				if res.Allowed {
					admitted++
					if denied > 0 {
						t.Errorf("check %d admitted after a denial", i+1)
					}
				} else {
					denied++
				}
			}
			if s.highest > r.Limit {
				t.Errorf("a write took the estimate to %d, over the limit %d", s.highest, r.Limit)
			}
			if admitted < tt.minAdmitted || denied == 0 {
				t.Errorf("admitted %d, denied %d of 60; want at least %d admitted, then denials", admitted, denied, tt.minAdmitted)
			}
			// A check whose writes fail on the previous bucket's growth
			// between two answers shares the room from its third.
			if s.addIfs > 3*60+10 {
				t.Errorf("%d AddIfs for 60 checks", s.addIfs)
			}
		})
	}
}

func TestClockBackwards(t *testing.T) {
	s := memstore.New()
	l := New(Options{Store: s, DisableDenyCache: true})
	r := rule("minute", 5, time.Minute)
	for range 5 {
		check(t, l, t0.Add(30*time.Second+time.Second), "k", 1, r) // just past the boundary
	}
	// The clock steps back into the previous bucket: its counts are lower,
	// but the limiter keeps the newest time and stays blocked.
	res := check(t, l, t0, "k", 1, r)
	if res.Allowed {
		t.Fatal("a backwards clock reopened the window")
	}
	if res.RetryAfter <= 0 {
		t.Errorf("RetryAfter = %v, want positive", res.RetryAfter)
	}
	if got := load(t, s, "k", r, t0); got != 0 {
		t.Errorf("older bucket got %d counts", got)
	}
}

func TestZeroCostReadsWithoutCounting(t *testing.T) {
	s := memstore.New()
	l := New(Options{Store: s})
	check(t, l, t0, "k", 2, minute)
	res := check(t, l, t0, "k", 0, minute)
	if !res.Allowed || res.Remaining != 8 {
		t.Errorf("peek = %+v, want allowed with 8 remaining", res.Decision)
	}
	if got := load(t, s, "k", minute, t0); got != 2 {
		t.Errorf("count = %d after a peek, want 2", got)
	}
}

func TestErrors(t *testing.T) {
	boom := errors.New("boom")
	l := New(Options{Store: &counting{Conditional: memstore.New(), fail: boom}})
	res, err := l.Check(ctx, t0, "k", []Rule{minute}, 1)
	if !errors.Is(err, boom) {
		t.Errorf("store failure: err = %v, want wrapping boom", err)
	}
	if res.Allowed {
		t.Error("a failed store answered allowed; the caller's policy decides")
	}
	for _, tc := range []struct {
		name  string
		rules []Rule
		cost  int64
		want  error
	}{
		{"no rules", nil, 1, ErrRules},
		{"too many rules", make([]Rule, MaxRules+1), 1, ErrRules},
		{"negative cost", []Rule{minute}, -1, ErrCost},
		{"zero period", []Rule{rule("x", 1, 0)}, 1, ErrRule},
		{"zero limit", []Rule{rule("x", 0, time.Second)}, 1, ErrRule},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(Options{}).Check(ctx, t0, "k", tc.rules, tc.cost); !errors.Is(err, tc.want) {
				t.Errorf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

// failingRules is a memory store whose UpdateRule fails: the one-rule
// path's store error.
type failingRules struct {
	*memstore.Store
	err error
}

func (f failingRules) UpdateRule(context.Context, string, window.Rule, window.Pos, int64) (prev, cur int64, ok bool, err error) {
	return 0, 0, false, f.err
}

func TestOneRuleStoreError(t *testing.T) {
	// A failed UpdateRule on the one-rule path, shared or local: every
	// entry point returns the error and a zero, not-allowed answer, even
	// into a Result that held an admission.
	boom := errors.New("boom")
	for _, local := range []bool{false, true} {
		l := New(Options{Store: failingRules{memstore.New(), boom}, Local: failingRules{memstore.New(), boom}})
		r := minute
		r.Local = local
		rules := []Rule{r}
		if l.single(rules, 1) == nil {
			t.Fatal("the check does not take the one-rule path")
		}
		res := Result{Decision: window.Decision{Allowed: true, Remaining: 3}, N: 1, Cached: true}
		res.Rules[0] = res.Decision
		if err := l.CheckInto(ctx, t0, "k", rules, 1, &res); !errors.Is(err, boom) {
			t.Errorf("local %t: CheckInto err = %v, want wrapping boom", local, err)
		}
		if res.Decision != (window.Decision{}) || res.N != 0 || res.Cached || res.Rules[0] != (window.Decision{}) {
			t.Errorf("local %t: CheckInto left %+v, N %d, cached %t; want a zero Result", local, res.Decision, res.N, res.Cached)
		}
		d, err := l.Decide(ctx, t0, "k", rules, 1)
		if !errors.Is(err, boom) || d != (window.Decision{}) {
			t.Errorf("local %t: Decide = %+v, %v; want a zero Decision and boom", local, d, err)
		}
	}
}

// TestLocalRulesHoldOnSharedError: a local rule is decided in memory, and
// what it decides holds when the shared store fails. The local count of a
// request it admitted stays (ErrLocalCounted: the caller takes it back with
// Refund if it refuses the request), and its denial is a denial
// (ErrSharedUnread), counted under CountDenied. The count was taken back
// and the denial returned as a store error, so under on_store_error allow
// a plan's local flood guard let every request through, counting none.
func TestLocalRulesHoldOnSharedError(t *testing.T) {
	down := errors.New("down")
	flood := Rule{Rule: window.Rule{Name: "ip-second", Limit: 1, Period: time.Second}, Local: true}
	rules := []Rule{minute, flood} // the shared rule first: its zero decision must not decide
	for _, countDenied := range []bool{false, true} {
		local := memstore.New()
		l := New(Options{Store: &counting{Conditional: memstore.New(), fail: down}, Local: local, CountDenied: countDenied})
		_, err := l.Check(ctx, t0, "k", rules, 1)
		if !errors.Is(err, ErrLocalCounted) || !errors.Is(err, down) {
			t.Fatalf("count denied %t: first check: %v, want ErrLocalCounted wrapping the store's error", countDenied, err)
		}
		if got := load(t, local, "k", flood, t0); got != 1 {
			t.Errorf("count denied %t: local count %d after the first check, want 1 (kept)", countDenied, got)
		}
		res, err := l.Check(ctx, t0, "k", rules, 1)
		if !errors.Is(err, ErrSharedUnread) || !errors.Is(err, down) {
			t.Fatalf("count denied %t: second check: %v, want ErrSharedUnread wrapping the store's error", countDenied, err)
		}
		want := flood.Decide(t0, 0, 1, 1) // the one admitted request counted
		if countDenied {
			want = flood.Decide(t0, 0, 2, 1) // and the denied one
		}
		if res.Decision != want || res.N != 2 || res.Rules[0] != (window.Decision{}) || res.Rules[1] != want {
			t.Errorf("count denied %t: second check: %+v\nrules %+v\nwant the local denial %+v alone, the shared rule's decision zero", countDenied, res.Decision, res.All(), want)
		}
		wantCount := int64(1)
		if countDenied {
			wantCount = 2
		}
		if got := load(t, local, "k", flood, t0); got != wantCount {
			t.Errorf("count denied %t: local count %d after the denial, want %d", countDenied, got, wantCount)
		}
		if err := l.Refund(ctx, t0, "k", []Rule{flood}, 1); err != nil {
			t.Fatal(err)
		}
		if got := load(t, local, "k", flood, t0); got != wantCount-1 {
			t.Errorf("count denied %t: local count %d after a refund, want %d", countDenied, got, wantCount-1)
		}
	}
}

func TestAdmittedPathAllocatesNothing(t *testing.T) {
	minute, day := rule("minute", 1<<40, time.Minute), rule("day", 1<<40, 24*time.Hour)
	for _, rules := range [][]Rule{{minute, day}, {minute}} { // general path; one-rule path
		l := New(Options{})
		check(t, l, t0, "k", 1, rules...)
		allocs := testing.AllocsPerRun(1000, func() {
			if res, _ := l.Check(ctx, t0, "k", rules, 1); !res.Allowed {
				t.Fatal("denied")
			}
		})
		if allocs != 0 {
			t.Errorf("admitted Check of %d rules allocates %.1f times, want 0", len(rules), allocs)
		}
	}
}

func TestCheckIntoReusesResult(t *testing.T) {
	l := New(Options{Store: &counting{Conditional: memstore.New(), fail: errors.New("down")}})
	ok := New(Options{})
	var res Result
	if err := ok.CheckInto(ctx, t0, "k", []Rule{minute, day}, 1, &res); err != nil || !res.Allowed || res.N != 2 {
		t.Fatalf("first: %+v, %v", res.Decision, err)
	}
	// A failed check into the same Result must not leave the earlier
	// admission readable.
	if err := l.CheckInto(ctx, t0, "k", []Rule{minute}, 1, &res); err == nil || res.Allowed {
		t.Errorf("after a store error: allowed=%v err=%v, want not allowed and an error", res.Allowed, err)
	}
}

func TestPeekCountsNothing(t *testing.T) {
	s := memstore.New()
	l := New(Options{Store: s})
	r := rule("minute", 3, time.Minute)
	var res Result
	if err := l.PeekInto(ctx, t0, "k", []Rule{r}, 2, &res); err != nil || !res.Allowed || res.Remaining != 3 {
		t.Fatalf("peek on an empty window: %+v, %v; want allowed with all 3 remaining", res.Decision, err)
	}
	for range 3 {
		check(t, l, t0, "k", 1, r)
	}
	if err := l.PeekInto(ctx, t0, "k", []Rule{r}, 1, &res); err != nil || res.Allowed {
		t.Fatalf("peek on a full window: %+v, %v", res.Decision, err)
	}
	want := check(t, New(Options{Store: s, DisableDenyCache: true}), t0, "k", 1, r).RetryAfter
	if res.RetryAfter != want {
		t.Errorf("peek RetryAfter = %v, want Check's %v", res.RetryAfter, want)
	}
	if got := load(t, s, "k", r, t0); got != 3 {
		t.Errorf("count = %d after peeks, want 3", got)
	}
}

func TestDenyCacheKeepsRuleSetsApart(t *testing.T) {
	// An anonymous client is checked under its IP with the ip rules and
	// then with its plan: both denials stay cached side by side.
	s := &counting{Conditional: memstore.New()}
	l := New(Options{Store: s})
	ipRules := []Rule{rule("ip-second", 1, time.Second)}
	plan := []Rule{rule("minute", 1, time.Minute)}
	for range 2 {
		check(t, l, t0, "ip:203.0.113.7", 1, ipRules...)
		check(t, l, t0, "ip:203.0.113.7", 1, plan...)
	}
	before := s.calls()
	for range 3 {
		if res := check(t, l, t0, "ip:203.0.113.7", 1, ipRules...); !res.Cached {
			t.Fatal("ip rules' denial not cached")
		}
		if res := check(t, l, t0, "ip:203.0.113.7", 1, plan...); !res.Cached {
			t.Fatal("plan's denial not cached")
		}
	}
	if got := s.calls() - before; got != 0 {
		t.Errorf("store calls while both are blocked = %d, want 0", got)
	}
}

// TestClockBackwardsWaitsCountFromNow: after the clock steps back, the
// limiter decides at the newest time it has seen, and RetryAfter,
// ResetAfter and NextAfter count from the caller's now: at now+RetryAfter the request is
// admitted and a nanosecond earlier it is not, as at any other time.
func TestClockBackwardsWaitsCountFromNow(t *testing.T) {
	r := rule("minute", 5, time.Minute)
	ahead := t0.Add(31 * time.Second) // 1 s into the next bucket
	step := ahead.Sub(t0)
	for _, denyCache := range []bool{false, true} {
		// history: five requests 31 s on; then one more there, to learn
		// the waits, or one 31 s earlier.
		twin := func() *Limiter {
			l := New(Options{DisableDenyCache: !denyCache})
			for range 5 {
				if !check(t, l, ahead, "k", 1, r).Allowed {
					t.Fatal("setup: a request was denied")
				}
			}
			if denyCache {
				check(t, l, ahead, "k", 1, r) // the denial the cache remembers
			}
			return l
		}
		there := check(t, twin(), ahead, "k", 1, r)
		back := check(t, twin(), t0, "k", 1, r)
		if back.Allowed || there.Allowed || back.Cached != denyCache {
			t.Fatalf("deny cache %t: allowed %t and %t, cached %t; want two denials", denyCache, back.Allowed, there.Allowed, back.Cached)
		}
		if !back.At.Equal(ahead) {
			t.Errorf("deny cache %t: At = %v, want the newest time seen, %v", denyCache, back.At, ahead)
		}
		if back.RetryAfter != there.RetryAfter+step || back.ResetAfter != there.ResetAfter+step || back.NextAfter != there.NextAfter+step {
			t.Errorf("deny cache %t: from 31 s earlier RetryAfter %v, ResetAfter %v, NextAfter %v; want %v, %v and %v",
				denyCache, back.RetryAfter, back.ResetAfter, back.NextAfter, there.RetryAfter+step, there.ResetAfter+step, there.NextAfter+step)
		}
		if res := check(t, twin(), t0.Add(back.RetryAfter), "k", 1, r); !res.Allowed {
			t.Errorf("deny cache %t: denied at now+RetryAfter", denyCache)
		}
		if res := check(t, twin(), t0.Add(back.RetryAfter-1), "k", 1, r); res.Allowed {
			t.Errorf("deny cache %t: admitted 1 ns before now+RetryAfter", denyCache)
		}
		// The one-rule path of Decide answers the same.
		if d, err := twin().Decide(ctx, t0, "k", []Rule{r}, 1); err != nil || d != back.Decision {
			t.Errorf("deny cache %t: Decide = %+v, %v; want %+v", denyCache, d, err, back.Decision)
		}
	}
}

// TestRefund: Refund takes back exactly what a check counted, in each
// scope's store, in the buckets of the check's At, also after the clock
// went backwards across a boundary.
func TestRefund(t *testing.T) {
	shared, local := memstore.New(), memstore.New()
	l := New(Options{Store: shared, Local: local})
	loc := rule("flood", 10, time.Minute)
	loc.Local = true
	sh := rule("quota", 10, time.Minute)
	ahead := t0.Add(31 * time.Second) // the next bucket
	check(t, l, ahead, "k", 1, loc, sh)
	res := check(t, l, t0, "k", 3, loc, sh) // clock back: counted at ahead
	if !res.Allowed || !res.At.Equal(ahead) {
		t.Fatalf("check = %+v at %v, want allowed at %v", res.Decision, res.At, ahead)
	}
	if err := l.Refund(ctx, res.At, "k", []Rule{loc, sh}, 3); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		s kvstore.Store
		r Rule
	}{{local, loc}, {shared, sh}} {
		if got := load(t, c.s, "k", c.r, ahead); got != 1 {
			t.Errorf("%s: count %d after the refund, want 1", c.r.Name, got)
		}
		if got := load(t, c.s, "k", c.r, t0); got != 0 {
			t.Errorf("%s: the earlier bucket holds %d, want 0", c.r.Name, got)
		}
	}
	if err := l.Refund(ctx, ahead, "k", nil, 1); !errors.Is(err, ErrRules) {
		t.Errorf("Refund with no rules: %v, want ErrRules", err)
	}
	boom := errors.New("boom")
	failing := New(Options{Store: &counting{Conditional: memstore.New(), fail: boom}})
	if err := failing.Refund(ctx, ahead, "k", []Rule{sh}, 1); !errors.Is(err, boom) {
		t.Errorf("Refund on a failing store: %v, want wrapping boom", err)
	}
}

// TestLocalDenialNotRemembered: a denial by a local rule is not kept in the
// deny cache, whose counts could hold a concurrent request's charge that
// is then taken back (here, with Refund): the next request is decided on
// the counts as they are.
func TestLocalDenialNotRemembered(t *testing.T) {
	l := New(Options{})
	loc := rule("flood", 2, time.Minute)
	loc.Local = true
	sh := rule("quota", 5, time.Minute)
	for _, rules := range [][]Rule{{loc}, {loc, sh}} {
		id := fmt.Sprint("k", len(rules))
		a := check(t, l, t0, id, 2, rules...)
		if !a.Allowed {
			t.Fatal("setup: denied")
		}
		if b := check(t, l, t0, id, 1, rules...); b.Allowed || b.Rule != "flood" {
			t.Fatalf("%d rules: %+v, want a denial by flood", len(rules), b.Decision)
		}
		if err := l.Refund(ctx, a.At, id, rules, 2); err != nil {
			t.Fatal(err)
		}
		if c := check(t, l, t0, id, 1, rules...); !c.Allowed || c.Cached {
			t.Errorf("%d rules: after the refund %+v (cached %t), want admitted by the store", len(rules), c.Decision, c.Cached)
		}
	}
	// A shared rule's denial is remembered as before.
	for range 6 {
		check(t, l, t0, "s", 1, sh)
	}
	if res := check(t, l, t0, "s", 1, sh); res.Allowed || !res.Cached {
		t.Errorf("shared denial: %+v cached %t, want a denial from the deny cache", res.Decision, res.Cached)
	}
}

// TestRefundForgetsDenial: a denial the deny cache remembers may have been
// decided on a count that Refund then takes back (a concurrent request's
// charge): Refund drops it, and the next check is decided on the store.
func TestRefundForgetsDenial(t *testing.T) {
	l := New(Options{})
	sh := rule("ip-min", 2, time.Hour)
	check(t, l, t0, "ip", 1, sh)
	a := check(t, l, t0, "ip", 1, sh) // 2 of 2, to be refused elsewhere
	b := check(t, l, t0, "ip", 1, sh) // denied on a's charge, remembered
	if !a.Allowed || b.Allowed {
		t.Fatalf("setup: a allowed %t, b allowed %t", a.Allowed, b.Allowed)
	}
	if res := check(t, l, t0, "ip", 1, sh); !res.Cached {
		t.Fatal("setup: the denial was not remembered")
	}
	if err := l.Refund(ctx, a.At, "ip", []Rule{sh}, 1); err != nil {
		t.Fatal(err)
	}
	if c := check(t, l, t0.Add(time.Second), "ip", 1, sh); !c.Allowed || c.Cached {
		t.Errorf("after the refund, 1 of 2 used: %+v (cached %t), want admitted by the store", c.Decision, c.Cached)
	}
}

// TestCountDeniedRetryWaitsForEveryRule: with CountDenied a refused request
// is counted by every rule, so a rule that admitted it may have no room
// left for the retry: it then denies too, and RetryAfter waits for it.
func TestCountDeniedRetryWaitsForEveryRule(t *testing.T) {
	minute, hour := rule("minute", 3, time.Minute), rule("hour", 4, time.Hour)
	now := t0.Add(31 * time.Minute) // 12:30:30: the hour rolls over in 29.5 min
	history := func() *Limiter {
		l := New(Options{CountDenied: true})
		for range 3 {
			check(t, l, now, "k", 1, minute, hour) // minute full, hour 3 of 4
		}
		return l
	}
	res := check(t, history(), now, "k", 1, minute, hour) // denied by minute, counted by both: hour 4 of 4
	if res.Allowed || res.Rules[1].Allowed || res.Rule != "hour" {
		t.Fatalf("got %+v, hour %+v; want a denial decided by hour, which has no room for the retry", res.Decision, res.Rules[1])
	}
	if res.Rules[1].Remaining != 0 || res.Rules[1].RetryAfter <= res.Rules[0].RetryAfter {
		t.Errorf("hour %+v, minute %+v: want hour empty and waiting longer", res.Rules[1], res.Rules[0])
	}
	// The retry: a twin that saw the same four requests admits it at
	// now+RetryAfter and not a nanosecond earlier.
	for _, c := range []struct {
		at   time.Time
		want bool
	}{{now.Add(res.RetryAfter), true}, {now.Add(res.RetryAfter - 1), false}} {
		l := history()
		check(t, l, now, "k", 1, minute, hour)
		if got := check(t, l, c.at, "k", 1, minute, hour).Allowed; got != c.want {
			t.Errorf("retry at now+%v: allowed %t, want %t", c.at.Sub(now), got, c.want)
		}
	}
}

// TestSeen: a limiter told the newest time an earlier one saw (a
// Worker's, which lives for one request) decides a check before it at it,
// as the earlier limiter would have; Latest reports it.
func TestSeen(t *testing.T) {
	mem := memstore.New()
	first := New(Options{Store: mem})
	if !first.Latest().IsZero() {
		t.Fatalf("a new limiter's Latest: %v, want none", first.Latest())
	}
	r := rule("second", 2, time.Second)
	at := t0.Add(100 * time.Millisecond)
	check(t, first, at, "k", 1, r)
	check(t, first, at, "k", 1, r)
	if !first.Latest().Equal(at) {
		t.Fatalf("Latest = %v, want %v", first.Latest(), at)
	}
	next := New(Options{Store: mem})
	next.Seen(first.Latest())
	next.Seen(at.Add(-time.Second)) // an older time changes nothing
	next.Seen(time.Time{})
	res := check(t, next, at.Add(-300*time.Millisecond), "k", 1, r) // the clock stepped back a bucket
	if res.Allowed || !res.At.Equal(at) {
		t.Errorf("a check 300 ms before the time seen: allowed %t at %v; want a denial decided at %v", res.Allowed, res.At, at)
	}
}

// TestClockCorrection: a step back of more than maxHold corrects a clock
// that had run ahead, and the limiter follows it: one reading an hour
// ahead must not decide every later check at that hour (refusing nearly
// every client for the hour; found by review). A step within maxHold is
// held, as before.
func TestClockCorrection(t *testing.T) {
	l := New(Options{DisableDenyCache: true})
	r := rule("second", 2, time.Second)
	check(t, l, t0.Add(time.Hour), "glitch", 1, r)
	for s := 1; s <= 5; s++ {
		at := t0.Add(time.Duration(s) * time.Second)
		if res := check(t, l, at, "k", 1, r); !res.Allowed || !res.At.Equal(at) {
			t.Fatalf("one request a second after a reading an hour ahead: at +%ds allowed %t, decided at %v", s, res.Allowed, res.At)
		}
	}
	held := t0.Add(5*time.Second - 50*time.Second)
	if res := check(t, l, held, "k", 1, r); !res.At.Equal(t0.Add(5 * time.Second)) {
		t.Errorf("a step back of 50 s was decided at %v, want held at the newest time", res.At)
	}
	if at := t0.Add(5*time.Second - 70*time.Second); !check(t, l, at, "k", 1, r).At.Equal(at) {
		t.Errorf("a step back of 70 s was held, want followed")
	}
}
