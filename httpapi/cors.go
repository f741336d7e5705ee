package httpapi

import (
	"net/http"
	"strings"
)

// exposed lists the rate-limit fields for Access-Control-Expose-Headers:
// without it a page's script cannot read them (the CORS-safelisted
// response headers are a short list of others). Slidegate-Store and
// Slidegate-Shadow say that an answer was let through on a store error or
// would have been refused: a page that throttles itself needs them too.
const exposed = "RateLimit, RateLimit-Policy, Retry-After, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset, " + StoreHeader + ", " + ShadowHeader

// preflight reports whether r is a CORS preflight: OPTIONS with Origin and
// Access-Control-Request-Method and no body, which a browser sends on its
// own, without credentials or the page's headers, before a cross-origin
// request. (One that carries a key header is no browser's: admit asks
// apiKey first.) A body, or one of unknown length, makes it a request like
// any other: the exemption is for the browser's, not for uploads shaped
// like one.
func preflight(r *http.Request) bool {
	return r.Method == http.MethodOptions && r.ContentLength == 0 &&
		r.Header.Get("Origin") != "" && r.Header.Get("Access-Control-Request-Method") != ""
}

// corsOrigin returns r's Origin when cors_origins allows it, "*" when it
// allows any, or "".
func (h *Handler) corsOrigin(r *http.Request) string {
	if h.cors == nil && !h.corsAny {
		return ""
	}
	o := r.Header.Get("Origin")
	switch {
	case o == "":
		return ""
	case h.cors[strings.ToLower(o)]:
		return o
	case h.corsAny:
		return "*"
	}
	return ""
}

// allowCORS lets the page of r's Origin read an answer the pre-filter
// writes itself (a 429, a 503), when cors_origins allows that origin: the
// browser otherwise reports a network error, and the page cannot honour
// Retry-After. A listed origin may read it with credentials too: the
// answer holds only the rate-limit state of the request.
func (h *Handler) allowCORS(hd http.Header, r *http.Request) {
	o := h.corsOrigin(r)
	if h.cors != nil && r.Header.Get("Origin") != "" {
		hd.Add("Vary", "Origin") // listed origins get answers of their own
	}
	if o == "" {
		return
	}
	hd.Set("Access-Control-Allow-Origin", o)
	if o != "*" {
		hd.Set("Access-Control-Allow-Credentials", "true")
	}
	hd.Set("Access-Control-Expose-Headers", exposed)
}
