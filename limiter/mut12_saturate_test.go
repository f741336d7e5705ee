package limiter

import (
	"math"
	"testing"
	"time"

	"github.com/slidegate/slidegate/kvstore"
)

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
