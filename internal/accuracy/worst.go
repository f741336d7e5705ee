package accuracy

import (
	"fmt"
	"time"
)

// WorstWindow returns the largest number of the given instants that lie in
// one half-open window [start, start + period), and the earliest such
// start. times must be in ascending order; with no times it returns 0 and
// the zero time.
//
// A densest window can always be moved right until it starts at one of the
// instants, so a two-pointer sweep over the instants is exact.
func WorstWindow(times []time.Time, period time.Duration) (int64, time.Time, error) {
	if period <= 0 {
		return 0, time.Time{}, fmt.Errorf("accuracy: worst window: period: %w, got %s", ErrParam, period)
	}
	var (
		best  int64
		start time.Time
		i     int
	)
	for j, t := range times {
		if j > 0 && t.Before(times[j-1]) {
			return 0, time.Time{}, fmt.Errorf("accuracy: worst window: times[%d]: %w", j, ErrUnsorted)
		}
		for t.Sub(times[i]) >= period {
			i++
		}
		if n := int64(j - i + 1); n > best {
			best, start = n, times[i]
		}
	}
	return best, start, nil
}
