package accuracy

import (
	"time"

	"github.com/slidegate/slidegate/window"
)

// SlidingLog is the exact sliding-window limiter that the two-bucket window
// approximates: it keeps the time of every counted request younger than
// one period, and admits a request at now iff fewer than Limit counted
// requests lie in (now - Period, now].
//
// A request counted at t therefore stops counting at exactly t + Period, so
// no half-open window [s, s + Period) ever holds more than Limit of the
// requests it admitted and counted.
//
// The zero SlidingLog needs its Rule set before use. Calls must come in
// time order (now never decreasing). A SlidingLog is not safe for
// concurrent use.
type SlidingLog struct {
	Rule  window.Rule
	times []time.Time // counted requests; times[head:] are still in the window
	head  int
}

// Count returns the number of counted requests in (now - Period, now] and
// forgets the older ones.
func (l *SlidingLog) Count(now time.Time) int64 {
	cut := now.Add(-l.Rule.Period)
	for l.head < len(l.times) && !l.times[l.head].After(cut) {
		l.head++
	}
	if l.head > 64 && 2*l.head > len(l.times) {
		l.times = l.times[:copy(l.times, l.times[l.head:])]
		l.head = 0
	}
	return int64(len(l.times) - l.head)
}

// Allow reports whether a request of cost 1 at now is within the limit. It
// records nothing; call Record for every request that is to be counted.
func (l *SlidingLog) Allow(now time.Time) bool {
	return l.Count(now) < l.Rule.Limit
}

// Record counts a request at now.
func (l *SlidingLog) Record(now time.Time) {
	l.times = append(l.times, now)
}
