//go:build js

package httpapi

// remembers is false: the Worker builds a Handler, and its limiter, per
// request (the stock shim starts a Go instance for each), so its deny
// cache never holds a denial of an earlier request, and knownRefused
// would only cost the bundle bytes.
const remembers = false
