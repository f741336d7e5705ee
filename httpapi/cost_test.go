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
