package workerskv

import (
	"testing"
	"time"
)

// TestClock: an isolate keeps the newest time any of its requests' limiters
// saw, never an older one, and a sweep of its cells keeps it.
func TestClock(t *testing.T) {
	g := NewMemGlobals("iso")
	c := NewClock(g)
	if got := c.Latest(); !got.IsZero() {
		t.Fatalf("a new isolate's clock: %v, want none", got)
	}
	t1 := time.Date(2026, 11, 22, 12, 0, 31, 0, time.UTC)
	c.Keep(time.Time{}, t1)
	c.Keep(time.Time{}, t1.Add(-time.Second)) // an older request ending later
	c.Keep(t1, time.Time{})
	if got := NewClock(g).Latest(); !got.Equal(t1) {
		t.Errorf("Latest = %v, want %v", got, t1)
	}
	g.Update(func(cs Cells) { cs.Sweep(t1.Add(48*time.Hour).UnixMilli(), nil) })
	if got := c.Latest(); !got.Equal(t1) {
		t.Errorf("after a sweep: Latest = %v, want %v", got, t1)
	}
	c.Keep(t1, t1.Add(time.Second))
	if got := c.Latest(); !got.Equal(t1.Add(time.Second)) {
		t.Errorf("Latest = %v, want the newer %v", got, t1.Add(time.Second))
	}
	// A reading an hour ahead, then a limiter that started from it and
	// followed the clock back: the isolate follows too.
	ahead := t1.Add(time.Hour)
	c.Keep(t1, ahead)
	c.Keep(ahead, t1.Add(2*time.Second))
	if got := c.Latest(); !got.Equal(t1.Add(2 * time.Second)) {
		t.Errorf("after a correction: Latest = %v, want %v", got, t1.Add(2*time.Second))
	}
	// A second correcting limiter that started from the hour ahead, after
	// the first kept a newer time: the newer time stays.
	c.Keep(ahead, t1.Add(3*time.Second))
	c.Keep(ahead, t1.Add(time.Second))
	if got := c.Latest(); !got.Equal(t1.Add(3 * time.Second)) {
		t.Errorf("a late correction lowered the time kept: Latest = %v, want %v", got, t1.Add(3*time.Second))
	}
}
