package window_test

import (
	"math"
	"testing"
	"time"

	"github.com/slidegate/slidegate/window"
)

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
