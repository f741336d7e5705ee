package httpapi

import (
	"net/http"
	"testing"

	"github.com/dunglas/httpsfv"
)

// TestOriginListFieldsSettleTogether: the origin's RateLimit and
// RateLimit-Policy lines are dropped together when either would make its
// field no list, whichever the origin sent: both fields are then the
// pre-filter's alone, with as many items each. Hand mutations that kept
// the origin's policy, read only one field, or settled only an origin
// that sent both went unseen.
func TestOriginListFieldsSettleTogether(t *testing.T) {
	for _, tc := range []struct {
		name          string
		limit, policy string // the origin's RateLimit and RateLimit-Policy ("": not sent)
		items         int    // items a client reads in each field
	}{
		{"draft-7 dictionary, readable policy", "limit=100, remaining=25, reset=5", "100;w=60", 2},
		{"draft-7 dictionary alone", "limit=100, remaining=25, reset=5", "", 2},
		{"unreadable policy", `"100-in-1min";r=25;t=5`, "limit=100, window=60", 2},
		{"unreadable policy alone", "", "limit=100, window=60", 2},
		{"both readable", `"100-in-1min";r=25;t=5`, `"100-in-1min";q=100;w=60`, 3},
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
