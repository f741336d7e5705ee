package httpapi

import (
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"testing"
	"time"
)

// TestRateLimitTIsMoreQuotaBack holds RateLimit's t to draft-10's
// definition (draft-ietf-httpapi-ratelimit-headers-10 §4.1.2): the
// seconds until more of the rule's quota is made available, which a
// sliding window does a little at a time, not until all of it is back. A
// client of the free plan (3 a minute, 100 a day) sends at random steps;
// for every answer, each partly used rule's r is read (a check of cost 0,
// which counts nothing, in a replay of the requests so far) at now + t - 1
// s, where it must not have risen yet, and at now + t, where it must have.
// And a 429's Retry-After is never earlier than the t of a rule that
// refused it (§6); for these requests of cost 1, the deciding rule's t is
// the Retry-After. With t the time until the whole quota is back, r rose
// long before t, and a Retry-After of 45 s came with a t of 93 (README's
// example before the change).
func TestRateLimitTIsMoreQuotaBack(t *testing.T) {
	cfg := testConfig(t, nil)
	key := map[string]string{"X-API-Key": "free-key"}
	type sent struct{ at time.Time }
	var history []sent
	// remaining reads the rules' r at at, after the requests so far.
	remaining := func(at time.Time) map[string]int64 {
		t.Helper()
		fx := newFixture(t, cfg, nil)
		for _, h := range history {
			fx.clock.t = h.at
			fx.do(req{header: key})
		}
		fx.clock.t = at
		w := fx.do(req{method: http.MethodPost, path: CheckPath, body: `{"key":"free-key","cost":0}`})
		var b struct {
			Rules []struct {
				Name      string `json:"name"`
				Remaining int64  `json:"remaining"`
			} `json:"rules"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &b); err != nil || len(b.Rules) != 2 {
			t.Fatalf("check: %d %s", w.Code, w.Body)
		}
		out := map[string]int64{}
		for _, r := range b.Rules {
			out[r.Name] = r.Remaining
		}
		return out
	}
	f := newFixture(t, cfg, nil)
	rng := rand.New(rand.NewPCG(23, 4))
	denials, probes := 0, 0
	for i := range 60 {
		f.clock.t = f.clock.t.Add(time.Duration(rng.IntN(30_000)) * time.Millisecond)
		now := f.clock.t
		w := f.do(req{header: key})
		history = append(history, sent{now})
		items := sfItems(t, "RateLimit", w.Header()["Ratelimit"])
		if w.Code == http.StatusTooManyRequests {
			denials++
			retry := intField(t, w, "Retry-After")
			var b struct {
				Violated []string `json:"violated-policies"`
			}
			_ = json.Unmarshal(w.Body.Bytes(), &b)
			longest := int64(0)
			for _, it := range items {
				for _, v := range b.Violated {
					if it.name == v {
						longest = max(longest, it.params["t"])
					}
				}
			}
			if longest != retry {
				t.Errorf("request %d: Retry-After %d, the refusing rules' longest t %d (RateLimit %q, refused by %q)", i, retry, longest, w.Header()["Ratelimit"], b.Violated)
			}
		}
		base := remaining(now)
		if len(base) != len(items) {
			t.Fatalf("request %d: read %v, RateLimit %q", i, base, w.Header()["Ratelimit"])
		}
		for _, it := range items {
			r, tt := it.params["r"], it.params["t"]
			if tt == 0 {
				continue // nothing used: nothing to come back
			}
			probes++
			at := now.Add(time.Duration(tt) * time.Second)
			if got := base[it.name]; got != r {
				t.Fatalf("request %d: %s read %d at once, RateLimit r=%d", i, it.name, got, r)
			}
			if got := remaining(at.Add(-time.Second))[it.name]; got != r {
				t.Errorf("request %d at +%s: %s has r=%d, t=%d; r is %d already 1 s before t", i, now.Sub(t0), it.name, r, tt, got)
			}
			if got := remaining(at)[it.name]; got <= r {
				t.Errorf("request %d at +%s: %s has r=%d, t=%d; r is %d at t", i, now.Sub(t0), it.name, r, tt, got)
			}
		}
	}
	if denials == 0 || probes == 0 {
		t.Errorf("%d denials, %d rules probed: the walk tests nothing", denials, probes)
	}
}

// TestCountDeniedRateLimitClientNotStarved: under count_denied a refused
// request is counted, so a t that names when one unit is back, not when
// the request's cost fits, sends a client that paces itself by RateLimit
// (it sends when every r is at least its cost, else waits the t of each
// limit short of it) into a refusal that is counted and pushes the next
// unit further out. With a cost of 3 on 5 a minute (and ip_limits of 7 a
// minute) such a client was admitted twice in an hour and refused 31
// times, each refusal counted; t of a limit left short of the cost is now
// when the cost fits again, and the client is never refused (33 admitted,
// one each time the cost fits).
func TestCountDeniedRateLimitClientNotStarved(t *testing.T) {
	cfg := testConfig(t, func(m map[string]any) {
		m["ip_limits"] = []any{map[string]any{"name": "ip-min", "limit": 7, "window": "1m", "scope": "local"}}
		m["plans"] = map[string]any{"free": map[string]any{"limits": []any{
			map[string]any{"name": "minute", "limit": 5, "window": "1m"},
			map[string]any{"name": "day", "limit": 100, "window": "24h"}}}}
		m["api_keys"] = map[string]any{}
		m["costs"] = []any{map[string]any{"method": "POST", "path_prefix": "/v1/search", "cost": 3}}
		m["count_denied"] = true
	})
	f := newFixture(t, cfg, nil)
	start := f.clock.t
	admitted := 0
	for f.clock.t.Sub(start) < time.Hour {
		w := f.do(req{method: http.MethodPost, path: "/v1/search"})
		if w.Code != http.StatusOK {
			t.Fatalf("request %d at +%s: %d, RateLimit %q: a request sent when the headers said it fits", admitted+1, f.clock.t.Sub(start), w.Code, w.Header()["Ratelimit"])
		}
		admitted++
		wait := time.Duration(0)
		for _, it := range sfItems(t, "RateLimit", w.Header()["Ratelimit"]) {
			if it.params["r"] < 3 {
				wait = max(wait, time.Duration(it.params["t"])*time.Second)
			}
		}
		f.clock.t = f.clock.t.Add(wait)
	}
	if admitted < 30 {
		t.Errorf("%d admitted in an hour, want 33 (one each time the cost fits)", admitted)
	}
}
