package workerskv

import (
	"math"
	"time"
)

// clockKey names the cell that holds an isolate's newest time. No counter
// key starts so (KeyPrefix, localKey's "l|"), and its cell never expires.
const clockKey = "clock|latest"

// Clock keeps the newest time the limiters of an isolate have seen, in its
// globals: the stock shim starts a fresh Go instance, and so a fresh
// limiter, per request, and a limiter holds a clock that steps back at the
// newest time it saw (httpapi.Handler.Seen and Latest). The zero value is
// not usable; call NewClock.
type Clock struct{ g Globals }

// NewClock returns the Clock of the isolate whose globals are g.
func NewClock(g Globals) Clock { return Clock{g: g} }

// Latest returns the newest time kept, or the zero Time.
func (c Clock) Latest() time.Time {
	var n int64
	c.g.Update(func(cs Cells) {
		cell, _ := cs.Get(clockKey)
		n = cell.N
	})
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// Keep keeps t, the newest time of a limiter that started from the time
// from (Latest's, then), if it is newer than the time kept. If t is older
// than from, that limiter followed a correction of a clock that had run
// ahead (limiter.Limiter.Seen), and the isolate follows too, unless
// another request has kept a newer time since from was read: lowering
// that would forget the buckets it counted past (found by review).
func (c Clock) Keep(from, t time.Time) {
	if t.IsZero() {
		return
	}
	n := t.UnixNano()
	corrected := t.Before(from)
	c.g.Update(func(cs Cells) {
		cell, _ := cs.Get(clockKey)
		if cell.N < n || corrected && cell.N == from.UnixNano() {
			cs.Set(clockKey, Cell{N: n, Expires: math.MaxInt64})
		}
	})
}
