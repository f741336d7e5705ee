package httpapi

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"testing"
	"time"
)

// TestCheckAgreesWithPreFilter: after the same requests through the
// pre-filter, a check of the key at the same cost answers with the
// rate-limit headers the pre-filter's next request of that cost gets (the
// configuration has no ip_limits, which the check API does not apply):
// one identity, one set of counters, one decision.
func TestCheckAgreesWithPreFilter(t *testing.T) {
	for _, mode := range []string{"plain", "count_denied", "shadow"} {
		t.Run(mode, func(t *testing.T) {
			cfg := testConfig(t, func(m map[string]any) {
				m["count_denied"] = mode == "count_denied"
				m["shadow"] = mode == "shadow"
			})
			rng := rand.New(rand.NewPCG(3, 4))
			denied := 0
			for trial := range 200 {
				a, b := newFixture(t, cfg, nil), newFixture(t, cfg, nil)
				key := []string{proKey, "other"}[rng.IntN(2)]
				n := rng.IntN(14)
				for range n {
					d := time.Duration(rng.IntN(20000)) * time.Millisecond
					a.clock.t, b.clock.t = a.clock.t.Add(d), b.clock.t.Add(d)
					path := []string{"/api", "/v1/search"}[rng.IntN(2)]
					r := req{method: http.MethodPost, path: path, header: map[string]string{"X-API-Key": key}}
					a.do(r)
					b.do(r)
				}
				path, cost := "/api", 1
				if rng.IntN(2) == 0 {
					path, cost = "/v1/search", 2
				}
				wa := a.do(req{method: http.MethodPost, path: path, header: map[string]string{"X-API-Key": key}})
				wb := b.do(req{method: http.MethodPost, path: CheckPath, body: fmt.Sprintf(`{"key":%q,"cost":%d}`, key, cost)})
				if wa.Code == http.StatusTooManyRequests || wa.Header().Get(ShadowHeader) != "" {
					denied++
				}
				for _, h := range []string{"RateLimit", "RateLimit-Policy", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "Retry-After", ShadowHeader} {
					if wa.Header().Get(h) != wb.Header().Get(h) {
						t.Errorf("trial %d: %s: pre-filter %q, check %q (%s)", trial, h, wa.Header().Get(h), wb.Header().Get(h), wb.Body)
					}
				}
			}
			if denied == 0 {
				t.Error("no request was denied")
			}
		})
	}
}
