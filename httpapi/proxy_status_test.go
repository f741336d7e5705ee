package httpapi

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate/config"
)

// statusOrigin returns the URL of an origin that answers each request
// with status, a status line's code as written.
func statusOrigin(t *testing.T, status string) *url.URL {
	t.Helper()
	o := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = io.WriteString(c, "HTTP/1.1 "+status+" Odd\r\nContent-Length: 6\r\n\r\norigin")
	}))
	t.Cleanup(o.Close)
	u, _ := url.Parse(o.URL)
	return u
}

// TestProxyOriginStatusOutOfRange: an origin whose status is no code Go's
// server can write (below 100, or above 999, which HTTP/2's transport
// takes from a ":status" of any integer) is a 502 problem with the
// rate-limit fields, and an origin error at ERROR. Go's HTTP/1 transport
// reads any three digits ("000", "099", and "+99", which strconv takes
// for 99), and the proxy passed the code to WriteHeader, which panics
// outside 100 to 999: the server logged a goroutine's stack and cut the
// client's connection, with no answer; the Lambda's writer, which does
// not panic, answered a status 0 with a 200.
func TestProxyOriginStatusOutOfRange(t *testing.T) {
	check := func(t *testing.T, res *http.Response, body string, logs *bytes.Buffer) {
		t.Helper()
		if res.StatusCode != http.StatusBadGateway || res.Header.Get("Content-Type") != "application/problem+json" || strings.Contains(body, "origin\n") {
			t.Errorf("answer %d %q %q, want the 502 problem", res.StatusCode, res.Header.Get("Content-Type"), body)
		}
		if res.Header.Get(hRateLimit) == "" || res.Header.Get(hRemaining) == "" {
			t.Errorf("answer without the rate-limit fields: %v", res.Header)
		}
		var m map[string]any
		if err := json.Unmarshal(logs.Bytes(), &m); err != nil {
			t.Fatalf("log %q: %v", logs.String(), err)
		}
		if m["level"] != "ERROR" || m["msg"] != "origin error" || m["status"] != float64(http.StatusBadGateway) {
			t.Errorf("log %s, want one origin error with status 502", logs.String())
		}
	}
	for _, status := range []string{"000", "099", "+99"} {
		t.Run("HTTP/1 "+status, func(t *testing.T) {
			var logs bytes.Buffer
			log := slog.New(slog.NewJSONHandler(&logs, nil))
			p := NewProxy(statusOrigin(t, status), log, nil)
			f := newFixture(t, config.Default(), func(o *Options) { o.Next, o.Logger, o.Now = p, log, time.Now })
			front := httptest.NewUnstartedServer(f.h)
			front.Config.ErrorLog = slog.NewLogLogger(log.Handler(), slog.LevelWarn) // where serve's panics go
			front.Start()
			t.Cleanup(front.Close)
			res, err := front.Client().Get(front.URL + "/v1/items")
			if err != nil {
				t.Fatalf("no answer: %v; log %s", err, logs.String())
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			front.Close() // its handler has returned, and logged
			check(t, res, string(body), &logs)
		})
	}
	for _, code := range []int{0, -1, 1000} {
		t.Run("HTTP/2 "+strconv.Itoa(code), func(t *testing.T) {
			var logs bytes.Buffer
			log := slog.New(slog.NewJSONHandler(&logs, nil))
			p := NewProxy(&url.URL{Scheme: "https", Host: "origin.test"}, log, nil)
			closed := false
			p.Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
				return &http.Response{StatusCode: code, Proto: "HTTP/2.0", ProtoMajor: 2, Header: http.Header{},
					Body: closer{strings.NewReader("origin"), &closed}, Request: r}, nil
			})
			f := newFixture(t, config.Default(), func(o *Options) { o.Next, o.Logger = p, log })
			w := httptest.NewRecorder() // whose WriteHeader panics outside 100 to 999, as the server's
			f.h.ServeHTTP(w, httptest.NewRequest("GET", "http://slidegate.test/v1/items", nil))
			check(t, w.Result(), w.Body.String(), &logs)
			if !closed {
				t.Error("the origin's body was not closed")
			}
		})
	}
}

// closer is a body that records its Close.
type closer struct {
	io.Reader
	closed *bool
}

func (c closer) Close() error { *c.closed = true; return nil }
