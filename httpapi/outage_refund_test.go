package httpapi

import (
	"context"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/slidegate/slidegate/kvstore"
	"github.com/slidegate/slidegate/kvstore/memstore"
)

// Tests of the store-error paths of decide, planAfterIPError and settleIP,
// each pinning what a hand mutation of them changed unseen.

// TestPlanOfLocalRulesBehindFailedIPRule: a plan of local rules alone
// ("burst", 2 a minute) behind ip_limits with a shared rule, in an outage,
// under on_store_error allow. The requests the plan admits go through as
// store errors (Slidegate-Store: error-allowed), counted by the local ip
// rule; the one it refuses is its 429, taken back from the local ip rule,
// and the ip rules' error is logged.
func TestPlanOfLocalRulesBehindFailedIPRule(t *testing.T) {
	cfg := testConfig(t, func(m map[string]any) {
		m["ip_limits"] = []any{
			map[string]any{"name": "ip-burst", "limit": 10, "window": "1m", "scope": "local"},
			map[string]any{"name": "ip-min", "limit": 100, "window": "1m", "scope": "shared"}}
		m["plans"] = map[string]any{"free": map[string]any{"limits": []any{
			map[string]any{"name": "burst", "limit": 2, "window": "1m", "scope": "local"}}}}
		m["api_keys"], m["costs"] = map[string]any{}, []any{}
		m["on_store_error"] = "allow"
	})
	mem := memstore.New()
	f := newFixture(t, cfg, func(o *Options) { o.Local, o.Store = mem, &outage{s: memstore.New(), down: true} })
	var codes []int
	var stores []string
	for range 3 {
		w := f.do(req{})
		codes, stores = append(codes, w.Code), append(stores, w.Header().Get(StoreHeader))
	}
	if want := []int{200, 200, 429}; !slices.Equal(codes, want) {
		t.Errorf("statuses %v, want %v; logs:\n%s", codes, want, f.logs)
	}
	if want := []string{StoreErrorAllowed, StoreErrorAllowed, ""}; !slices.Equal(stores, want) {
		t.Errorf("%s %q, want %q", StoreHeader, stores, want)
	}
	if got := minuteCount(t, mem, "ip:192.0.2.1", "ip-burst", f.clock.t); got != 2 {
		t.Errorf("local ip rule's count %d, want 2 (the served requests)", got)
	}
	if !strings.Contains(f.logs.String(), "the plan decided alone, without ip_limits") {
		t.Errorf("no store error line for the ip rules of the 429:\n%s", f.logs)
	}
}

// TestRefusedOnIPErrorKeepsSharedIPCount: under on_store_error deny, a
// request whose shared ip rule failed (its local one counted it) gets its
// 503, and only the local ip rule's count is taken back: the shared rule
// never counted it, and a refund there, on a store answering again, took
// back a served request's count.
func TestRefusedOnIPErrorKeepsSharedIPCount(t *testing.T) {
	cfg := testConfig(t, func(m map[string]any) {
		m["ip_limits"] = []any{
			map[string]any{"name": "ip-burst", "limit": 10, "window": "1m", "scope": "local"},
			map[string]any{"name": "ip-min", "limit": 100, "window": "1m", "scope": "shared"}}
		m["plans"] = map[string]any{"free": map[string]any{"limits": []any{
			map[string]any{"name": "day", "limit": 1000, "window": "24h"}}}}
		m["api_keys"], m["costs"] = map[string]any{}, []any{}
		m["on_store_error"] = "deny"
	})
	shared, mem := &outage{s: memstore.New()}, memstore.New()
	f := newFixture(t, cfg, func(o *Options) { o.Local, o.Store = mem, shared })
	if w := f.do(req{}); w.Code != 200 {
		t.Fatalf("first request: %d, want 200", w.Code)
	}
	shared.fails = 1 // the ip rules' read
	if w := f.do(req{}); w.Code != 503 {
		t.Fatalf("second request: %d, want 503; logs:\n%s", w.Code, f.logs)
	}
	if got := ipCount(t, shared.s, f.clock.t); got != 1 {
		t.Errorf("shared ip rule's count %d, want 1 (the served request)", got)
	}
	if got := minuteCount(t, mem, "ip:192.0.2.1", "ip-burst", f.clock.t); got != 1 {
		t.Errorf("local ip rule's count %d, want 1 (the served request)", got)
	}
}

// gone is a memory store behind a remote store's manners: it sends nothing
// on a context already done. Armed, its read of the plan's rule "day"
// ends the request's context as it answers, as a client that goes away
// does.
type gone struct {
	s      *memstore.Store
	cancel context.CancelFunc
}

func (s *gone) Load(ctx context.Context, id string, slots []kvstore.Slot, counts []int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.cancel != nil && slots[0].Name == "day" {
		defer s.cancel() // after the answer
	}
	return s.s.Load(ctx, id, slots, counts)
}

func (s *gone) Add(ctx context.Context, id string, slots []kvstore.Slot, costs []int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.s.Add(ctx, id, slots, costs)
}

// TestRefundAfterClientLeft: the plan denies a request the ip rules
// admitted, and the client has gone by then: the ip rules' count of it is
// taken back all the same (the refund has a context of its own). On the
// request's context the refund was never sent, and the refused request
// stayed counted.
func TestRefundAfterClientLeft(t *testing.T) {
	cfg := testConfig(t, func(m map[string]any) {
		m["ip_limits"] = []any{map[string]any{"name": "ip-min", "limit": 100, "window": "1m", "scope": "shared"}}
		m["plans"] = map[string]any{"free": map[string]any{"limits": []any{
			map[string]any{"name": "day", "limit": 1, "window": "24h"}}}}
		m["api_keys"], m["costs"] = map[string]any{}, []any{}
	})
	st := &gone{s: memstore.New()}
	f := newFixture(t, cfg, func(o *Options) { o.Store = st })
	if w := f.do(req{}); w.Code != 200 {
		t.Fatalf("first request: %d, want 200", w.Code)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st.cancel = cancel
	hr := httptest.NewRequest("GET", "/api", nil).WithContext(ctx)
	hr.RemoteAddr = "192.0.2.1:51000"
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, hr)
	if w.Code != 429 {
		t.Fatalf("second request: %d, want 429 (the day rule); logs:\n%s", w.Code, f.logs)
	}
	if got := ipCount(t, st.s, f.clock.t); got != 1 {
		t.Errorf("ip rule's count %d, want 1 (the refused request taken back); logs:\n%s", got, f.logs)
	}
}
