package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
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
