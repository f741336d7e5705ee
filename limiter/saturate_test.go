package limiter

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/slidegate/slidegate/kvstore"
	"github.com/slidegate/slidegate/kvstore/memstore"
)

// wrapping is a plain store whose counters are int64s that wrap on
// overflow, as a backend's Go-side sum would: it shows what the limiter
// hands a store, whatever the store does with it.
type wrapping struct {
	mu sync.Mutex
	m  map[kvstore.Slot]int64
}

func (w *wrapping) Load(_ context.Context, _ string, slots []kvstore.Slot, counts []int64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, s := range slots {
		counts[i] = w.m[s]
	}
	return nil
}

func (w *wrapping) Add(_ context.Context, _ string, slots []kvstore.Slot, costs []int64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, s := range slots {
		w.m[s] += costs[i]
	}
	return nil
}

// TestCountDeniedSaturates: with CountDenied, a client that keeps sending
// requests of the largest cost against the largest limit (config's
// MaxLimit, 999,999,999,999,999) is counted each time; after 9,224 of
// them within one bucket the counter passed math.MaxInt64, wrapped
// negative, read as empty, and every request of the client was admitted
// again. The counted cost now stops at math.MaxInt64, in any store, and
// the decisions stay denials with a wait within the rule's two periods.
func TestCountDeniedSaturates(t *testing.T) {
	const maxLimit = 999_999_999_999_999
	r := rule("day", maxLimit, 24*time.Hour)
	for _, tt := range []struct {
		name  string
		store kvstore.Store
	}{
		{"memory store", memstore.New()},
		{"store that wraps", &wrapping{m: map[kvstore.Slot]int64{}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := New(Options{Store: tt.store, CountDenied: true})
			const n = 9300 // math.MaxInt64 / maxLimit is 9223
			for i := range n {
				res := check(t, l, t0, "k", maxLimit, r)
				if i == 0 {
					if !res.Allowed {
						t.Fatalf("first request denied: %+v", res.Decision)
					}
					continue
				}
				if res.Allowed {
					t.Fatalf("request %d admitted after %d counted: %+v", i+1, i, res.Decision)
				}
				if res.RetryAfter <= 0 || res.RetryAfter > 2*r.Period {
					t.Fatalf("request %d: RetryAfter %v, want in (0, %v]", i+1, res.RetryAfter, 2*r.Period)
				}
				if res.Remaining != 0 || res.Used < maxLimit {
					t.Fatalf("request %d: Used %d, Remaining %d", i+1, res.Used, res.Remaining)
				}
			}
			if got := load(t, tt.store, "k", r, t0); got != math.MaxInt64 {
				t.Errorf("count = %d, want %d (saturated)", got, int64(math.MaxInt64))
			}
		})
	}
}

// TestCountDeniedSaturatesEachRule: the cap on a denied request's punitive
// count is each rule's own: with a local rule before a shared one, the
// shared rule's counter at math.MaxInt64 gets nothing more, whatever the
// local rule's count (here a fresh minute's, 0), so a store that sums as
// int64s does not wrap it to empty and admit the client.
func TestCountDeniedSaturatesEachRule(t *testing.T) {
	const maxLimit = 999_999_999_999_999
	day := rule("day", maxLimit, 24*time.Hour)
	minute := rule("minute", maxLimit, time.Minute)
	minute.Local = true
	store := &wrapping{m: map[kvstore.Slot]int64{}}
	l := New(Options{Store: store, CountDenied: true})
	for range 9300 { // math.MaxInt64 / maxLimit is 9223
		check(t, l, t0, "k", maxLimit, day)
	}
	if got := load(t, store, "k", day, t0); got != math.MaxInt64 {
		t.Fatalf("day count = %d, want %d (saturated)", got, int64(math.MaxInt64))
	}
	at := t0.Add(3 * time.Minute) // the local minute is fresh, the day is not
	for i := range 2 {
		if res := check(t, l, at, "k", maxLimit, minute, day); res.Allowed {
			t.Fatalf("request %d after the day saturated admitted: %+v", i+1, res.Decision)
		}
		if got := load(t, store, "k", day, at); got != math.MaxInt64 {
			t.Fatalf("request %d: day count = %d, want %d (saturated)", i+1, got, int64(math.MaxInt64))
		}
	}
}
