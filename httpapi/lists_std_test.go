package httpapi

import (
	"net/http"
	"testing"

	"github.com/dunglas/httpsfv"
)

// TestOriginListFieldsStayReadable: an origin that limits too and writes
// RateLimit in an older draft's form (express-rate-limit's draft-7 mode
// sends the dictionary "limit=100, remaining=25, reset=5") made the
// combined field no structured-field list at all, and a client must
// ignore a RateLimit it cannot parse (draft-ietf-httpapi-ratelimit-
// headers-10, section 7): slidegate's own items were lost with it.
func TestOriginListFieldsStayReadable(t *testing.T) {
	for _, tc := range []struct {
		name          string
		limit, policy string // the origin's RateLimit and RateLimit-Policy
		items         int    // items a client reads in RateLimit
	}{
		{"draft-7 dictionary", "limit=100, remaining=25, reset=5", "100;w=60", 2},
		{"draft-8 list", `"100-in-1min"; r=25; t=5`, `"100-in-1min"; q=100; w=60`, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, testConfig(t, nil), func(o *Options) {
				o.Next = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					w.Header().Add("RateLimit", tc.limit)
					w.Header().Add("RateLimit-Policy", tc.policy)
				})
			})
			w := f.do(req{})
			l, err := httpsfv.UnmarshalList(w.Header().Values("RateLimit"))
			if err != nil {
				t.Fatalf("RateLimit %q is no list a client can read: %v", w.Header().Values("RateLimit"), err)
			}
			if len(l) != tc.items {
				t.Errorf("RateLimit %q holds %d items, want %d", w.Header().Values("RateLimit"), len(l), tc.items)
			}
			if _, err := httpsfv.UnmarshalList(w.Header().Values("RateLimit-Policy")); err != nil {
				t.Errorf("RateLimit-Policy %q: %v", w.Header().Values("RateLimit-Policy"), err)
			}
		})
	}
}
