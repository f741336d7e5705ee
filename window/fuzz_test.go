package window_test

import (
	"math"
	"testing"
	"time"

	"github.com/slidegate/slidegate/window"
)

// FuzzDecide decides arbitrary int64 inputs. Decide must not panic for any
// Period >= MinPeriod; for a valid rule it must keep every invariant of
// checkDecide; for an invalid limit it must still return no negative
// duration or Remaining.
func FuzzDecide(f *testing.F) {
	minute, day := int64(time.Minute), int64(24*time.Hour)
	burst := t0.Add(61 * time.Second).UnixNano()
	f.Add(int64(100), minute, int64(100), int64(0), int64(1), burst)                // the boundary burst
	f.Add(int64(100), minute, int64(100), int64(49), int64(2), burst)               // 1 ns wait
	f.Add(int64(100), minute, int64(0), int64(6_000_000_000_000), int64(1), burst)  // the bucket after
	f.Add(int64(1_000_000), day, int64(1_000_000), int64(499_306), int64(1), burst) // day-long
	f.Add(int64(100), minute, int64(1<<62), int64(1<<62), int64(1), int64(0))       // estimate overflow
	f.Add(int64(100), minute, int64(0), int64(100), int64(math.MinInt64), int64(-1))
	f.Add(int64(1), int64(math.MaxInt64), int64(0), int64(5), int64(1), int64(0))
	f.Add(int64(0), minute, int64(5), int64(5), int64(0), int64(math.MinInt64))
	f.Add(int64(math.MaxInt64), int64(time.Second), int64(math.MaxInt64), int64(1), int64(0), int64(math.MaxInt64))
	f.Fuzz(func(t *testing.T, limit, period, prev, cur, cost, now int64) {
		if period < int64(window.MinPeriod) {
			t.Skip("period below MinPeriod")
		}
		r := window.Rule{Name: "fuzz", Limit: limit, Period: time.Duration(period)}
		// DecideInto writes every field: over another rule's answer it
		// leaves what Decide returns (which starts from the zero value).
		d := window.Decision{Allowed: true, Rule: "old", Limit: -7, Period: -time.Hour, Used: -9, Remaining: -3, ResetAfter: -5, RetryAfter: -6}
		r.DecideInto(&d, time.Unix(0, now), prev, cur, cost)
		want := r.Decide(time.Unix(0, now), prev, cur, cost)
		if d != want {
			t.Fatalf("%+v.DecideInto(%d, %d, %d, %d) over a used Decision = %+v, Decide = %+v", r, now, prev, cur, cost, d, want)
		}
		d = window.Decision{Allowed: true, Rule: "old", Limit: -7, Period: -time.Hour, Used: -9, Remaining: -3, ResetAfter: -5, RetryAfter: -6}
		if r.DecideAtInto(&d, r.At(time.Unix(0, now)), prev, cur, cost); d != want {
			t.Fatalf("%+v.DecideAtInto(At(%d), %d, %d, %d) over a used Decision = %+v, Decide = %+v", r, now, prev, cur, cost, d, want)
		}
		if limit > 0 {
			checkDecide(t, r, time.Unix(0, now), prev, cur, cost)
			return
		}
		if d.Remaining != 0 || d.Used < 0 || d.RetryAfter < 0 || d.ResetAfter < 0 {
			t.Fatalf("%+v.Decide(%d, %d, %d, %d) = %+v", r, now, prev, cur, cost, d)
		}
	})
}

// FuzzWait checks Wait on arbitrary int64 inputs against the model.
func FuzzWait(f *testing.F) {
	minute := int64(time.Minute)
	now := t0.Add(30 * time.Second).UnixNano()
	f.Add(minute, int64(100), int64(0), int64(49), now)
	f.Add(minute, int64(0), int64(100), int64(99), now)
	f.Add(minute, int64(0), int64(6_000_000_000_000), int64(99), now)
	f.Add(minute, int64(math.MaxInt64), int64(math.MaxInt64), int64(0), now)
	f.Add(minute, int64(0), int64(0), int64(-1), now)
	f.Add(int64(math.MaxInt64), int64(0), int64(5), int64(0), int64(0))
	f.Add(int64(time.Second), int64(-7), int64(3), int64(1), int64(math.MinInt64))
	f.Fuzz(func(t *testing.T, period, prev, cur, bound, now int64) {
		if period < int64(window.MinPeriod) {
			t.Skip("period below MinPeriod")
		}
		r := window.Rule{Name: "fuzz", Limit: 1, Period: time.Duration(period)}
		checkWait(t, r, time.Unix(0, now), prev, cur, bound)
	})
}
