package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate/kvstore/memstore"
)

// TestOutageRetryAfterCoversLocalPlanRule: with the shared store down and
// on_store_error allow, a request the local ip rule ("ip-burst", 2 in 10
// s) refuses, from a client whose plan's local flood guard ("burst", 2 a
// minute) has used up its minute, is told to retry when both admit it:
// the plan's local rules are in memory and are read although its shared
// "day" rule cannot be. The plan's peek failed as a whole on the shared
// rule, so Retry-After was the ip rule's 10 s alone, and the retry met the
// plan's 429. Mirror of TestOutageRetryAfterCoversLocalIPRule.
func TestOutageRetryAfterCoversLocalPlanRule(t *testing.T) {
	burst := map[string]any{"name": "ip-burst", "limit": 2, "window": "10s", "scope": "local"}
	shared := map[string]any{"name": "ip-min", "limit": 100, "window": "1m", "scope": "shared"}
	for _, ip := range [][]any{{burst}, {burst, shared}} {
		for _, countDenied := range []bool{false, true} {
			t.Run(fmt.Sprintf("ip_limits=%d/count_denied=%t", len(ip), countDenied), func(t *testing.T) {
				cfg := testConfig(t, func(m map[string]any) {
					m["ip_limits"] = ip
					m["plans"] = map[string]any{"free": map[string]any{"limits": []any{
						map[string]any{"name": "day", "limit": 1000, "window": "24h"},
						map[string]any{"name": "burst", "limit": 2, "window": "1m", "scope": "local"}}}}
					m["api_keys"], m["costs"] = map[string]any{}, []any{}
					m["on_store_error"] = "allow"
					m["count_denied"] = countDenied
				})
				f := newFixture(t, cfg, func(o *Options) { o.Local, o.Store = memstore.New(), &outage{s: memstore.New(), down: true} })
				var codes []int
				var w *httptest.ResponseRecorder
				for range 3 {
					w = f.do(req{})
					codes = append(codes, w.Code)
				}
				var body tooMany
				if err := json.Unmarshal(w.Body.Bytes(), &body); !slices.Equal(codes, []int{200, 200, 429}) || err != nil {
					t.Fatalf("statuses %v, want 200, 200, 429 (%s); logs:\n%s", codes, w.Body, f.logs)
				}
				if got := body.ViolatedPolicies; !slices.Contains(got, "burst") || slices.Contains(got, "day") {
					t.Errorf("violated-policies %q, want burst among them, and not day (unread)", got)
				}
				if got := w.Header().Get("RateLimit"); !strings.Contains(got, `"burst";r=0;`) || strings.Contains(got, `"day"`) {
					t.Errorf("RateLimit %q, want the plan's burst item (used up) and no day item", got)
				}
				retry, err := strconv.Atoi(w.Header().Get("Retry-After"))
				if err != nil {
					t.Fatal(err)
				}
				f.clock.t = f.clock.t.Add(time.Duration(retry) * time.Second)
				if w := f.do(req{}); w.Code != 200 {
					t.Errorf("the retry at Retry-After (%d s): %d (RateLimit %q, Retry-After %s), want 200", retry, w.Code, w.Header().Get("RateLimit"), w.Header().Get("Retry-After"))
				}
			})
		}
	}
}
