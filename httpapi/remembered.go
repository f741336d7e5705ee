//go:build !js

package httpapi

// remembers is whether the Handler's limiter outlives a request, so that
// its deny cache can answer a client's later requests (knownRefused).
const remembers = true
