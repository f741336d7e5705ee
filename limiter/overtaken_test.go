package limiter

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/slidegate/slidegate/kvstore"
	"github.com/slidegate/slidegate/kvstore/memstore"
	"github.com/slidegate/slidegate/window"
)

// overtaking is a memory store that runs hook once, just before the first
// write that decides reaches the store: a concurrent request that read a
// later clock, and then got to the store first.
type overtaking struct {
	*memstore.Store
	hook func()
}

func (o *overtaking) run() {
	if h := o.hook; h != nil {
		o.hook = nil
		h()
	}
}

func (o *overtaking) UpdateRule(ctx context.Context, id string, r window.Rule, pos window.Pos, cost int64) (int64, int64, bool, error) {
	o.run()
	return o.Store.UpdateRule(ctx, id, r, pos, cost)
}

func (o *overtaking) Update(ctx context.Context, id string, slots []kvstore.Slot, counts, costs []int64, a kvstore.Admitter) (bool, error) {
	o.run()
	return o.Store.Update(ctx, id, slots, counts, costs, a)
}

func (o *overtaking) AddIf(ctx context.Context, id string, conds []kvstore.Cond, counts []int64) (bool, error) {
	o.run()
	return o.Store.AddIf(ctx, id, conds, counts)
}

// TestOvertakenAtABoundary: of two concurrent requests on either side of
// a boundary, the later one (B, at 12:00:00) reaches the store first. The
// earlier one (A, at 11:59:59.999) read the clock before B did, so it is
// not held at B's time: decided at its own, in the bucket B has left, it
// does not see B's count, and B did not see its. With 5 of 10 used at
// 11:59:30, each fits alone (A: 5 + 5 in 11:59; B: 5 × 1 + 5 in 12:00),
// but both together put 15 into the minute that ends at 12:00:00. The
// first of them to reach the store must be the only one admitted.
func TestOvertakenAtABoundary(t *testing.T) {
	boundary := window.Start(window.Index(t0, time.Minute)+1, time.Minute) // 12:00:00
	hour := rule("hour", 100, time.Hour)
	local := minute
	local.Local = true
	for _, tc := range []struct {
		name  string
		rules []Rule
		store func(*overtaking) Options
	}{
		{"one rule", []Rule{minute}, func(o *overtaking) Options { return Options{Store: o} }},
		{"two rules", []Rule{minute, hour}, func(o *overtaking) Options { return Options{Store: o} }},
		{"two rules, conditional writes", []Rule{minute, hour}, func(o *overtaking) Options { return Options{Store: conditional{o}} }},
		{"one local rule", []Rule{local}, func(o *overtaking) Options { return Options{Local: o} }},
		{"local and shared", []Rule{local, hour}, func(o *overtaking) Options { return Options{Local: o} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &overtaking{Store: memstore.New()}
			l := New(tc.store(o))
			if res := check(t, l, t0, "k", 5, tc.rules...); !res.Allowed {
				t.Fatalf("5 at 11:59:30: denied by %q", res.Rule)
			}
			var b Result
			o.hook = func() { b = check(t, l, boundary, "k", 5, tc.rules...) }
			a := check(t, l, boundary.Add(-time.Millisecond), "k", 5, tc.rules...)
			if !b.Allowed {
				t.Fatalf("B (5 at 12:00:00, first at the store): denied by %q", b.Rule)
			}
			if a.Allowed {
				t.Fatalf("A (5 at 11:59:59.999) admitted after B: 15 in the minute ending at 12:00:00, limit 10")
			}
			if !a.At.Equal(boundary) {
				t.Errorf("A decided at %s, want B's time (a Refund takes it)", a.At.Format(time.RFC3339Nano))
			}
			// A's count is gone; the counts are the 5 of 11:59:30 and B's.
			s := o.Store
			if got := load(t, s, "k", tc.rules[0], t0); got != 5 {
				t.Errorf("11:59 holds %d, want 5", got)
			}
			if got := load(t, s, "k", tc.rules[0], boundary); got != 5 {
				t.Errorf("12:00 holds %d, want 5", got)
			}
			// A is told when it would be admitted, from its own now: at
			// 12:00:48 the 5 of 11:59 weigh floor(5 × 12/60) = 1, a
			// nanosecond later 0.
			if got, want := a.RetryAfter, 48*time.Second+time.Millisecond+time.Nanosecond; got != want {
				t.Errorf("A's RetryAfter = %v, want %v", got, want)
			}
		})
	}
}

// TestOvertakenByAnotherLimiter: the Worker builds a limiter per request,
// and the requests of an isolate share their newest time through it
// (Options.Latest). A client's first request (A, 50 ms before a
// boundary) awaits its store while two more (50 ms after it), each decided
// by a limiter of its own, are admitted in the new second. A must then be
// checked again at their time and refused: admitted in the second they
// had left, it made 3 in one second under a limit of 2.
func TestOvertakenByAnotherLimiter(t *testing.T) {
	sec := rule("second", 2, time.Second)
	boundary := window.Start(window.Index(t0, time.Second)+1, time.Second)
	for _, rules := range [][]Rule{{sec}, {sec, rule("minute", 1000, time.Minute)}} {
		t.Run(fmt.Sprint(len(rules), " rules"), func(t *testing.T) {
			var newest time.Time // the isolate's
			o := &overtaking{Store: memstore.New()}
			limiter := func() *Limiter {
				return New(Options{Store: o, Latest: func() time.Time { return newest }})
			}
			o.hook = func() {
				newest = boundary.Add(50 * time.Millisecond)
				for i := range 2 {
					if res := check(t, limiter(), newest, "k", 1, rules...); !res.Allowed {
						t.Fatalf("request %d, 50 ms past the boundary: denied by %q", i+2, res.Rule)
					}
				}
			}
			a := check(t, limiter(), boundary.Add(-50*time.Millisecond), "k", 1, rules...)
			if a.Allowed {
				t.Fatal("A (50 ms before the boundary) admitted after two past it: 3 in one second, limit 2")
			}
			if !a.At.Equal(newest) {
				t.Errorf("A decided at %s, want the isolate's newest time", a.At.Format(time.RFC3339Nano))
			}
			if got := load(t, o.Store, "k", sec, boundary.Add(-time.Millisecond)); got != 0 {
				t.Errorf("the second before the boundary holds %d, want 0 (A's count taken back)", got)
			}
		})
	}
}

// TestOvertakenRefundFails: a check of local and shared rules overtaken at
// a boundary is taken back to be checked again, and the shared store fails
// the take-back (DynamoDB, its budget spent on the check). The check then
// stands as counted, admitted at its own time; the local rules' count of it
// must stand too. Refund took the local count back first and then failed on
// the shared one: the request was admitted, counted by the local rules
// nowhere.
func TestOvertakenRefundFails(t *testing.T) {
	boundary := window.Start(window.Index(t0, time.Minute)+1, time.Minute) // 12:00:00
	local := minute
	local.Local = true
	rules := []Rule{local, rule("hour", 100, time.Hour)}
	o := &overtaking{Store: memstore.New()}
	shared := &failingAdds{Conditional: memstore.New()}
	l := New(Options{Local: o, Store: shared})
	if res := check(t, l, t0, "k", 5, rules...); !res.Allowed {
		t.Fatalf("5 at 11:59:30: denied by %q", res.Rule)
	}
	o.hook = func() {
		check(t, l, boundary, "k", 1, rules...)
		shared.fail = errors.New("boom")
	}
	a := check(t, l, boundary.Add(-time.Millisecond), "k", 5, rules...)
	if !a.Allowed {
		t.Fatalf("A (5 at 11:59:59.999), whose take-back failed: denied by %q", a.Rule)
	}
	if got := load(t, o.Store, "k", local, t0); got != 10 {
		t.Errorf("the local rule's 11:59 holds %d, want 10 (5, and A's 5, admitted)", got)
	}
	if got := load(t, shared.Conditional, "k", rules[1], t0); got != 10 {
		t.Errorf("the shared rule's 11:00 hour holds %d, want 10", got)
	}
}
