package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate/kvstore"
	"github.com/slidegate/slidegate/kvstore/memstore"
)

// TestPlanLocalRulesHoldInOutage: a plan's rule of local scope is counted
// in memory, and holds while the shared store fails. Under on_store_error
// allow it admits the first two requests of a minute and refuses the next
// with a 429 naming it, Retry-After included, and the store error logged;
// under deny every request gets its 503 and the local rule's count of it
// is taken back. The local count was taken back in both cases and the
// local rule's denial answered as a store error: under allow, every
// request went through, counted by nothing.
func TestPlanLocalRulesHoldInOutage(t *testing.T) {
	for _, tc := range []struct {
		policy string
		codes  []int
		count  int64 // the local rule's count after
	}{
		{"allow", []int{200, 200, 429, 429}, 2},
		{"deny", []int{503, 503, 503, 503}, 0},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			local := memstore.New()
			cfg := testConfig(t, func(m map[string]any) {
				m["plans"] = map[string]any{"free": map[string]any{"limits": []any{
					map[string]any{"name": "day", "limit": 1000, "window": "24h"},
					map[string]any{"name": "burst", "limit": 2, "window": "1m", "scope": "local"}}}}
				m["api_keys"], m["costs"], m["ip_limits"] = map[string]any{}, []any{}, []any{}
				m["on_store_error"] = tc.policy
			})
			f := newFixture(t, cfg, func(o *Options) { o.Local, o.Store = local, &failStore{} })
			for i, want := range tc.codes {
				w := f.do(req{})
				if w.Code != want {
					t.Fatalf("request %d: %d, want %d; logs:\n%s", i+1, w.Code, want, f.logs)
				}
				if want != 429 {
					continue
				}
				if got := w.Header().Get("RateLimit"); !strings.HasPrefix(got, `"burst";r=0;t=`) || strings.Contains(got, "day") {
					t.Errorf("request %d: RateLimit %q, want the local rule's item alone", i+1, got)
				}
				if w.Header().Get("Retry-After") == "" || w.Header().Get("X-RateLimit-Limit") != "2" {
					t.Errorf("request %d: Retry-After %q, X-RateLimit-Limit %q; want a wait and the local rule's 2", i+1, w.Header().Get("Retry-After"), w.Header().Get("X-RateLimit-Limit"))
				}
			}
			if got := minuteCount(t, local, "ip:192.0.2.1", "burst", f.clock.t); got != tc.count {
				t.Errorf("local rule's count %d after the requests, want %d", got, tc.count)
			}
			if tc.policy == "allow" && !strings.Contains(f.logs.String(), sharedUnread) {
				t.Errorf("no store error line for the local denial:\n%s", f.logs)
			}
		})
	}
}

// heldPlan is a memory store that holds every call touching the plan's
// rule "day" until its context is done, and, as a remote store does,
// sends nothing on a context already done. It is a plain kvstore.Store
// (read, then record behind), as Workers KV is.
type heldPlan struct{ s *memstore.Store }

func (s heldPlan) wait(ctx context.Context, slots []kvstore.Slot) error {
	for _, sl := range slots {
		if sl.Name == "day" {
			<-ctx.Done()
		}
	}
	return ctx.Err()
}

func (s heldPlan) Load(ctx context.Context, id string, slots []kvstore.Slot, counts []int64) error {
	if err := s.wait(ctx, slots); err != nil {
		return err
	}
	return s.s.Load(ctx, id, slots, counts)
}

func (s heldPlan) Add(ctx context.Context, id string, slots []kvstore.Slot, costs []int64) error {
	if err := s.wait(ctx, slots); err != nil {
		return err
	}
	return s.s.Add(ctx, id, slots, costs)
}

// TestRefundAfterPlanTimeout: under on_store_error deny, a request whose
// plan check used up store_timeout gets its 503, and the ip rules' count of
// it is taken back on a budget of its own. The refund ran on the spent
// context and was never sent: after two such requests the client's ip
// rule (2 a minute) stood at 2, and once the store answered again the
// client got a 429 for requests that were never served.
func TestRefundAfterPlanTimeout(t *testing.T) {
	shared := memstore.New()
	cfg := testConfig(t, func(m map[string]any) {
		m["plans"] = map[string]any{"free": map[string]any{"limits": []any{
			map[string]any{"name": "day", "limit": 100, "window": "24h"}}}}
		m["api_keys"], m["costs"] = map[string]any{}, []any{}
		m["ip_limits"] = []any{map[string]any{"name": "ip-min", "limit": 2, "window": "1m", "scope": "shared"}}
		m["on_store_error"], m["store_timeout"] = "deny", "20ms"
	})
	f := newFixture(t, cfg, func(o *Options) { o.Store = heldPlan{shared} })
	for i := range 2 {
		if w := f.do(req{}); w.Code != 503 {
			t.Fatalf("request %d: %d, want 503", i+1, w.Code)
		}
	}
	if got := ipCount(t, shared, f.clock.t); got != 0 {
		t.Errorf("ip rule count %d after two refused requests, want 0 (taken back); logs:\n%s", got, f.logs)
	}
}

// TestCountDeniedKeepsOutageCounts: with count_denied, a request refused
// with a 503 (on_store_error deny) is counted as any refused request is:
// the plan's local rule (2 a minute) keeps its two 503s, and once the
// store answers again the client's requests in that minute get the local
// rule's 429. Without count_denied the counts are taken back and the
// first request after the outage is served. (README, "Store errors".)
func TestCountDeniedKeepsOutageCounts(t *testing.T) {
	for _, tc := range []struct {
		countDenied bool
		after       int // the status after the outage
	}{
		{false, 200},
		{true, 429},
	} {
		st := &outage{s: memstore.New(), down: true}
		cfg := testConfig(t, func(m map[string]any) {
			m["plans"] = map[string]any{"free": map[string]any{"limits": []any{
				map[string]any{"name": "day", "limit": 1000, "window": "24h"},
				map[string]any{"name": "burst", "limit": 2, "window": "1m", "scope": "local"}}}}
			m["api_keys"], m["costs"], m["ip_limits"] = map[string]any{}, []any{}, []any{}
			m["on_store_error"], m["count_denied"] = "deny", tc.countDenied
		})
		f := newFixture(t, cfg, func(o *Options) { o.Store = st })
		var codes []int
		for range 2 {
			codes = append(codes, f.do(req{}).Code)
		}
		st.down = false
		codes = append(codes, f.do(req{}).Code)
		if want := []int{503, 503, tc.after}; !slices.Equal(codes, want) {
			t.Errorf("count_denied %t: %v, want %v", tc.countDenied, codes, want)
		}
	}
}

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
