package accuracy

import (
	"testing"
	"time"
)

// TestSlidingLogByHand walks a log of limit 2 per 10 s through a hand-made
// trace. A request counted at t counts in (t-10, t], so it stops counting
// at exactly t + 10 s.
func TestSlidingLogByHand(t *testing.T) {
	l := SlidingLog{Rule: tiny}
	steps := []struct {
		at     float64
		count  int64 // Count before the request
		allow  bool
		record bool
	}{
		{0, 0, true, true},
		{0, 1, true, true},  // same instant: the first one counts
		{3, 2, false, true}, // denied; recorded anyway (count-denied-too style)
		{9.999, 3, false, false},
		{10, 1, true, true}, // both requests at 0 leave at exactly 10
		{12.999, 2, false, false},
		{13, 1, true, false}, // the one at 3 has left
		{40, 0, true, false}, // everything has left
	}
	for _, s := range steps {
		now := at(s.at)
		if got := l.Count(now); got != s.count {
			t.Errorf("at %gs: Count = %d, want %d", s.at, got, s.count)
		}
		if got := l.Allow(now); got != s.allow {
			t.Errorf("at %gs: Allow = %v, want %v", s.at, got, s.allow)
		}
		if s.record {
			l.Record(now)
		}
	}
}

// TestSlidingLogLong drives the log past its compaction threshold and
// compares every count with a brute-force count over all recorded times.
func TestSlidingLogLong(t *testing.T) {
	l := SlidingLog{Rule: tiny}
	var all []time.Time
	for i := range 600 {
		now := at(float64(i) * 0.37)
		var want int64
		for _, r := range all {
			if now.Sub(r) < tiny.Period {
				want++
			}
		}
		if got := l.Count(now); got != want {
			t.Fatalf("request %d at %v: Count = %d, want %d", i, now.Sub(at(0)), got, want)
		}
		l.Record(now)
		all = append(all, now)
	}
	if len(l.times) > 200 {
		t.Errorf("log keeps %d times for a window of about 27: old times are not released", len(l.times))
	}
}
