package httpapi

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
)

// TestProxyErrorLog: an origin that cuts its response body short makes the
// proxy complain; the complaint is a JSON line of the given logger, not a
// plain line on the standard logger.
func TestProxyErrorLog(t *testing.T) {
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		_, _ = buf.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort")
		_ = buf.Flush()
	}))
	defer origin.Close()
	u, err := url.Parse(origin.URL)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	p := NewProxy(u, slog.New(slog.NewJSONHandler(&logs, nil)), nil)
	p.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/v1/items", nil))

	var found bool
	for _, line := range strings.Split(logs.String(), "\n") {
		if line == "" {
			continue
		}
		var rec struct{ Level, Msg string }
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q is not JSON: %v", line, err)
		}
		if rec.Level == "WARN" && strings.Contains(rec.Msg, "read error during body copy") {
			found = true
		}
	}
	if !found {
		t.Errorf("no WARN line about the cut body in %q", logs.String())
	}
}

// TestProxyForwardedHeaders: the origin gets the X-Forwarded-For chain a
// trusted proxy sent with the proxy appended, and its X-Forwarded-Proto
// and -Host; from any other peer, only what slidegate saw itself.
func TestProxyForwardedHeaders(t *testing.T) {
	var got http.Header
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
	}))
	defer origin.Close()
	u, err := url.Parse(origin.URL)
	if err != nil {
		t.Fatal(err)
	}
	p := NewProxy(u, nil, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")})
	for _, tc := range []struct {
		peer              string
		xff, proto, fhost string
	}{
		{"10.0.0.1:5000", "203.0.113.7, 10.0.0.1", "https", "api.example.com"}, // a trusted balancer
		{"198.51.100.9:5000", "198.51.100.9", "http", "slidegate.test"},        // a client forging them
	} {
		r := httptest.NewRequest("GET", "http://slidegate.test/v1/items", nil)
		r.RemoteAddr = tc.peer
		r.Header.Set("X-Forwarded-For", "203.0.113.7")
		r.Header.Set("X-Forwarded-Proto", "https")
		r.Header.Set("X-Forwarded-Host", "api.example.com")
		w := httptest.NewRecorder()
		p.ServeHTTP(w, r)
		if w.Code != 200 {
			t.Fatalf("%s: status %d", tc.peer, w.Code)
		}
		for k, want := range map[string]string{"X-Forwarded-For": tc.xff, "X-Forwarded-Proto": tc.proto, "X-Forwarded-Host": tc.fhost} {
			if v := strings.Join(got.Values(k), "|"); v != want {
				t.Errorf("peer %s: origin got %s %q, want %q", tc.peer, k, v, want)
			}
		}
	}
}
