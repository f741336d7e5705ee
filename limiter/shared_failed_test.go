package limiter

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slidegate/slidegate/kvstore"
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
			want.NextAfter += step
			if got := res.Rules[0]; got != want {
				t.Errorf("local rule's decision:\n\tgot  %+v\n\twant %+v (ResetAfter and NextAfter from now, %v before the time decided at)", got, want, step)
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

// Tests of the local rules' answer when the shared store fails
// (sharedFailed), each pinning what a hand mutation of it changed unseen.

// readsFail is a shared store whose reads fail and whose adds succeed (a
// store that went down and up again between two calls): an add it is sent
// is counted, and reaches the memory store.
type readsFail struct {
	s    *memstore.Store
	adds atomic.Int64
}

func (s *readsFail) Load(context.Context, string, []kvstore.Slot, []int64) error {
	return errors.New("reads fail: down")
}

func (s *readsFail) Add(ctx context.Context, id string, slots []kvstore.Slot, costs []int64) error {
	s.adds.Add(1)
	return s.s.Add(ctx, id, slots, costs)
}

// TestPeekCountsNothingWhenSharedFails: a peek at local and shared rules
// whose shared store fails counts nothing in the local rules, whatever
// they decide, and does not say it did (ErrLocalCounted asks the caller to
// take back a count; after a peek there is none).
func TestPeekCountsNothingWhenSharedFails(t *testing.T) {
	down := errors.New("down")
	flood := Rule{Rule: window.Rule{Name: "ip-second", Limit: 1, Period: time.Second}, Local: true}
	rules := []Rule{minute, flood}
	for _, countDenied := range []bool{false, true} {
		local := memstore.New()
		l := New(Options{Store: &counting{Conditional: memstore.New(), fail: down}, Local: local, CountDenied: countDenied})
		if _, err := l.Check(ctx, t0, "k", rules, 1); !errors.Is(err, ErrLocalCounted) {
			t.Fatalf("count denied %t: check: %v, want ErrLocalCounted", countDenied, err)
		}
		var res Result
		// "k": the local rule denies the peek; "j": it admits it.
		for _, id := range []string{"k", "j"} {
			before := load(t, local, id, flood, t0)
			err := l.PeekInto(ctx, t0, id, rules, 1, &res)
			if err == nil || errors.Is(err, ErrLocalCounted) {
				t.Errorf("count denied %t: peek %s: %v, want the store's error, nothing counted", countDenied, id, err)
			}
			if got := load(t, local, id, flood, t0); got != before {
				t.Errorf("count denied %t: peek %s: local count %d, want %d (a peek counts nothing)", countDenied, id, got, before)
			}
		}
	}
}

// TestSharedUnreadUncountsAdmittingLocalRules: of two local rules, one
// denies and the other admits, and the shared store fails. The request was
// counted by neither, so the admitting rule reports the state without it.
func TestSharedUnreadUncountsAdmittingLocalRules(t *testing.T) {
	loose := Rule{Rule: window.Rule{Name: "local-minute", Limit: 10, Period: time.Minute}, Local: true}
	flood := Rule{Rule: window.Rule{Name: "ip-second", Limit: 1, Period: time.Second}, Local: true}
	rules := []Rule{minute, loose, flood}
	local := memstore.New()
	l := New(Options{Store: &counting{Conditional: memstore.New(), fail: errors.New("down")}, Local: local})
	if _, err := l.Check(ctx, t0, "k", rules, 1); !errors.Is(err, ErrLocalCounted) {
		t.Fatalf("first check: %v, want ErrLocalCounted", err)
	}
	res, err := l.Check(ctx, t0, "k", rules, 1)
	if !errors.Is(err, ErrSharedUnread) {
		t.Fatalf("second check: %v, want ErrSharedUnread", err)
	}
	if d := res.Rules[1]; !d.Allowed || d.Used != 1 || d.Remaining != 9 {
		t.Errorf("admitting local rule: %+v, want allowed, used 1, remaining 9 (the refused request uncounted)", d)
	}
	if got := load(t, local, "k", loose, t0); got != 1 {
		t.Errorf("admitting local rule's count %d, want 1", got)
	}
}

// TestSharedUnreadWaitsOutAClockStep: the local denial returned with
// ErrSharedUnread counts its waits from the caller's now when the clock
// stepped back, as every other answer does: a client told to wait must
// wait out the step as well.
func TestSharedUnreadWaitsOutAClockStep(t *testing.T) {
	flood := Rule{Rule: window.Rule{Name: "ip-second", Limit: 1, Period: time.Second}, Local: true}
	rules := []Rule{minute, flood}
	l := New(Options{Store: &counting{Conditional: memstore.New(), fail: errors.New("down")}, Local: memstore.New()})
	if _, err := l.Check(ctx, t0, "k", rules, 1); !errors.Is(err, ErrLocalCounted) {
		t.Fatalf("first check: %v, want ErrLocalCounted", err)
	}
	const step = 5 * time.Second
	res, err := l.Check(ctx, t0.Add(-step), "k", rules, 1)
	if !errors.Is(err, ErrSharedUnread) {
		t.Fatalf("check after the step: %v, want ErrSharedUnread", err)
	}
	want := flood.Decide(t0, 0, 1, 1) // decided at the limiter's time
	want.RetryAfter += step
	want.ResetAfter += step
	want.NextAfter += step
	if res.Decision != want || res.Rules[1] != want {
		t.Errorf("after a step back of %s: %+v (rule %+v), want %+v", step, res.Decision, res.Rules[1], want)
	}
}

// TestSharedUnreadWritesNoSharedCount: under CountDenied a local denial
// whose shared rules could not be read is counted in the local rules
// only. The shared store is not written, even when its adds would succeed:
// its rules never decided the request.
func TestSharedUnreadWritesNoSharedCount(t *testing.T) {
	flood := Rule{Rule: window.Rule{Name: "ip-second", Limit: 1, Period: time.Second}, Local: true}
	rules := []Rule{minute, flood}
	shared := &readsFail{s: memstore.New()}
	local := memstore.New()
	l := New(Options{Store: shared, Local: local, CountDenied: true})
	if _, err := l.Check(ctx, t0, "k", rules, 1); !errors.Is(err, ErrLocalCounted) {
		t.Fatalf("first check: %v, want ErrLocalCounted", err)
	}
	res, err := l.Check(ctx, t0.Add(300*time.Millisecond), "k", rules, 1)
	if !errors.Is(err, ErrSharedUnread) {
		t.Fatalf("second check: %v, want ErrSharedUnread", err)
	}
	if res.Decision != res.Rules[1] {
		t.Errorf("decision %+v, want the local rule's, counted: %+v", res.Decision, res.Rules[1])
	}
	if n := shared.adds.Load(); n != 0 {
		t.Errorf("%d adds sent to the failed shared store, want 0", n)
	}
	if got := load(t, shared.s, "k", minute, t0); got != 0 {
		t.Errorf("shared count %d, want 0", got)
	}
	if got := load(t, local, "k", flood, t0); got != 2 {
		t.Errorf("local count %d, want 2 (the admitted request and the denied one)", got)
	}
}
