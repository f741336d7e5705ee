package main

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate/config"
	"github.com/slidegate/slidegate/httpapi"
)

// originFunc is an origin's transport of a function.
type originFunc func(*http.Request) (*http.Response, error)

func (f originFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// cutReader gives "short", then fails as a connection closed mid-body.
type cutReader struct{ sent bool }

func (c *cutReader) Read(p []byte) (int, error) {
	if c.sent {
		return 0, io.ErrUnexpectedEOF
	}
	c.sent = true
	return copy(p, "short"), nil
}

// TestCORSOnAnswersInsteadOfOrigin: what the Lambda answers itself on a
// request the pre-filter admitted, in place of the origin's (the proxy's
// 502 for an origin it cannot reach and 504 for one that does not answer
// in time; the adapter's 502 for an answer cut short or too large for
// Lambda, and its 500 for a handler that panicked), carries the CORS fields of the pre-filter's 429 for a page that
// cors_origins lists, and none for another: the browser reported a network
// error. The origin's fields of an answer that was not returned are not
// the 502's. The origin's own 502 is left as the origin wrote it.
func TestCORSOnAnswersInsteadOfOrigin(t *testing.T) {
	const app = "https://app.example.com"
	defaultLogs(t) // the adapter's ERROR lines
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := ln.Addr().String()
	_ = ln.Close() // nothing listens there now: connections are refused
	answer := func(status int, body func() io.Reader) originFunc {
		return func(r *http.Request) (*http.Response, error) {
			hd := http.Header{"Access-Control-Allow-Origin": {"*"}, "Access-Control-Expose-Headers": {"X-Origin"}}
			if status == http.StatusBadGateway {
				hd = http.Header{}
			}
			return &http.Response{StatusCode: status, Header: hd, Body: io.NopCloser(body()), Request: r}, nil
		}
	}
	cfg, err := config.Parse([]byte(`{"cors_origins": ["` + app + `"], "plans": {"free": {"limits": [{"name": "minute", "limit": 1000, "window": "1m"}]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	ev := event(t, "functionurl-get.json")
	for _, tc := range []struct {
		name      string
		transport http.RoundTripper // nil: the proxy's own, to a refused port
		status    int
		ours      bool
		detail    string
	}{
		{"unreachable", nil, http.StatusBadGateway, true, "the origin did not answer"},
		{"timed out", originFunc(func(*http.Request) (*http.Response, error) {
			return nil, &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
		}), http.StatusGatewayTimeout, true, "in time"},
		{"cut short", answer(http.StatusOK, func() io.Reader { return &cutReader{} }), http.StatusBadGateway, true, "cut short"},
		{"too large", answer(http.StatusOK, func() io.Reader { return strings.NewReader(strings.Repeat("x", 6_100_000)) }), http.StatusBadGateway, true, "too large"},
		{"handler panicked", originFunc(func(*http.Request) (*http.Response, error) { panic("boom") }), http.StatusInternalServerError, true, "internal error"},
		{"origin's 502", answer(http.StatusBadGateway, func() io.Reader { return strings.NewReader("the origin's") }), http.StatusBadGateway, false, "the origin's"},
	} {
		for _, page := range []struct{ name, origin, allow string }{
			{"listed", app, app},
			{"not listed", "https://evil.example", ""},
		} {
			t.Run(tc.name+"/"+page.name, func(t *testing.T) {
				p := httpapi.NewProxy(&url.URL{Scheme: "http", Host: refused}, nil, nil)
				if tc.transport != nil {
					p.Transport = tc.transport
				}
				now := time.Date(2026, 11, 23, 12, 0, 7, 0, time.UTC)
				h, err := httpapi.New(httpapi.Options{Config: cfg, Next: p, PeerIP: sourceIP,
					Now: func() time.Time { return now }, Logger: slog.New(slog.DiscardHandler)})
				if err != nil {
					t.Fatal(err)
				}
				ev := ev
				ev.Headers = maps.Clone(ev.Headers)
				ev.Headers["origin"] = page.origin
				res, err := Adapt(h)(context.Background(), ev)
				if err != nil || res.StatusCode != tc.status || !strings.Contains(res.Body, tc.detail) || res.Headers["X-Ratelimit-Remaining"] != "999" {
					t.Fatalf("%d %v %.200s (%v); want %d with %q and the rate-limit fields", res.StatusCode, res.Headers, res.Body, err, tc.status, tc.detail)
				}
				want := map[string]string{}
				if tc.ours {
					want["Vary"] = "Origin"
					if page.allow != "" {
						want["Access-Control-Allow-Origin"] = page.allow
						want["Access-Control-Allow-Credentials"] = "true"
						want["Access-Control-Expose-Headers"] = "RateLimit, RateLimit-Policy, Retry-After, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset, Slidegate-Store, Slidegate-Shadow"
					}
				}
				for _, k := range []string{"Vary", "Access-Control-Allow-Origin", "Access-Control-Allow-Credentials", "Access-Control-Expose-Headers"} {
					if got := res.Headers[k]; got != want[k] {
						t.Errorf("%s %q, want %q", k, got, want[k])
					}
				}
			})
		}
	}
}
