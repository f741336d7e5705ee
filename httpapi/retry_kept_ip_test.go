package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
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

// failsFrom is nthFails failing every call from number fail on.
type failsFrom struct{ *nthFails }

func (s failsFrom) from() error {
	if s.n+1 < s.fail {
		return nil
	}
	s.n++
	return errors.New("failsfrom: timeout")
}

func (s failsFrom) Load(ctx context.Context, id string, slots []kvstore.Slot, counts []int64) error {
	if err := s.from(); err != nil {
		return err
	}
	return s.nthFails.Load(ctx, id, slots, counts)
}

func (s failsFrom) Add(ctx context.Context, id string, slots []kvstore.Slot, costs []int64) error {
	if err := s.from(); err != nil {
		return err
	}
	return s.nthFails.Add(ctx, id, slots, costs)
}

// TestRetryAfterCoversKeptSharedIPCount: a request the plan refuses
// ("minute", 3 a minute) stays counted by a shared ip rule ("ip-hour", 4
// an hour), which it leaves used up: with count_denied, or when the refund
// of its count fails (the store's fourth call). When the store then fails
// the ip rules' second reading (the fifth call), the 429 showed
// "ip-hour";r=0 but Retry-After was the plan's 66 s (51 s without
// count_denied), and the retry met ip-hour's 429 for the rest of the hour.
// The retry is admitted at Retry-After (the hour's end here, where the
// count in the previous bucket leaves room), and refused a millisecond
// before. Mirror of TestRetryAfterCoversKeptLocalIPCount.
func TestRetryAfterCoversKeptSharedIPCount(t *testing.T) {
	for _, tc := range []struct {
		countDenied bool
		from        bool // every call from the fourth fails, not the fifth alone
	}{
		{true, false},
		{false, true},
	} {
		t.Run(fmt.Sprintf("count_denied=%t", tc.countDenied), func(t *testing.T) {
			// run plays three admitted requests, then the fourth with the
			// store failing as tc says, then a retry after its
			// retry_after_ms plus early (the store answering again).
			run := func(early time.Duration) (first, retry *httptest.ResponseRecorder) {
				cfg := testConfig(t, func(m map[string]any) {
					m["ip_limits"] = []any{map[string]any{"name": "ip-hour", "limit": 4, "window": "1h", "scope": "shared"}}
					m["plans"] = map[string]any{"free": map[string]any{"limits": []any{
						map[string]any{"name": "minute", "limit": 3, "window": "1m"}}}}
					m["api_keys"], m["costs"] = map[string]any{}, []any{}
					m["count_denied"] = tc.countDenied
				})
				store := &nthFails{s: memstore.New(), fail: 1 << 30}
				var shared kvstore.Store = store
				if tc.from {
					shared = failsFrom{store}
				}
				f := newFixture(t, cfg, func(o *Options) { o.Local, o.Store = memstore.New(), shared })
				for i := range 3 {
					if w := f.do(req{}); w.Code != http.StatusOK {
						t.Fatalf("request %d: %d %s", i+1, w.Code, w.Body)
					}
				}
				store.n, store.fail = 0, 5
				if tc.from {
					store.fail = 4
				}
				first = f.do(req{})
				if first.Code != http.StatusTooManyRequests || store.n < 5 {
					t.Fatalf("request 4: %d after %d store calls, want 429 after 5: %s", first.Code, store.n, first.Body)
				}
				store.fail = 1 << 30
				var body tooMany
				if err := json.Unmarshal(first.Body.Bytes(), &body); err != nil {
					t.Fatal(err)
				}
				f.clock.t = f.clock.t.Add(time.Duration(body.RetryAfterMS)*time.Millisecond + early)
				return first, f.do(req{})
			}
			first, retry := run(0)
			if retry.Code != http.StatusOK {
				t.Errorf("the retry at retry_after_ms: %d (RateLimit %q, Retry-After %s), want 200; the 429 had RateLimit %q, Retry-After %s",
					retry.Code, retry.Header().Get("RateLimit"), retry.Header().Get("Retry-After"), first.Header().Get("RateLimit"), first.Header().Get("Retry-After"))
			}
			if _, retry := run(-time.Millisecond); retry.Code != http.StatusTooManyRequests {
				t.Errorf("the retry 1 ms before retry_after_ms: %d, want 429", retry.Code)
			}
			if got, want := first.Header().Get("Retry-After"), "3591"; got != want {
				t.Errorf("Retry-After %s, want %s (ip-hour's next hour)", got, want)
			}
		})
	}
}
