package limiter

import (
	"fmt"
	"testing"
	"time"

	"github.com/slidegate/slidegate/kvstore/memstore"
	"github.com/slidegate/slidegate/window"
)

// Tests of the deny cache, each pinning what a hand mutation of the
// limiter or the cache changed unseen (session 14).

// TestOneRuleLocalDenialIsNotRemembered: TestLocalDenialIsNotRemembered
// with B checking the local rule alone, as the HTTP layer's per-IP check
// does (one rule: the path that asks the store to decide the rule). B is
// denied on A's local count, which is then taken back; C, of B's rules, has
// room and must be admitted by the store, not refused by a remembered
// denial of B until the local second ends.
func TestOneRuleLocalDenialIsNotRemembered(t *testing.T) {
	flood := Rule{Rule: window.Rule{Name: "ip-second", Limit: 2, Period: time.Second}, Local: true}
	other := Rule{Rule: window.Rule{Name: "ip-minute", Limit: 100, Period: time.Minute}, Local: true}
	quota := rule("minute", 10, time.Minute)
	for _, tc := range []struct {
		name string
		b    []Rule
	}{
		{"one local rule", []Rule{flood}},
		{"two local rules", []Rule{flood, other}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			local := &undoHook{Store: memstore.New()}
			l := New(Options{Local: local})
			at := t0.Add(100 * time.Millisecond)
			for range 9 { // the shared minute holds 9 of 10
				if res := check(t, l, t0.Add(-30*time.Second), "k", 1, quota); !res.Allowed {
					t.Fatalf("filling the minute: denied by %q", res.Rule)
				}
			}
			var b Result
			local.hook = func() { b = check(t, l, at, "k", 1, tc.b...) }
			if a := check(t, l, at, "k", 2, flood, quota); a.Allowed || a.Rule != "minute" {
				t.Fatalf("A (cost 2): allowed %t by %q; want denied by %q", a.Allowed, a.Rule, "minute")
			}
			if b.Allowed || b.Rule != "ip-second" {
				t.Fatalf("B, checked while A's local count stood: allowed %t by %q; want denied by %q", b.Allowed, b.Rule, "ip-second")
			}
			c := check(t, l, at.Add(time.Millisecond), "k", 1, tc.b...)
			if !c.Allowed || c.Cached {
				t.Fatalf("C (cost 1, local 0 of 2): allowed %t (cached %t) by %q, RetryAfter %v; want admitted by the store",
					c.Allowed, c.Cached, c.Rule, c.RetryAfter)
			}
		})
	}
}

// ruleSet is a named set of rules for a table test.
type ruleSet struct {
	name  string
	rules []Rule
}

// withAndWithoutDay returns r alone, which takes the one-rule path, and r
// with a roomy day rule, which takes the general one.
func withAndWithoutDay(r Rule) []ruleSet {
	return []ruleSet{{"one rule", []Rule{r}}, {"two rules", []Rule{r, rule("day", 1000, 24*time.Hour)}}}
}

// TestDenyCacheExpiresAtItsWait: a remembered denial holds until a
// request of cost 1 is admitted (its RetryAfter) and not a nanosecond
// longer. At that instant a cost-1 request is admitted and counted; a
// cost-2 request just after it, at the same instant, must be decided on the
// counts that hold it, as without the cache, not on the remembered ones
// (which gave a RetryAfter of 20 s where the store says 40 s).
func TestDenyCacheExpiresAtItsWait(t *testing.T) {
	r := rule("minute", 3, time.Minute)
	for _, tc := range withAndWithoutDay(r) {
		t.Run(tc.name, func(t *testing.T) {
			cached, store := New(Options{}), New(Options{DisableDenyCache: true})
			both := func(at time.Time, cost int64) (got, want Result) {
				t.Helper()
				return check(t, cached, at, "k", cost, tc.rules...), check(t, store, at, "k", cost, tc.rules...)
			}
			for range 3 {
				both(t0, 1)
			}
			first, _ := both(t0, 1)
			if first.Allowed || first.Cached {
				t.Fatalf("setup: 4th request allowed %t, cached %t; want a denial from the store", first.Allowed, first.Cached)
			}
			if got, _ := both(t0.Add(time.Second), 1); got.Allowed || !got.Cached {
				t.Fatalf("setup: allowed %t, cached %t; want a denial from the deny cache", got.Allowed, got.Cached)
			}
			until := t0.Add(first.RetryAfter)
			for i, cost := range []int64{1, 2} {
				got, want := both(until, cost)
				if got.Decision != want.Decision || got.Cached {
					t.Fatalf("request %d (cost %d) at the remembered RetryAfter:\n\tgot  %+v (cached %t)\n\twant %+v",
						i+1, cost, got.Decision, got.Cached, want.Decision)
				}
			}
		})
	}
}

// TestDenyCacheKeepsUnsharedDenials: a request of another rule set goes to
// the store and drops the remembered denials that count on one of its
// counters; a rule of the same name in the other scope, or with another
// period, is another counter, and the denial stays: the blocked client's
// next request is answered without the store.
func TestDenyCacheKeepsUnsharedDenials(t *testing.T) {
	blocked := rule("minute", 1, time.Minute)
	localMinute := blocked
	localMinute.Local = true
	for _, tc := range []struct {
		name  string
		other Rule
	}{
		{"same name, local", localMinute},
		{"same name, another period", rule("minute", 1, time.Hour)},
		{"another name", rule("burst", 1, time.Minute)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &counting{Conditional: memstore.New()}
			l := New(Options{Store: s})
			check(t, l, t0, "k", 1, blocked)
			if res := check(t, l, t0, "k", 1, blocked); res.Allowed || res.Cached {
				t.Fatalf("setup: allowed %t, cached %t; want a denial from the store", res.Allowed, res.Cached)
			}
			if res := check(t, l, t0, "k", 1, tc.other); !res.Allowed || res.Cached {
				t.Fatalf("other rule %+v: allowed %t, cached %t; want admitted by its store", tc.other, res.Allowed, res.Cached)
			}
			before := s.calls()
			if res := check(t, l, t0, "k", 1, blocked); res.Allowed || !res.Cached || s.calls() != before {
				t.Errorf("after the other rule's request: allowed %t, cached %t, %d store calls; want a denial from the deny cache",
					res.Allowed, res.Cached, s.calls()-before)
			}
		})
	}
}

// TestDenialRememberedAfterARefund: a refund holds back only the denials
// decided while it ran; a denial decided on the store after it is
// remembered as any other, on either path (a check that took its refund
// generation as zero never remembered a denial of an identity refunded
// once, nor of the identities sharing its refund counter).
func TestDenialRememberedAfterARefund(t *testing.T) {
	r := rule("minute", 3, time.Minute)
	for _, tc := range withAndWithoutDay(r) {
		t.Run(tc.name, func(t *testing.T) {
			l := New(Options{})
			a := check(t, l, t0, "k", 1, tc.rules...)
			if err := l.Refund(ctx, a.At, "k", tc.rules, 1); err != nil {
				t.Fatal(err)
			}
			for i := range 3 {
				if res := check(t, l, t0, "k", 1, tc.rules...); !res.Allowed {
					t.Fatalf("request %d after the refund denied by %q", i+1, res.Rule)
				}
			}
			if res := check(t, l, t0, "k", 1, tc.rules...); res.Allowed || res.Cached {
				t.Fatalf("4th request: allowed %t, cached %t; want a denial from the store", res.Allowed, res.Cached)
			}
			if res := check(t, l, t0.Add(time.Second), "k", 1, tc.rules...); res.Allowed || !res.Cached {
				t.Errorf("5th request: allowed %t, cached %t; want a denial from the deny cache", res.Allowed, res.Cached)
			}
		})
	}
}

// TestRefundOfNoCost: a Refund of cost 0 (or less) takes nothing back: it
// sends the store nothing and keeps a remembered denial, which no count
// taken back could have made wrong.
func TestRefundOfNoCost(t *testing.T) {
	r := rule("minute", 1, time.Minute)
	for _, cost := range []int64{0, -1} {
		t.Run(fmt.Sprint("cost ", cost), func(t *testing.T) {
			s := &counting{Conditional: memstore.New()}
			l := New(Options{Store: s})
			check(t, l, t0, "k", 1, r)
			denied := check(t, l, t0, "k", 1, r)
			if denied.Allowed || denied.Cached {
				t.Fatalf("setup: allowed %t, cached %t; want a denial from the store", denied.Allowed, denied.Cached)
			}
			before := s.calls()
			if err := l.Refund(ctx, denied.At, "k", []Rule{r}, cost); err != nil {
				t.Fatalf("Refund(cost %d): %v", cost, err)
			}
			if got := s.calls() - before; got != 0 {
				t.Errorf("Refund(cost %d) made %d store calls, want 0", cost, got)
			}
			if res := check(t, l, t0, "k", 1, r); res.Allowed || !res.Cached {
				t.Errorf("after Refund(cost %d): allowed %t, cached %t; want the denial still remembered", cost, res.Allowed, res.Cached)
			}
		})
	}
}
