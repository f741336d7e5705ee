package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/slidegate/slidegate/internal/testenv"
)

// TestServeOriginFailuresCORS: serve's 502 for an origin that refuses the
// connection and its 504 for one that does not answer within
// --origin-timeout, answered through serve's own writers
// (fullDuplex, boundWrites), carry the CORS fields of its 429 for a page
// that cors_origins lists, with the rate-limit fields exposed; a page not
// listed gets none (Vary: Origin alone). The browser reported a network
// error for both. An origin's own 502 is passed on as the origin wrote it.
func TestServeOriginFailuresCORS(t *testing.T) {
	const app = "https://app.example.com"
	closed, hanging := downOrigins(t)
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
	}))
	defer failing.Close()
	// Only the hanging origin is timed out (TestServeOriginFailures says
	// why the others keep the default bound).
	for _, tt := range []struct {
		name, origin, timeout string
		status                int
		ours                  bool
	}{
		{"refused", closed, "1m", http.StatusBadGateway, true},
		{"hanging", hanging, "200ms", http.StatusGatewayTimeout, true},
		{"origin's 502", failing.URL, "1m", http.StatusBadGateway, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var logs testenv.Buffer
			base, _ := serveLogging(t, &logs, "--config", operatorConfig(t, `, "cors_origins": ["`+app+`"]`), "--origin", tt.origin, "--origin-timeout", tt.timeout)
			w := dial(t, strings.TrimPrefix(base, "http://"))
			for _, page := range []struct{ origin, allow string }{{app, app}, {"https://evil.example", ""}} {
				res, _ := w.get("/items", "X-API-Key: "+bigKey+"\r\nOrigin: "+page.origin+"\r\n")
				if res.StatusCode != tt.status || res.Header.Get("X-RateLimit-Remaining") == "" {
					t.Fatalf("%s: %d %v, want %d with the rate-limit fields", page.origin, res.StatusCode, res.Header, tt.status)
				}
				want := map[string]string{"Access-Control-Allow-Origin": "", "Access-Control-Allow-Credentials": "", "Access-Control-Expose-Headers": "", "Vary": ""}
				if tt.ours {
					want["Vary"] = "Origin"
				}
				if tt.ours && page.allow != "" {
					want["Access-Control-Allow-Origin"], want["Access-Control-Allow-Credentials"] = page.allow, "true"
					want["Access-Control-Expose-Headers"] = "RateLimit, RateLimit-Policy, Retry-After, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset, Slidegate-Store, Slidegate-Shadow"
				}
				for k, v := range want {
					if got := strings.Join(res.Header.Values(k), "|"); got != v {
						t.Errorf("%s: %s %q, want %q", page.origin, k, got, v)
					}
				}
			}
		})
	}
}
