package limiter

import (
	"testing"
	"time"
)

// TestDenyCacheKeepsScopesApart: a local rule and a shared rule of the same
// name, limit and period count in different stores (a plan whose "second"
// is local, another whose "second" is shared, both on one identity). The
// shared rule's denial, remembered by the deny cache, must not answer a
// check of the local rule, whose own counter has room: the local store
// admits it.
func TestDenyCacheKeepsScopesApart(t *testing.T) {
	shared := rule("second", 1, time.Second)
	local := shared
	local.Local = true
	for _, tc := range []struct {
		name  string
		local []Rule
	}{
		{"one rule", []Rule{local}},
		{"two rules", []Rule{local, rule("day", 100, 24*time.Hour)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sharedSet := []Rule{shared}
			if len(tc.local) == 2 {
				sharedSet = []Rule{shared, tc.local[1]}
			}
			for _, cache := range []bool{false, true} {
				l := New(Options{DisableDenyCache: !cache})
				if !check(t, l, t0, "k", 1, sharedSet...).Allowed {
					t.Fatal("setup: the shared rule's first request was denied")
				}
				if check(t, l, t0, "k", 1, sharedSet...).Allowed {
					t.Fatal("setup: the shared rule's second request was admitted")
				}
				// The local counter of "second" is untouched.
				res := check(t, l, t0, "k", 1, tc.local...)
				if !res.Allowed {
					t.Errorf("deny cache %t: local rule denied (cached %t, rule %q, RetryAfter %v); the local store has room",
						cache, res.Cached, res.Rule, res.RetryAfter)
				}
			}
		})
	}
}
