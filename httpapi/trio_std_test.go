package httpapi

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"
)

// TestResetOfATieAdmits: a client that finds X-RateLimit-Remaining 0 on an
// answer and waits until X-RateLimit-Reset, as GitHub tells its clients
// to, is admitted then. Limits of 5 per 10 s and 8 per minute: 3 requests
// at 0 s and a burst of 5 at 20 s leave both with 0 remaining. The trio
// showed the 10 s limit, the first of the tie, whose quota is back at
// 38 s; the minute limit refused the request sent then (Retry-After 23).
// The check API's top-level numbers are the trio's and had the same fault.
func TestResetOfATieAdmits(t *testing.T) {
	cfg := testConfig(t, func(m map[string]any) {
		m["plans"] = map[string]any{"free": map[string]any{"limits": []any{
			map[string]any{"name": "burst", "limit": 5, "window": "10s"},
			map[string]any{"name": "minute", "limit": 8, "window": "1m"},
		}}}
		m["api_keys"] = map[string]any{}
	})
	for _, api := range []string{"pre-filter", "check"} {
		t.Run(api, func(t *testing.T) {
			f := newFixture(t, cfg, nil)
			r := req{}
			if api == "check" {
				r = req{method: "POST", path: CheckPath, body: `{"key": "k"}`}
			}
			var last map[string]any
			send := func(at time.Duration) (int, string, string) {
				t.Helper()
				f.clock.t = t0.Add(at)
				w := f.do(r)
				if api == "check" {
					last = nil
					if err := json.Unmarshal(w.Body.Bytes(), &last); err != nil {
						t.Fatal(err)
					}
					if last["allowed"] != true {
						return 429, w.Header().Get("X-RateLimit-Remaining"), w.Header().Get("X-RateLimit-Reset")
					}
				}
				return w.Code, w.Header().Get("X-RateLimit-Remaining"), w.Header().Get("X-RateLimit-Reset")
			}
			for range 3 {
				send(0)
			}
			var code int
			var remaining, reset string
			for range 5 {
				code, remaining, reset = send(20 * time.Second)
			}
			if code != 200 || remaining != "0" {
				t.Fatalf("8th request: %d with X-RateLimit-Remaining %s, want 200 and 0", code, remaining)
			}
			// minute: 8 in the first bucket weigh floor(8 × overlap), 0
			// once overlap < 1/8: 52.5 s and 1 ns into the next bucket.
			if want := strconv.FormatInt(t0.Unix()+113, 10); reset != want {
				t.Errorf("X-RateLimit-Reset %s, want %s (the minute limit's)", reset, want)
			}
			if api == "check" {
				if got, want := last["policy"], "minute"; got != want {
					t.Errorf("policy %v, want %v", got, want)
				}
				if got, want := last["reset_after_ms"], float64(92_501); got != want {
					t.Errorf("reset_after_ms %v, want %v", got, want)
				}
			}
			epoch, err := strconv.ParseInt(reset, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			if code, _, _ := send(time.Unix(epoch, 0).Sub(t0)); code != 200 {
				t.Errorf("at X-RateLimit-Reset %s: %d, want 200", reset, code)
			}
		})
	}
}
