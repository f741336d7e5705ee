//go:build js

package limiter

import "time"

// overtaken is never true in js builds: the Worker's limiter serves one
// request, and the check would cost the Worker's bundle 1.3 KB it does not
// have. Other requests of the isolate share its counts, though: a
// client's first request, which awaits a KV list across a bucket boundary
// while its next ones are decided in the new bucket, is still counted in
// the old one, one request's cost over the limit at most, once per client
// per isolate (docs/edge.md, "How it counts").
func (*Limiter) overtaken(_, _ time.Time, _ []Rule) bool { return false }
