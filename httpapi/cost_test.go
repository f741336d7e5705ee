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

// TestCostOfLowerCaseMethod: a request line's method in lower
// case ("post /v1/search", which Go's server takes as it is and the proxy
// sends on) pays what the upper-case method pays. Frameworks that
// upper-case the method (Django's and Werkzeug's requests, Symfony's
// getMethod) serve it as a POST; it paid 1, the cost of a method no route
// names, where an override header naming "post" paid the POST route's
// (measured through `serve`: POST /v1/search took 5 of a limit of 10,
// "post /v1/search" 1, and the demo origin got "post").
func TestCostOfLowerCaseMethod(t *testing.T) {
	cfg := testConfig(t, func(m map[string]any) {
		m["costs"] = []any{
			map[string]any{"method": "POST", "path_prefix": "/v1/items/", "cost": 3},
			map[string]any{"method": "GET", "path_prefix": "/v1/export", "cost": 2},
		}
	})
	f := newFixture(t, cfg, nil)
	for _, tt := range []struct {
		method, path string
		want         int64
	}{
		{"POST", "/v1/items/", 3},
		{"post", "/v1/items/", 3},
		{"Post", "/v1/items/", 3},
		{"pOST", "/v1/items/", 3},
		{"get", "/v1/export", 2},
		{"head", "/v1/export", 2}, // HEAD pays what GET pays
		{"post", "/v1/export", 1},
		{"delete", "/v1/items/", 1},
	} {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			if got := f.h.cost(httptest.NewRequest(tt.method, tt.path, nil)); got != tt.want {
				t.Errorf("cost = %d, want %d", got, tt.want)
			}
		})
	}
}

// TestCostOfEncodedSlash: a path whose dot segment is made by
// an encoded slash pays the route an origin that keeps %2F inside a
// segment serves it on. The path was decoded before it was cleaned, so
// "/v1/items/..%2F42" was priced as "/v1/42" (1), while Go's ServeMux
// (1.22 patterns) and Express route it as "/v1/items/{id}" with the id
// "../42" (measured through `serve` in front of a ServeMux: the items
// route served, 1 counted of a cost of 3).
func TestCostOfEncodedSlash(t *testing.T) {
	cfg := testConfig(t, func(m map[string]any) {
		m["costs"] = []any{map[string]any{"method": "POST", "path_prefix": "/v1/items/", "cost": 3}}
	})
	f := newFixture(t, cfg, nil)
	for _, tt := range []struct {
		path string
		want int64
	}{
		{"/v1/items/42", 3},
		{"/v1/items%2F42", 3}, // "/v1/items/42" to an origin that decodes first
		{"/v1/items/..%2F42", 3},
		{"/v1/items/..%2f..%2fsearch", 3},
		{"/v1/items/%2e%2e%2F42", 3},
		{"/v1/items/../42", 1}, // a dot segment to every origin
		{"/v1/x/../items/42", 3},
	} {
		t.Run(tt.path, func(t *testing.T) {
			if got := f.h.cost(httptest.NewRequest("POST", tt.path, nil)); got != tt.want {
				t.Errorf("cost = %d, want %d", got, tt.want)
			}
		})
	}
}
