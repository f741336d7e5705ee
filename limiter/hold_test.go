package limiter

import (
	"context"
	"testing"
	"time"

	"github.com/slidegate/slidegate/kvstore"
	"github.com/slidegate/slidegate/kvstore/memstore"
	"github.com/slidegate/slidegate/window"
)

// undoHook is a local store that runs hook once, just before the first
// Add that only takes counts back (the limiter's undo of a local count
// after a shared rule denied), as a concurrent request would run there.
type undoHook struct {
	*memstore.Store
	hook func()
}

func (u *undoHook) Add(ctx context.Context, id string, slots []kvstore.Slot, costs []int64) error {
	if h := u.hook; h != nil && len(costs) > 0 && costs[0] < 0 {
		u.hook = nil
		h()
	}
	return u.Store.Add(ctx, id, slots, costs)
}

// TestLocalDenialIsNotRemembered: a denial by a local rule is not put in
// the deny cache. Request A (cost 2) fills the local rule and is then
// denied by the shared one; before A's local count is taken back, B (cost
// 1) is checked and denied by the local rule on A's count. Once A's count
// is gone, C (cost 1) has room in both rules and must be admitted: a
// remembered denial of B would refuse C until the local second ends.
func TestLocalDenialIsNotRemembered(t *testing.T) {
	local := &undoHook{Store: memstore.New()}
	l := New(Options{Local: local})
	rules := []Rule{
		{Rule: window.Rule{Name: "ip-second", Limit: 2, Period: time.Second}, Local: true},
		rule("minute", 10, time.Minute),
	}
	at := t0.Add(100 * time.Millisecond)
	for range 9 { // the shared minute holds 9; the local second holds nothing
		if res := check(t, l, t0.Add(-30*time.Second), "k", 1, rules[1]); !res.Allowed {
			t.Fatalf("filling the minute: denied by %q", res.Rule)
		}
	}
	var b Result
	local.hook = func() { b = check(t, l, at, "k", 1, rules...) }
	if a := check(t, l, at, "k", 2, rules...); a.Allowed || a.Rule != "minute" {
		t.Fatalf("A (cost 2): allowed %t by %q; want denied by %q", a.Allowed, a.Rule, "minute")
	}
	if b.Allowed || b.Rule != "ip-second" {
		t.Fatalf("B, checked while A's local count stood: allowed %t by %q; want denied by %q", b.Allowed, b.Rule, "ip-second")
	}
	c := check(t, l, at.Add(time.Millisecond), "k", 1, rules...)
	if !c.Allowed || c.Cached {
		t.Fatalf("C (cost 1, local 0 of 2, minute 9 of 10): allowed %t (cached %t) by %q, RetryAfter %v; want admitted by the store",
			c.Allowed, c.Cached, c.Rule, c.RetryAfter)
	}
}

// TestClockHoldBound: a step back of the clock of exactly maxHold is held
// (decided at the newest time seen, waits counted from the caller's now);
// one nanosecond more is a correction the limiter follows.
func TestClockHoldBound(t *testing.T) {
	r := rule("minute", 1, time.Minute)
	for _, tc := range []struct {
		name string
		step time.Duration
		held bool
	}{
		{"exactly maxHold", maxHold, true},
		{"just over maxHold", maxHold + time.Nanosecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := New(Options{DisableDenyCache: true})
			ahead := t0.Add(time.Hour)
			check(t, l, ahead, "k", 1, r)
			back := ahead.Add(-tc.step)
			res := check(t, l, back, "k", 0, r)
			want := back
			if tc.held {
				want = ahead
			}
			if !res.At.Equal(want) {
				t.Fatalf("step back of %v: decided at %s; want %s", tc.step, res.At.Format(time.RFC3339Nano), want.Format(time.RFC3339Nano))
			}
		})
	}
}
