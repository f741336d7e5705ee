package main

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestCORSOnAnswersInsteadOfOrigin: the Worker's own answers on a request
// it admitted, in place of the origin's (its 502 for an origin fetch could
// not reach or a 101 without a WebSocket, its 504 for one that did not
// answer in time), carry the CORS fields of the pre-filter's 429 for a page
// that cors_origins lists, and none for another: the browser reported a
// network error, so a page could not tell a failing origin from a failing
// network, nor read its rate-limit fields. The origin's CORS fields of the
// 101 are not the 502's. An answer the origin wrote itself, a 502 too, is
// left as the origin wrote it when it shares nothing.
func TestCORSOnAnswersInsteadOfOrigin(t *testing.T) {
	const app = "https://app.example.com"
	expired, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel()
	for _, tc := range []struct {
		name   string
		origin *fakeOrigin
		ctx    context.Context
		status int
		ours   bool
	}{
		{"unreachable", &fakeOrigin{err: errors.New("connection refused")}, context.Background(), http.StatusBadGateway, true},
		{"timed out", &fakeOrigin{err: context.DeadlineExceeded}, expired, http.StatusGatewayTimeout, true},
		{"101 without a WebSocket", &fakeOrigin{status: http.StatusSwitchingProtocols, answer: strings.NewReader(""), header: http.Header{
			"Upgrade": {"websocket"}, "Access-Control-Allow-Origin": {"*"}, "Access-Control-Expose-Headers": {"X-Origin"},
		}}, context.Background(), http.StatusBadGateway, true},
		{"origin's 502", &fakeOrigin{status: http.StatusBadGateway}, context.Background(), http.StatusBadGateway, false},
	} {
		for _, page := range []struct {
			name, origin, allow string
		}{
			{"listed", app, app},
			{"not listed", "https://evil.example", ""},
		} {
			t.Run(tc.name+"/"+page.name, func(t *testing.T) {
				d := testDeps(t, nil)
				d.Transport = tc.origin
				d.Now = func() time.Time { return time.Date(2026, 11, 23, 12, 0, 7, 0, time.UTC) }
				d.Upgraded = func() func(http.Header) { return nil } // the 101 carried none
				h, err := newHandler(env{Origin: "https://origin.example.com", Config: text(`{"cors_origins": ["` + app + `"]}`)}, d)
				if err != nil {
					t.Fatal(err)
				}
				r := httptest.NewRequestWithContext(tc.ctx, "GET", "https://w.example.com/x", nil)
				r.Header.Set("CF-Connecting-IP", "203.0.113.7")
				r.Header.Set("Origin", page.origin)
				if tc.origin.status == http.StatusSwitchingProtocols {
					r.Header.Set("Upgrade", "websocket")
				}
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				if w.Code != tc.status || w.Header().Get("X-RateLimit-Remaining") == "" {
					t.Fatalf("status %d, headers %v; want %d with the rate-limit fields", w.Code, w.Header(), tc.status)
				}
				allow, creds, vary, expose := "", "", []string(nil), []string(nil)
				if tc.ours {
					allow, vary = page.allow, []string{"Origin"}
					if allow != "" {
						creds, expose = "true", []string{"RateLimit, RateLimit-Policy, Retry-After, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset, Slidegate-Store, Slidegate-Shadow"}
					}
				}
				for k, want := range map[string]string{"Access-Control-Allow-Origin": allow, "Access-Control-Allow-Credentials": creds} {
					if got := w.Header().Get(k); got != want {
						t.Errorf("%s %q, want %q", k, got, want)
					}
				}
				if got := w.Header().Values("Access-Control-Expose-Headers"); !slices.Equal(got, expose) {
					t.Errorf("Access-Control-Expose-Headers %q, want %q", got, expose)
				}
				if got := w.Header().Values("Vary"); !slices.Equal(got, vary) {
					t.Errorf("Vary %q, want %q", got, vary)
				}
			})
		}
	}
}
