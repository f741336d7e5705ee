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
// like one. So does X-HTTP-Method-Override, which no browser's preflight
// carries (it holds none of the page's headers) and Slim's
// MethodOverrideMiddleware serves instead of the method on any method,
// OPTIONS too. (The frameworks that read X-HTTP-Method or
// X-Method-Override read them on a POST alone; a check of each cost the
// Worker's bundle some 50 bytes.)
func preflight(r *http.Request) bool {
	return r.Method == http.MethodOptions && r.ContentLength == 0 && r.Header[overrideHeaders[0]] == nil &&
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

// AllowCORS sets on hd the CORS fields of an answer slidegate writes
// itself to r rather than the origin's (a 429, a 503; a 502 or 504 for an
// origin that failed, the proxy's 400 and 408, the Lambda adapter's 502s),
// when cors_origins allows r's Origin: Access-Control-Allow-Origin,
// -Allow-Credentials for a listed origin, and -Expose-Headers naming the
// rate-limit fields. The browser otherwise reports a network error, and
// the page cannot honour Retry-After or tell a failing origin from a
// failing network. A listed origin may read such an answer with
// credentials too: it holds only the rate-limit state of the request. With
// a listed origin in cors_origins, a request with an Origin gets Vary:
// Origin, unless hd's Vary names it already. A platform adapter that
// answers in place of the handler (the Lambda's) calls it for r; it is
// safe for concurrent use.
func (h *Handler) AllowCORS(hd http.Header, r *http.Request) {
	o := h.corsOrigin(r)
	if h.cors != nil && r.Header.Get("Origin") != "" && !listed(hd["Vary"], "Origin") {
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
