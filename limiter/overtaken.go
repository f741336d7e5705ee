package limiter

import (
	"time"

	"github.com/slidegate/slidegate/window"
)

// overtaken reports whether a check by a caller at now, decided and counted
// at at, may have been overtaken at a boundary: since its clock was read,
// another check read a later time, in a later bucket of one of rules, and
// may have reached the store first. Neither then saw the other's count
// (this one was decided in a bucket the other had left), and together they
// could pass a limit: with 5 of 10 used at 11:59:30, 5 at 11:59:59.999 and
// 5 at 12:00:00 each fit alone, and 15 fell in the minute ending at
// 12:00:00. Under contention for a key's lock that order is common. The
// check is then taken back and checked again, as if it had read the clock
// after the other: held at the newest time. Only a time the limiter would
// hold now at counts; a later one would be a correction, which decides at
// now all the same.
//
// The other checks may be other limiters' (Options.Latest): in the Worker,
// a client's first request to an isolate awaits a KV list before it is
// decided, while the client's next requests are decided at once, each by
// the limiter of its own request. One that awaited across a boundary was
// counted in the bucket the others had left: a limit of 2 a second
// admitted 3, one 50 ms before the boundary and two 50 ms after it.
func (l *Limiter) overtaken(now, at time.Time, rules []Rule) bool {
	last := l.latest.Load()
	if l.others != nil {
		if t := l.others(); !t.IsZero() {
			last = max(last, t.UnixNano())
		}
	}
	if last <= at.UnixNano() || last-now.UnixNano() > int64(maxHold) {
		return false
	}
	newest := time.Unix(0, last)
	for _, r := range rules {
		if window.Index(newest, r.Period) != window.Index(at, r.Period) {
			// The check again is held at newest. Another limiter's
			// time is taken up only here: one that is no time this
			// limiter would hold at (a clock an hour ahead, which it
			// has corrected) must not become its newest, which the
			// Worker keeps in the isolate after the request.
			l.Seen(newest)
			return true
		}
	}
	return false
}
