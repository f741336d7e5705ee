//go:build js

package httpapi

import "net/http"

// keyLines does nothing on the Worker: fetch hands it every header on one
// line, and its proxy drops the headers Connection names. The host's
// (keylines.go) would cost the bundle bytes it does not have.
func (h *Handler) keyLines(http.Header) {}
