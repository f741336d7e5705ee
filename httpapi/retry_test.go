package httpapi

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"
)

// TestRetryAfterIsHonest drives random traffic (two IPs, anonymous and
// keyed, weighted routes, steps of 0 to 3 s) through ip_limits and a
// two-rule plan, and checks the promise every 429 makes: the same request,
// sent Retry-After seconds later with nothing else in between, is
// admitted. Each check replays the history into a fresh handler, so the
// probe does not disturb the run; the first 8 429s of a run are checked.
// With count_denied too, where refused requests stay counted and
// Retry-After must wait for every rule.
func TestRetryAfterIsHonest(t *testing.T) {
	for _, countDenied := range []bool{false, true} {
		probes := 0
		for seed := range uint64(32) {
			rng := rand.New(rand.NewPCG(seed, 7))
			cfg := testConfig(t, func(m map[string]any) {
				// The plan's short rule is per second or per minute: its
				// waits are shorter or longer than the ip rule's.
				short := map[string]any{"name": "short", "limit": 4 + rng.IntN(4), "window": "1m"}
				if rng.IntN(2) == 0 {
					short["limit"], short["window"] = 2+rng.IntN(2), "1s"
				}
				m["plans"] = map[string]any{
					"free": map[string]any{"limits": []any{short,
						map[string]any{"name": "hour", "limit": 10 + rng.IntN(10), "window": "1h"}}},
					"pro": map[string]any{"limits": []any{
						map[string]any{"name": "minute", "limit": 6 + rng.IntN(6), "window": "1m"}}},
				}
				// A per-second flood limit, or a per-minute one that outlasts
				// the plan's waits.
				ip := map[string]any{"name": "ip", "limit": 3 + rng.IntN(3), "window": "1s", "scope": "local"}
				if rng.IntN(2) == 0 {
					ip["limit"], ip["window"] = 6+rng.IntN(6), "1m"
				}
				m["ip_limits"] = []any{ip}
				m["count_denied"] = countDenied
			})
			var history []timedReq
			start := t0.Add(time.Duration(rng.IntN(60_000)) * time.Millisecond)
			at := start
			run := newFixture(t, cfg, nil)
			checked := 0
			for range 60 {
				at = at.Add(time.Duration(rng.IntN(1500)) * time.Millisecond)
				r := randomReq(rng)
				history = append(history, timedReq{at, r})
				run.clock.t = at
				w := run.do(r)
				if w.Code != 429 || checked == 8 {
					continue
				}
				checked++
				ra, err := strconv.Atoi(w.Header().Get("Retry-After"))
				if err != nil || ra < 1 {
					t.Fatalf("count_denied %t, seed %d: 429 with Retry-After %q", countDenied, seed, w.Header().Get("Retry-After"))
				}
				probe := newFixture(t, cfg, nil)
				for _, h := range history {
					probe.clock.t = h.at
					probe.do(h.r)
				}
				probe.clock.t = at.Add(time.Duration(ra) * time.Second)
				if p := probe.do(r); p.Code != 200 {
					t.Fatalf("count_denied %t, seed %d, request %d: 429 at %s with Retry-After %d (RateLimit %s); at +%d s: %d (RateLimit %s)",
						countDenied, seed, len(history), at.Sub(start), ra, w.Header().Get("RateLimit"), ra, p.Code, p.Header().Get("RateLimit"))
				}
			}
			probes += checked
		}
		t.Logf("count_denied %t: %d 429s checked", countDenied, probes)
		if probes < 100 {
			t.Errorf("count_denied %t: only %d 429s checked; the traffic is too light to test anything", countDenied, probes)
		}
	}
}

type timedReq struct {
	at time.Time
	r  req
}

// randomReq is one of two clients' requests: anonymous or with the pro
// key, a plain GET or the POST route that costs 2.
func randomReq(rng *rand.Rand) req {
	r := req{remote: "192.0.2." + strconv.Itoa(1+rng.IntN(2)) + ":5000"}
	if rng.IntN(3) == 0 {
		r.header = map[string]string{"X-API-Key": proKey}
	}
	if rng.IntN(4) == 0 {
		r.method, r.path = "POST", "/v1/search"
	}
	return r
}
