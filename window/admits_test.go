package window_test

import (
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
