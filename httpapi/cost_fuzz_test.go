package httpapi

import (
	"bufio"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// fuzzCosts are FuzzCostAtOrigin's routes: a method's, any method's, one
// with a byte the proxy escapes, one of a method in upper case alone.
var fuzzCosts = []any{
	map[string]any{"method": "POST", "path_prefix": "/v1/search", "cost": 5},
	map[string]any{"path_prefix": "/v1/items/", "cost": 3},
	map[string]any{"method": "GET", "path_prefix": "/v1/a|b", "cost": 4},
	map[string]any{"method": "DELETE", "path_prefix": "/admin", "cost": 7},
	map[string]any{"method": "PUT", "path_prefix": "/v1/it", "cost": 2},
}

// FuzzCostAtOrigin: a request read from the wire as the local server reads
// it costs at least what the same pre-filter would charge for the request
// its proxy sends on, read from the wire at the origin. The origin routes
// what it receives, not what the client sent: were the proxy's request
// (its target escaped by EscapePath, joined to the origin URL, its
// method-override fields passed on) dearer than the client's, a client
// could pick its cost. It also costs at least the route of the path the
// origin got, decoded and cleaned, for the method it got, and the origin
// gets the path the client sent, in the segments it sent (a "%2F" stays
// one): the path the pre-filter priced.
func FuzzCostAtOrigin(f *testing.F) {
	for _, s := range [][3]string{
		{"POST", "/v1/search?q=1", ""},
		{"GET", "/v1//items/./1", ""},
		{"GET", "/v1/a%7Cb", ""},
		{"GET", "/v1/a|b/c%2Fd", ""},
		{"post", "/V1/SEARCH", ""},
		{"GET", "/v1/x?_method=DELETE", "delete, put"},
		{"POST", "http://evil.example/v1/search", ""},
		{"OPTIONS", "*", ""},
		{"GET", "/v1;a=b/items/\\x", "PUT"},
		{"GET", "/v1/items/..%2F..%2Fadmin", ""},
	} {
		f.Add(s[0], s[1], s[2])
	}
	cfg := testConfig(f, func(m map[string]any) {
		m["plans"] = map[string]any{"free": map[string]any{"limits": []any{map[string]any{"name": "m", "limit": 100, "window": "1m"}}}}
		m["api_keys"] = map[string]any{}
		m["costs"] = fuzzCosts
	})
	h := newFixture(f, cfg, nil).h
	var mu sync.Mutex
	var got *http.Request
	proxy := proxyTo(f, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = r
		mu.Unlock()
	}))
	f.Fuzz(func(t *testing.T, method, target, override string) {
		raw := method + " " + target + " HTTP/1.1\r\nHost: slidegate.example\r\n"
		if override != "" {
			raw += "X-HTTP-Method-Override: " + override + "\r\n"
		}
		r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw + "\r\n")))
		if err != nil || strings.ContainsAny(method+target+override, "\r\n") {
			return // not a request the server takes
		}
		r.RemoteAddr = "192.0.2.1:1234"
		mu.Lock()
		got = nil
		mu.Unlock()
		w := httptest.NewRecorder()
		proxy.ServeHTTP(w, r)
		mu.Lock()
		at := got
		mu.Unlock()
		if at == nil {
			return // refused before it was sent on (a 400 or 502)
		}
		cost, there := h.cost(r), h.cost(at)
		if cost < there {
			t.Fatalf("%s %s (override %q) costs %d; the origin got %s %s (override %q), which costs %d",
				method, target, override, cost, at.Method, at.RequestURI, at.Header.Get("X-HTTP-Method-Override"), there)
		}
		// The origin-form target reaches the origin with the path the
		// client sent, in the same segments: an encoded slash or dot
		// stays encoded, as the pre-filter priced its segments so.
		if sent, _, _ := strings.Cut(r.RequestURI, "?"); strings.HasPrefix(sent, "/") {
			got, _, _ := strings.Cut(at.RequestURI, "?")
			if segmentsKept(EscapePath(got, false)) != segmentsKept(EscapePath(sent, false)) {
				t.Fatalf("%s %s reached the origin as %s", method, target, at.RequestURI)
			}
		}
		if route := h.routeCost(cleanPath(at.URL.Path), at.Method); cost < route {
			t.Fatalf("%s %s costs %d; the origin routes %s %q, at %d", method, target, cost, at.Method, at.URL.Path, route)
		}
	})
}

// proxyTo starts an origin serving h, closed at the test's end, and
// returns NewProxy's proxy to it.
func proxyTo(tb testing.TB, h http.Handler) *httputil.ReverseProxy {
	origin := httptest.NewServer(h)
	tb.Cleanup(origin.Close)
	u, err := url.Parse(origin.URL)
	if err != nil {
		tb.Fatal(err)
	}
	return NewProxy(u, nil, nil)
}
