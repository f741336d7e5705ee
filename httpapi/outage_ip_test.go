package httpapi

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate/config"
	"github.com/slidegate/slidegate/kvstore"
	"github.com/slidegate/slidegate/kvstore/memstore"
	"github.com/slidegate/slidegate/window"
)

// outage is a shared store that fails every call while down, and its
// next fails calls; it is a memory store otherwise.
type outage struct {
	s     *memstore.Store
	down  bool
	fails int
}

func (s *outage) fail() error {
	if s.fails > 0 {
		s.fails--
		return errors.New("outage: down")
	}
	if s.down {
		return errors.New("outage: down")
	}
	return nil
}

func (s *outage) Load(ctx context.Context, id string, slots []kvstore.Slot, counts []int64) error {
	if err := s.fail(); err != nil {
		return err
	}
	return s.s.Load(ctx, id, slots, counts)
}

func (s *outage) Add(ctx context.Context, id string, slots []kvstore.Slot, costs []int64) error {
	if err := s.fail(); err != nil {
		return err
	}
	return s.s.Add(ctx, id, slots, costs)
}

// TestIPLocalRulesInOutage: ip_limits with a rule of each scope, and a
// store that fails for three requests and then answers again. Under
// on_store_error deny the three get their 503, and the local ip rule's
// count of them is taken back, as the plan's local rules' is: the client's
// first request after the outage is admitted. The count stayed, and the
// client met a 429 ("ip-burst", 3 a minute) for requests never served.
// Under allow the three are served and counted by the local ip rule: the
// fourth is its 429.
func TestIPLocalRulesInOutage(t *testing.T) {
	for _, tc := range []struct {
		policy string
		codes  []int
	}{
		{"deny", []int{503, 503, 503, 200}},
		{"allow", []int{200, 200, 200, 429}},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			cfg := testConfig(t, func(m map[string]any) {
				m["ip_limits"] = []any{
					map[string]any{"name": "ip-burst", "limit": 3, "window": "1m", "scope": "local"},
					map[string]any{"name": "ip-min", "limit": 100, "window": "1m", "scope": "shared"}}
				m["plans"] = map[string]any{"free": map[string]any{"limits": []any{
					map[string]any{"name": "day", "limit": 1000, "window": "24h"}}}}
				m["api_keys"], m["costs"] = map[string]any{}, []any{}
				m["on_store_error"] = tc.policy
			})
			store := &outage{s: memstore.New(), down: true}
			f := newFixture(t, cfg, func(o *Options) { o.Local, o.Store = memstore.New(), store })
			var codes []int
			for i := range tc.codes {
				store.down = i < 3
				codes = append(codes, f.do(req{}).Code)
			}
			if !slices.Equal(codes, tc.codes) {
				t.Errorf("statuses %v, want %v; logs:\n%s", codes, tc.codes, f.logs)
			}
		})
	}
}

// TestPlanLocalRulesBehindSharedIPRule: the plan's local flood guard
// ("burst", 2 a minute) holds in an outage under on_store_error allow when
// ip_limits has a shared rule, whose check fails first: the third request
// is its 429, with its item alone in RateLimit. The ip rules' failure let
// every request through, the plan never asked. A local ip rule counts the
// two served requests and not the refused ones.
func TestPlanLocalRulesBehindSharedIPRule(t *testing.T) {
	shared := map[string]any{"name": "ip-min", "limit": 100, "window": "1m", "scope": "shared"}
	local := map[string]any{"name": "ip-burst", "limit": 10, "window": "1m", "scope": "local"}
	for _, tc := range []struct {
		name string
		ip   []any
	}{
		{"shared ip rule", []any{shared}},
		{"mixed ip rules", []any{local, shared}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := memstore.New()
			f := newFixture(t, burstConfig(t, tc.ip, 2), func(o *Options) { o.Local, o.Store = mem, &outage{s: memstore.New(), down: true} })
			var codes []int
			for i := range 4 {
				w := f.do(req{})
				codes = append(codes, w.Code)
				if w.Code != 429 {
					continue
				}
				if got := w.Header().Get("RateLimit"); !strings.HasPrefix(got, `"burst";r=0;t=`) || strings.Contains(got, ",") {
					t.Errorf("request %d: RateLimit %q, want the burst rule's item alone", i+1, got)
				}
				if got := w.Header().Get("Retry-After"); got == "" {
					t.Errorf("request %d: no Retry-After", i+1)
				}
			}
			if want := []int{200, 200, 429, 429}; !slices.Equal(codes, want) {
				t.Errorf("statuses %v, want %v; logs:\n%s", codes, want, f.logs)
			}
			if len(tc.ip) == 2 {
				slot := kvstore.Slot{Name: "ip-burst", Bucket: window.Index(f.clock.t, time.Minute), Length: time.Minute}
				counts := []int64{0}
				if err := mem.Load(context.Background(), "ip:192.0.2.1", []kvstore.Slot{slot}, counts); err != nil {
					t.Fatal(err)
				}
				if counts[0] != 2 {
					t.Errorf("local ip rule's count %d, want 2 (the served requests)", counts[0])
				}
			}
		})
	}
}

// burstConfig is a configuration of ip_limits ip and one plan: a shared
// "day" rule and a local "burst" flood guard of burst a minute, under
// on_store_error allow.
func burstConfig(t *testing.T, ip []any, burst int) *config.Config {
	t.Helper()
	return testConfig(t, func(m map[string]any) {
		m["ip_limits"] = append([]any{}, ip...) // [], not null, without one
		m["plans"] = map[string]any{"free": map[string]any{"limits": []any{
			map[string]any{"name": "day", "limit": 1000, "window": "24h"},
			map[string]any{"name": "burst", "limit": burst, "window": "1m", "scope": "local"}}}}
		m["api_keys"], m["costs"] = map[string]any{}, []any{}
		m["on_store_error"] = "allow"
	})
}

// TestOutageRetryAfterCoversLocalIPRule: under on_store_error allow, a
// plan's local denial ("burst", 2 a minute) behind a failed shared ip rule
// is a 429 whose Retry-After admits the retry. With count_denied the local
// ip rule ("ip-hour", 3 an hour) keeps its count of the refused request, so
// the retry waits for it too: its Retry-After said 71 s, the burst rule's
// alone, and the retry then met ip-hour's 429 for another 73 minutes.
// Without count_denied that count is taken back, and the burst rule's wait
// is the answer.
func TestOutageRetryAfterCoversLocalIPRule(t *testing.T) {
	for _, tc := range []struct {
		countDenied bool
		rule        string // the rule of the 429's first RateLimit item
	}{
		{false, `"burst"`},
		{true, `"ip-hour"`},
	} {
		t.Run(fmt.Sprintf("count_denied=%v", tc.countDenied), func(t *testing.T) {
			cfg := testConfig(t, func(m map[string]any) {
				m["ip_limits"] = []any{
					map[string]any{"name": "ip-hour", "limit": 3, "window": "1h", "scope": "local"},
					map[string]any{"name": "ip-min", "limit": 100, "window": "1m", "scope": "shared"}}
				m["plans"] = map[string]any{"free": map[string]any{"limits": []any{
					map[string]any{"name": "day", "limit": 1000, "window": "24h"},
					map[string]any{"name": "burst", "limit": 2, "window": "1m", "scope": "local"}}}}
				m["api_keys"], m["costs"] = map[string]any{}, []any{}
				m["on_store_error"] = "allow"
				m["count_denied"] = tc.countDenied
			})
			f := newFixture(t, cfg, func(o *Options) { o.Local, o.Store = memstore.New(), &outage{s: memstore.New(), down: true} })
			var codes []int
			for range 2 {
				codes = append(codes, f.do(req{}).Code)
			}
			w := f.do(req{})
			if want := []int{200, 200}; !slices.Equal(codes, want) || w.Code != 429 {
				t.Fatalf("statuses %v then %d, want %v then 429; logs:\n%s", codes, w.Code, want, f.logs)
			}
			if got := w.Header().Get("RateLimit"); !strings.HasPrefix(got, tc.rule+";") {
				t.Errorf("RateLimit %q, want %s first", got, tc.rule)
			}
			retry, err := strconv.Atoi(w.Header().Get("Retry-After"))
			if err != nil {
				t.Fatal(err)
			}
			f.clock.t = f.clock.t.Add(time.Duration(retry) * time.Second)
			if w := f.do(req{}); w.Code != 200 {
				t.Errorf("the retry after Retry-After %d s: %d (RateLimit %q, Retry-After %s), want 200", retry, w.Code, w.Header().Get("RateLimit"), w.Header().Get("Retry-After"))
			}
		})
	}
}
