//go:build js

package limiter

import "time"

// overtaken is never true in js builds: the Worker's limiter serves one
// request, which no other check of the same limiter can overtake, and the
// check would cost the Worker's bundle bytes it does not have.
func (*Limiter) overtaken(_, _ time.Time, _ []Rule) bool { return false }
