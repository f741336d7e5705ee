package workerskv

import (
	"strconv"
	"testing"
)

// TestEvictionLogKeepsALaterMark: the marker of evicted counters (evictKey)
// never goes back. An eviction's log line lets the Worker's other
// goroutines run, and one of them may evict too (Local's bound, on a count
// of a local rule, with the isolate still over maxCells) and mark a counter
// that expires later than any the first eviction deleted. The first then
// marked its own, earlier, expiry over it: its client's next count made a
// counter without a Gen, which wrote over the KV key of the counts evicted.
func TestEvictionLogKeepsALaterMark(t *testing.T) {
	c := memCells{}
	ms := t0.UnixMilli()
	mSl, dSl := minute(t0), day(t0)
	mExp, dExp := mSl.Expires().UnixMilli(), dSl.Expires().UnixMilli()
	// Counters written a moment ago, never evicted, keep the isolate over
	// maxCells once the eviction has deleted what it can.
	for i := range maxCells + 5 {
		key := SlotPrefix("c-"+strconv.Itoa(i), mSl) + "iso-a"
		c[key] = Cell{N: 1, Flushed: 1, At: ms, Expires: mExp}
	}
	// Two counters with counts not yet in KV, the only ones the eviction
	// may take: first one never written, then one written 5 s ago (3 in
	// KV, 2 more since).
	first := SlotPrefix("u", mSl) + "iso-a"
	c[first] = Cell{N: 1, Expires: mExp}
	second := SlotPrefix("v", mSl) + "iso-a"
	c[second] = Cell{N: 5, Flushed: 3, At: ms - 5000, Expires: mExp}
	// A day counter written 5 s ago, made by another goroutine while the
	// first line is written, and evicted by a count of a local rule.
	later := SlotPrefix("w", dSl) + "iso-a"
	lines := 0
	log := &duringArgs{during: func([]any) {
		lines++
		if lines == 1 {
			c[later] = Cell{N: 2, Flushed: 2, At: ms - 5000, Expires: dExp}
			bound(c, ms, nil)
			if _, ok := c.Get(later); ok {
				t.Fatal("the day counter was not evicted during the line")
			}
		}
	}}
	bound(c, ms, log)
	if lines != 2 {
		t.Fatalf("%d lines, want 2 (one per counter with counts not in KV)", lines)
	}
	if !mayBeEvicted(c, dExp) {
		e, _ := c.Get(evictKey)
		t.Errorf("evictKey = %d, want at least %d (the day counter evicted during the line)", e.N, dExp)
	}
}
