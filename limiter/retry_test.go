package limiter

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/slidegate/slidegate/kvstore"
	"github.com/slidegate/slidegate/kvstore/memstore"
	"github.com/slidegate/slidegate/window"
)

// TestRetryAfterExactAcrossRules checks a denial's promise on random
// sequential traffic, for every way the limiter can be set up: one to
// three rules of mixed scopes and periods, the deny cache on and off,
// CountDenied on and off, the memory store through its one-rule path,
// through an Admitter, through AddIf alone (DynamoDB's shape), and as a
// plain store (Workers KV's shape), with the clock stepping back now and
// then. At now+RetryAfter the same request, with nothing else in between,
// is admitted; a nanosecond earlier it is not. Each probe replays the
// history into a fresh limiter.
func TestRetryAfterExactAcrossRules(t *testing.T) {
	stores := map[string]func() kvstore.Store{
		"memstore": func() kvstore.Store { return memstore.New() },
		"updater":  func() kvstore.Store { return updater{memstore.New()} },
		"plain":    func() kvstore.Store { return plain{memstore.New()} },
		// AddIf without Update: DynamoDB's shape.
		"conditional": func() kvstore.Store { return conditional{memstore.New()} },
	}
	periods := []time.Duration{time.Second, 10 * time.Second, time.Minute, time.Hour}
	probes := 0
	for name, store := range stores {
		for seed := range uint64(64) {
			rng := rand.New(rand.NewPCG(seed, 11))
			rules := make([]Rule, 1+rng.IntN(3))
			for i := range rules {
				rules[i] = rule(fmt.Sprint("r", i), 2+int64(rng.IntN(6)), periods[rng.IntN(len(periods))])
				rules[i].Local = rng.IntN(3) == 0
			}
			o := Options{DisableDenyCache: rng.IntN(2) == 0, CountDenied: rng.IntN(2) == 0}
			fresh := func() *Limiter {
				o := o
				o.Store, o.Local = store(), memstore.New()
				return New(o)
			}
			type step struct {
				at   time.Time
				cost int64
			}
			var history []step
			at := t0.Add(time.Duration(rng.Int64N(int64(time.Hour))))
			run := fresh()
			checked := 0
			for range 50 {
				at = at.Add(time.Duration(rng.Int64N(int64(2 * time.Second))))
				if rng.IntN(8) == 0 {
					at = at.Add(-time.Duration(rng.Int64N(int64(5 * time.Second)))) // the clock steps back
				}
				cost := 1 + int64(rng.IntN(2))
				history = append(history, step{at, cost})
				res := check(t, run, at, "id", cost, rules...)
				if res.Allowed || res.RetryAfter == 0 || res.RetryAfter == window.Never || checked == 6 {
					continue
				}
				checked++
				for _, p := range []struct {
					after time.Duration
					want  bool
				}{{res.RetryAfter, true}, {res.RetryAfter - 1, false}} {
					l := fresh()
					for _, h := range history {
						check(t, l, h.at, "id", h.cost, rules...)
					}
					if got := check(t, l, at.Add(p.after), "id", cost, rules...).Allowed; got != p.want {
						t.Fatalf("%s, seed %d, %+v, rules %v: denied at step %d (%+v, cached %t); at now+%v allowed %t, want %t",
							name, seed, o, rules, len(history), res.Decision, res.Cached, p.after, got, p.want)
					}
				}
			}
			probes += checked
		}
	}
	t.Logf("%d denials checked", probes)
	if probes < 150 {
		t.Errorf("only %d denials checked: the traffic is too light to test anything", probes)
	}
}

// conditional hides Update and UpdateRule: the limiter loads, decides and
// writes with AddIf, as on DynamoDB.
type conditional struct{ kvstore.Conditional }
