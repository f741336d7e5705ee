package window_test

import (
	"math"
	"testing"
	"time"

	"github.com/slidegate/slidegate/window"
)

// TestAdmitsAtMatchesDecide: AdmitsAt, the verdict the stores take under
// their locks, admits exactly when the estimate plus the cost reaches the
// limit and no further, as Decide does: a request that fills the limit to
// the last unit is admitted.
func TestAdmitsAtMatchesDecide(t *testing.T) {
	r := window.Rule{Name: "minute", Limit: 10, Period: time.Minute}
	half := t0.Add(30 * time.Second) // half of the previous bucket overlaps
	for _, tc := range []struct {
		name            string
		prev, cur, cost int64
		want            bool
	}{
		{"fills the limit exactly", 0, 9, 1, true},
		{"one over the limit", 0, 10, 1, false},
		{"fills with the weighted previous bucket", 8, 6, 0, true},
		{"weighted previous plus cost reaches the limit", 8, 5, 1, true},
		{"weighted previous plus cost passes the limit", 8, 5, 2, false},
		{"cost of the whole limit on empty counts", 0, 0, 10, true},
		{"cost over the limit", 0, 0, 11, false},
		{"negative cost counts as zero at the limit", 0, 10, -3, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pos := r.At(half)
			got := r.AdmitsAt(pos, tc.prev, tc.cur, tc.cost)
			if got != tc.want {
				t.Fatalf("AdmitsAt(prev %d, cur %d, cost %d) at half a period = %t; want %t (estimate %d, limit %d)",
					tc.prev, tc.cur, tc.cost, got, tc.want, r.EstimateAt(pos, tc.prev, tc.cur), r.Limit)
			}
			if d := r.Decide(half, tc.prev, tc.cur, tc.cost); d.Allowed != got {
				t.Fatalf("AdmitsAt = %t but Decide allowed %t on the same counts", got, d.Allowed)
			}
		})
	}
}

// TestAdmitsAtNegativeCostOverTheLimit: a negative cost counts as zero in
// AdmitsAt as in Decide, also when the counts are already over the limit:
// it does not buy room (taken as is, a cost of -3 admitted an estimate of
// 12 against a limit of 10), nor wrap the bound at the largest limit.
func TestAdmitsAtNegativeCostOverTheLimit(t *testing.T) {
	half := t0.Add(30 * time.Second) // half of the previous bucket overlaps
	for _, tc := range []struct {
		name            string
		limit           int64
		prev, cur, cost int64
		want            bool
	}{
		{"over the limit by two", 10, 0, 12, -3, false},
		{"over the limit by one", 10, 0, 11, -1, false},
		{"weighted previous over the limit", 10, 24, 0, -5, false},
		{"at the limit", 10, 0, 10, -3, true},
		{"largest limit, empty counts", math.MaxInt64, 0, 0, -1, true},
		{"largest limit, full current bucket", math.MaxInt64, 0, math.MaxInt64, math.MinInt64, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := window.Rule{Name: "minute", Limit: tc.limit, Period: time.Minute}
			got, d := r.AdmitsAt(r.At(half), tc.prev, tc.cur, tc.cost), r.Decide(half, tc.prev, tc.cur, tc.cost)
			if got != tc.want || d.Allowed != tc.want {
				t.Fatalf("prev %d, cur %d, cost %d at half a period (estimate %d, limit %d): AdmitsAt %t, Decide allowed %t; want %t",
					tc.prev, tc.cur, tc.cost, r.Estimate(half, tc.prev, tc.cur), r.Limit, got, d.Allowed, tc.want)
			}
		})
	}
}
