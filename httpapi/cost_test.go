package httpapi

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestCostOfManyOverrides: what pricing a request costs the
// server must not grow with the method names a client repeats in an
// override header or in _method parameters. It did: each of them was
// upper-cased into a new string and priced against every route, so a
// 60 KB X-HTTP-Method-Override ("a,a,a,...") took 4.6 ms with one route
// and 38 ms with 200 (a plain request about 10 µs), before the limiter
// was asked, for requests refused too. Allocations stand in for the work
// here (no timing is asserted): one name or ten thousand, the same.
func TestCostOfManyOverrides(t *testing.T) {
	cfg := testConfig(t, func(m map[string]any) {
		m["costs"] = []any{
			map[string]any{"method": "POST", "path_prefix": "/v1/items/", "cost": 3},
			map[string]any{"method": "GET", "path_prefix": "/v1/export", "cost": 2},
		}
	})
	f := newFixture(t, cfg, nil)
	header := func(v string) *http.Request {
		r := httptest.NewRequest("GET", "/v1/items/", nil)
		r.Header.Set("X-Http-Method-Override", v)
		return r
	}
	query := func(q string) *http.Request { return httptest.NewRequest("GET", "/v1/items/?"+q, nil) }
	const n = 10000
	for _, tt := range []struct {
		name      string
		one, many *http.Request
	}{
		{"override header", header("post"), header(strings.Repeat("delete,", n) + "post")},
		{"override header, non-ASCII", header("po\u017ft"), header(strings.Repeat("po\u017ft,", n))}, // "poſt": POST to strings.ToUpper, JavaScript and Python
		{"override header, distinct names", header("post"), header(strings.Repeat("x,y,z,", n/3) + "post")},
		{"_method parameters", query("_method=post"), query(strings.Repeat("_method=delete&", n) + "_method=post")},
		{"escaped names", query("_method=post"), query(strings.Repeat("%5Fmethods=x&", n) + "_method=post")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, r := range []*http.Request{tt.one, tt.many} {
				if got := f.h.cost(r); got != 3 {
					t.Fatalf("cost = %d, want 3 (POST /v1/items/)", got)
				}
			}
			one := testing.AllocsPerRun(5, func() { f.h.cost(tt.one) })
			many := testing.AllocsPerRun(5, func() { f.h.cost(tt.many) })
			if many > one+4 {
				t.Errorf("%.0f allocations for %d method names, %.0f for one", many, n, one)
			}
		})
	}
}

// TestCostOfMethodAsSent: a request line's method reaches the origin as
// sent, and an origin that matches methods case-sensitively (Go's
// ServeMux: "GET /v1/search" does not match "get") serves "get
// /v1/search" on the route for every method, while Django serves it as a
// GET: the request pays the higher of the two. Priced upper-cased only, it
// paid the cheap GET route's.
func TestCostOfMethodAsSent(t *testing.T) {
	cfg := testConfig(t, func(m map[string]any) {
		m["costs"] = []any{
			map[string]any{"method": "GET", "path_prefix": "/v1/search", "cost": 1},
			map[string]any{"path_prefix": "/v1/", "cost": 3},
		}
	})
	f := newFixture(t, cfg, nil)
	for _, tt := range []struct {
		method string
		want   int64
	}{
		{"GET", 1},
		{"HEAD", 1},
		{"POST", 3},
		{"get", 3},  // ServeMux: the "/v1/" route; Django: GET (1)
		{"Get", 3},  // as "get"
		{"head", 3}, // as "get"
	} {
		t.Run(tt.method, func(t *testing.T) {
			if got := f.h.cost(httptest.NewRequest(tt.method, "/v1/search", nil)); got != tt.want {
				t.Errorf("cost of %s /v1/search = %d, want %d", tt.method, got, tt.want)
			}
		})
	}
}

// TestCostOfTargetWithoutPath: a request target with no path of its own,
// an absolute-form one without a path ("POST http://api.example HTTP/1.1",
// which RFC 9112 lets every server take) or "*" for a method other than
// OPTIONS (which Go's server answers itself), reaches the origin at "/"
// ("/*", as sent: url.URL alone escapes the "*", and the origin got
// "/%2A", which one that routes on the path as sent serves as another
// resource than the one priced): the proxy joins it to the origin URL's
// path with a slash. It pays what that path pays. Priced on its empty path ("*"), which matches
// no prefix, it cost 1 where the route "/" said 3: a JSON-RPC or GraphQL
// API served at "/" was open at a third of its price.
func TestCostOfTargetWithoutPath(t *testing.T) {
	var got []string
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Method+" "+r.RequestURI)
	}))
	t.Cleanup(origin.Close)
	u, err := url.Parse(origin.URL)
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, func(m map[string]any) {
		m["plans"] = map[string]any{"free": map[string]any{"limits": []any{
			map[string]any{"name": "minute", "limit": 3, "window": "1m"},
		}}}
		delete(m, "api_keys")
		m["costs"] = []any{map[string]any{"method": "POST", "path_prefix": "/", "cost": 3}}
	})
	f := newFixture(t, cfg, func(o *Options) { o.Next = NewProxy(u, nil, nil) })
	srv := httptest.NewServer(f.h)
	t.Cleanup(srv.Close)
	for _, tt := range []struct{ target, path string }{
		{"/", "/"},
		{"http://api.example", "/"},
		{"http://api.example?a=b", "/?a=b"},
		{"*", "/*"},
	} {
		t.Run(tt.target, func(t *testing.T) {
			f.clock.t = f.clock.t.Add(time.Hour) // an empty window
			got = nil
			c, err := net.Dial("tcp", srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: api.example\r\nContent-Length: 0\r\n\r\n", tt.target)
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if want := []string{"POST " + tt.path}; resp.StatusCode != http.StatusOK || !slices.Equal(got, want) {
				t.Fatalf("status %d, origin got %q; want 200, %q", resp.StatusCode, got, want)
			}
			if got, want := resp.Header.Get("X-Ratelimit-Remaining"), "0"; got != want {
				t.Errorf("X-RateLimit-Remaining = %s, want %s: the request costs 3, the route of %s", got, want, tt.path)
			}
		})
	}
}
