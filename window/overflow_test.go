package window_test

import (
	"math"
	"testing"
	"time"

	"github.com/slidegate/slidegate/window"
)

// TestDecideHugeCounts: floor(prev × overlap) + cur must not wrap around.
// 2^62 + 2^62 at a bucket start is 2^63, which wrapped to a negative
// estimate and admitted the request.
func TestDecideHugeCounts(t *testing.T) {
	tests := []struct {
		name      string
		r         window.Rule
		at        time.Duration
		prev, cur int64
		cost      int64
	}{
		{"2^62 + 2^62", perMinute, 0, 1 << 62, 1 << 62, 1},
		{"max + max", perMinute, 30 * time.Second, math.MaxInt64, math.MaxInt64, 1},
		{"max cur", perMinute, 30 * time.Second, 1, math.MaxInt64, 0},
		{"max limit, zero cost", window.Rule{Name: "max", Limit: math.MaxInt64, Period: time.Minute}, 0, math.MaxInt64, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := t0.Add(tt.at)
			d := tt.r.Decide(now, tt.prev, tt.cur, tt.cost)
			if d.Allowed {
				t.Errorf("admitted: %+v", d)
			}
			if got, want := d.Used, int64(math.MaxInt64); got != want {
				t.Errorf("Used = %d, want it saturated at %d", got, want)
			}
			if got, want := tt.r.Estimate(now, tt.prev, tt.cur), int64(math.MaxInt64); got != want {
				t.Errorf("Estimate = %d, want it saturated at %d", got, want)
			}
			if d.Remaining != 0 || d.RetryAfter <= 0 || d.ResetAfter < d.RetryAfter {
				t.Errorf("Remaining, RetryAfter, ResetAfter = %d, %v, %v; want 0 and positive waits", d.Remaining, d.RetryAfter, d.ResetAfter)
			}
		})
	}
}

// TestDecideNegativeCost: a negative cost counts as zero, like negative
// counts. It used to buy quota (admitted above the limit, Remaining
// raised) or, at math.MinInt64, overflow Limit - cost into a denial that
// never ends.
func TestDecideNegativeCost(t *testing.T) {
	now := t0.Add(30 * time.Second)
	for _, cost := range []int64{-1, -5, math.MinInt64} {
		for _, cur := range []int64{0, 99, 100} {
			got := perMinute.Decide(now, 0, cur, cost)
			want := perMinute.Decide(now, 0, cur, 0)
			if got != want {
				t.Errorf("Decide(cur %d, cost %d) = %+v, want the zero-cost decision %+v", cur, cost, got, want)
			}
		}
	}
	if got, want := perMinute.Estimate(now, 0, -5), int64(0); got != want {
		t.Errorf("Estimate(cur -5) = %d, want %d", got, want)
	}
}

// TestHugePeriod: a wait into the next bucket is up to two periods, which
// overflowed into a negative duration for periods over 2^62 ns (146 years).
// It saturates at Never instead. (At 3 × 2^61 ns the wait below is
// 2p - floor((p-1)/5) = 1.8p, past math.MaxInt64.)
func TestHugePeriod(t *testing.T) {
	for _, p := range []time.Duration{3 << 61, math.MaxInt64} {
		r := window.Rule{Name: "huge", Limit: 1, Period: p}
		d := r.Decide(time.Unix(0, 0), 0, 5, 1)
		if d.Allowed {
			t.Fatalf("period %v: admitted: %+v", p, d)
		}
		if got, want := d.RetryAfter, window.Never; got != want {
			t.Errorf("period %v: RetryAfter = %v, want %v", p, got, want)
		}
		if got, want := d.ResetAfter, window.Never; got != want {
			t.Errorf("period %v: ResetAfter = %v, want %v", p, got, want)
		}
		if got, want := r.Wait(time.Unix(0, 0), 0, 5, 0), window.Never; got != want {
			t.Errorf("period %v: Wait = %v, want %v", p, got, want)
		}
	}
}

// TestInvalidLimit: Decide on a rule that fails Validate must not panic
// and keeps Remaining within [0, max(Limit, 0)] and durations non-negative.
func TestInvalidLimit(t *testing.T) {
	for _, limit := range []int64{0, -1, math.MinInt64} {
		r := window.Rule{Name: "bad", Limit: limit, Period: time.Minute}
		for _, cost := range []int64{0, 1, math.MaxInt64} {
			d := r.Decide(t0, math.MaxInt64, 3, cost)
			if d.Remaining != 0 || d.RetryAfter < 0 || d.ResetAfter < 0 {
				t.Errorf("limit %d, cost %d: %+v", limit, cost, d)
			}
			if cost > limit && d.RetryAfter != window.Never {
				t.Errorf("limit %d, cost %d: RetryAfter = %v, want Never", limit, cost, d.RetryAfter)
			}
		}
	}
}
