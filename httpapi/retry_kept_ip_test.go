package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/slidegate/slidegate/kvstore"
	"github.com/slidegate/slidegate/kvstore/memstore"
)

// nthFails is a shared store (loads and adds only, as Workers KV) whose
// call number fail, counted from the last reset, fails: a store_timeout
// budget spent by the calls before it.
type nthFails struct {
	s    *memstore.Store
	n    int
	fail int
}

func (s *nthFails) call() error {
	s.n++
	if s.n == s.fail {
		return errors.New("nthfails: timeout")
	}
	return nil
}

func (s *nthFails) Load(ctx context.Context, id string, slots []kvstore.Slot, counts []int64) error {
	if err := s.call(); err != nil {
		return err
	}
	return s.s.Load(ctx, id, slots, counts)
}

func (s *nthFails) Add(ctx context.Context, id string, slots []kvstore.Slot, costs []int64) error {
	if err := s.call(); err != nil {
		return err
	}
	return s.s.Add(ctx, id, slots, costs)
}

// TestRetryAfterCoversKeptLocalIPCount: with count_denied, a request the
// plan refuses ("minute", 3 a minute, shared) stays counted by the local
// ip rule ("ip-hour", 4 an hour), which is then at its limit; when the
// store fails the ip rules' second reading (the fifth store call: the ip
// rule's load and add, the plan's load and count, then the ip rules'
// peek), the ip rules' local rule, in memory, still decides the retry.
// Retry-After was the plan's minute alone, and the retry met ip-hour's
// 429 for most of an hour.
func TestRetryAfterCoversKeptLocalIPCount(t *testing.T) {
	cfg := testConfig(t, func(m map[string]any) {
		m["ip_limits"] = []any{
			map[string]any{"name": "ip-hour", "limit": 4, "window": "1h", "scope": "local"},
			map[string]any{"name": "ip-min", "limit": 100, "window": "1m", "scope": "shared"}}
		m["plans"] = map[string]any{"free": map[string]any{"limits": []any{
			map[string]any{"name": "minute", "limit": 3, "window": "1m"}}}}
		m["api_keys"], m["costs"] = map[string]any{}, []any{}
		m["count_denied"] = true
	})
	store := &nthFails{s: memstore.New()}
	f := newFixture(t, cfg, func(o *Options) { o.Local, o.Store = memstore.New(), store })
	for i := range 3 {
		if w := f.do(req{}); w.Code != http.StatusOK {
			t.Fatalf("request %d: %d %s", i+1, w.Code, w.Body)
		}
	}
	store.n, store.fail = 0, 5
	w := f.do(req{})
	if w.Code != http.StatusTooManyRequests || store.n < 5 {
		t.Fatalf("request 4: %d after %d store calls, want 429 after 5: %s", w.Code, store.n, w.Body)
	}
	store.fail = 0
	retry, err := strconv.Atoi(w.Header().Get("Retry-After"))
	if err != nil {
		t.Fatal(err)
	}
	f.clock.t = f.clock.t.Add(time.Duration(retry) * time.Second)
	if w := f.do(req{}); w.Code != http.StatusOK {
		t.Errorf("the retry at Retry-After (%d s): %d (RateLimit %q, Retry-After %s), want 200", retry, w.Code, w.Header().Get("RateLimit"), w.Header().Get("Retry-After"))
	}
}
