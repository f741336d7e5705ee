package httpapi

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate/kvstore/memstore"
)

// TestTieShowsTheWholeRule: of two rules tied on remaining, the one whose
// quota is back last is shown by the whole X-RateLimit trio: its Limit
// beside its Reset (TestResetOfATieAdmits pins the Reset; a hand mutation
// that kept the deciding rule's Limit went unseen). 5 per 10 s and 8 per
// minute, 3 requests and then 5.
func TestTieShowsTheWholeRule(t *testing.T) {
	cfg := testConfig(t, func(m map[string]any) {
		m["plans"] = map[string]any{"free": map[string]any{"limits": []any{
			map[string]any{"name": "burst", "limit": 5, "window": "10s"},
			map[string]any{"name": "minute", "limit": 8, "window": "1m"},
		}}}
		m["api_keys"] = map[string]any{}
	})
	f := newFixture(t, cfg, nil)
	for range 3 {
		f.do(req{})
	}
	f.clock.t = f.clock.t.Add(20 * time.Second)
	for range 4 {
		f.do(req{})
	}
	w := f.do(req{})
	if w.Code != 200 || w.Header().Get("X-RateLimit-Remaining") != "0" {
		t.Fatalf("8th request: %d, X-RateLimit-Remaining %q; want 200 and 0", w.Code, w.Header().Get("X-RateLimit-Remaining"))
	}
	wantHeader(t, w, "X-RateLimit-Limit", "8")
}

// TestCheckAPIOutageDenial: the check API answers a plan's local denial
// in an outage (on_store_error allow) as the pre-filter does: its rules
// are the ones decided, the shared rule whose store failed left out, and
// the store error is logged. Hand mutations that listed the undecided rule
// (name "", limit 0) or dropped the log line went unseen.
func TestCheckAPIOutageDenial(t *testing.T) {
	f := newFixture(t, burstConfig(t, nil, 1), func(o *Options) {
		o.Local, o.Store = memstore.New(), &outage{s: memstore.New(), down: true}
	})
	r := req{method: "POST", path: CheckPath, body: `{"key": "k"}`}
	f.do(r) // the one "burst" admits, as a store error
	w := f.do(r)
	var resp struct {
		Allowed bool `json:"allowed"`
		Rules   []struct {
			Name  string `json:"name"`
			Limit int64  `json:"limit"`
		} `json:"rules"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil {
		t.Fatalf("%v: %s", err, w.Body)
	}
	if resp.Allowed || len(resp.Rules) != 1 || resp.Rules[0].Name != "burst" || resp.Rules[0].Limit != 1 {
		t.Errorf("second check: %s, want a denial with the burst rule alone", w.Body)
	}
	if !strings.Contains(f.logs.String(), sharedUnread) {
		t.Errorf("no store error line for the local denial:\n%s", f.logs)
	}
}
