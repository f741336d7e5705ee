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
//
// The two lines are dropped together when either would make its field no
// list, whichever the origin sent: both fields are then the pre-filter's
// alone. Hand mutations that kept the origin's policy, read only one
// field, or settled only an origin that sent both went unseen.
func TestOriginListFieldsStayReadable(t *testing.T) {
	for _, tc := range []struct {
		name          string
		limit, policy string // the origin's RateLimit and RateLimit-Policy ("": not sent)
		items         int    // items a client reads in each field
	}{
		{"draft-7 dictionary, readable policy", "limit=100, remaining=25, reset=5", "100;w=60", 2},
		{"draft-7 dictionary alone", "limit=100, remaining=25, reset=5", "", 2},
		{"unreadable policy", `"100-in-1min";r=25;t=5`, "limit=100, window=60", 2},
		{"unreadable policy alone", "", "limit=100, window=60", 2},
		{"both readable (draft-8 lists)", `"100-in-1min"; r=25; t=5`, `"100-in-1min"; q=100; w=60`, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, testConfig(t, nil), func(o *Options) {
				o.Next = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if tc.limit != "" {
						w.Header().Add("RateLimit", tc.limit)
					}
					if tc.policy != "" {
						w.Header().Add("RateLimit-Policy", tc.policy)
					}
				})
			})
			w := f.do(req{})
			for _, name := range []string{"RateLimit", "RateLimit-Policy"} {
				l, err := httpsfv.UnmarshalList(w.Header().Values(name))
				if err != nil {
					t.Errorf("%s %q is no list a client can read: %v", name, w.Header().Values(name), err)
					continue
				}
				want := tc.items
				if name == "RateLimit" && tc.limit == "" || name == "RateLimit-Policy" && tc.policy == "" {
					want = 2 // the origin sent none: the pre-filter's alone
				}
				if len(l) != want {
					t.Errorf("%s %q holds %d items, want %d", name, w.Header().Values(name), len(l), want)
				}
			}
		})
	}
}
