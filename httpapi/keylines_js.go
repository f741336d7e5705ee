//go:build js

package httpapi

import "net/http"

// keyLine does nothing on the Worker: fetch hands it every header on one
// line, and workerd keeps the client's Connection header from it (the
// pre-filter counts a key header Connection names, and the origin gets
// it). The host's (keylines.go) would cost the bundle bytes.
func keyLine(http.Header, string, []string) {}
