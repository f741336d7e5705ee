package limiter

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/slidegate/slidegate/kvstore/memstore"
	"github.com/slidegate/slidegate/window"
)

// Tests of a check whose shared store fails after its local rules decided
// (sharedFailed), each pinning what a hand mutation changed unseen
// (session 14).

// TestLocalCountedWaitsCountFromNow: with ErrLocalCounted, the local
// rules' decisions stand (they admitted and counted the request), and their
// waits count from the caller's now when the clock had gone back and the
// rules were decided at the newest time seen, as in every other answer.
func TestLocalCountedWaitsCountFromNow(t *testing.T) {
	flood := Rule{Rule: window.Rule{Name: "ip-minute", Limit: 5, Period: time.Minute}, Local: true}
	rules := []Rule{flood, minute}
	for _, step := range []time.Duration{0, 10 * time.Second, maxHold} {
		t.Run(fmt.Sprint("back ", step), func(t *testing.T) {
			l := New(Options{Store: &counting{Conditional: memstore.New(), fail: errors.New("down")}})
			ahead := t0.Add(time.Hour)
			l.Seen(ahead)
			now := ahead.Add(-step)
			res, err := l.Check(ctx, now, "k", rules, 1)
			if !errors.Is(err, ErrLocalCounted) {
				t.Fatalf("check: %v, want ErrLocalCounted", err)
			}
			if !res.At.Equal(ahead) {
				t.Fatalf("decided at %v, want %v", res.At, ahead)
			}
			want := flood.Decide(ahead, 0, 0, 1)
			want.ResetAfter += step
			if got := res.Rules[0]; got != want {
				t.Errorf("local rule's decision:\n\tgot  %+v\n\twant %+v (ResetAfter from now, %v before the time decided at)", got, want, step)
			}
		})
	}
}

// TestSharedUnreadClearsAReusedResult: with ErrSharedUnread the shared
// rules' decisions are zero (Limit 0), also in a Result that CheckInto
// reuses and that held a decision of theirs from the check before: the
// caller must not take that decision for this request's.
func TestSharedUnreadClearsAReusedResult(t *testing.T) {
	flood := Rule{Rule: window.Rule{Name: "ip-second", Limit: 1, Period: time.Second}, Local: true}
	rules := []Rule{flood, minute}
	for _, countDenied := range []bool{false, true} {
		t.Run(fmt.Sprint("count denied ", countDenied), func(t *testing.T) {
			s := &counting{Conditional: memstore.New()}
			l := New(Options{Store: s, CountDenied: countDenied})
			var res Result
			if err := l.CheckInto(ctx, t0, "k", rules, 1, &res); err != nil || !res.Allowed {
				t.Fatalf("setup: allowed %t, %v; want admitted", res.Allowed, err)
			}
			if res.Rules[1].Limit != minute.Limit {
				t.Fatalf("setup: shared decision %+v, want one of limit %d", res.Rules[1], minute.Limit)
			}
			s.fail = errors.New("down")
			err := l.CheckInto(ctx, t0, "k", rules, 1, &res)
			if !errors.Is(err, ErrSharedUnread) || res.Allowed || res.Rule != flood.Name {
				t.Fatalf("check with the store down: allowed %t by %q, %v; want denied by %q with ErrSharedUnread",
					res.Allowed, res.Rule, err, flood.Name)
			}
			if got := res.Rules[1]; got != (window.Decision{}) {
				t.Errorf("shared rule's decision = %+v, want the zero Decision (unread)", got)
			}
		})
	}
}
