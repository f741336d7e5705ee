package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate/config"
	"github.com/slidegate/slidegate/kvstore"
	"github.com/slidegate/slidegate/kvstore/memstore"
	"github.com/slidegate/slidegate/window"
)

// refundConfig: ip_limits 2 a minute per IP (scope as given), the free
// plan 1 a second, so that the plan denies while the ip rule admits.
func refundConfig(t *testing.T, scope string, edit func(m map[string]any)) *config.Config {
	return testConfig(t, func(m map[string]any) {
		m["plans"] = map[string]any{"free": map[string]any{"limits": []any{
			map[string]any{"name": "sec", "limit": 1, "window": "1s"}}}}
		m["api_keys"], m["costs"] = map[string]any{}, []any{}
		m["ip_limits"] = []any{map[string]any{"name": "ip-min", "limit": 2, "window": "1m", "scope": scope}}
		if edit != nil {
			edit(m)
		}
	})
}

// ipCount is the ip rule's count in the current minute.
func ipCount(t *testing.T, s kvstore.Store, at time.Time) int64 {
	t.Helper()
	return minuteCount(t, s, "ip:192.0.2.1", "ip-min", at)
}

// minuteCount is the count in s of id's rule name, a minute long, in the
// current minute.
func minuteCount(t *testing.T, s kvstore.Store, id, name string, at time.Time) int64 {
	t.Helper()
	counts := make([]int64, 1)
	slot := kvstore.Slot{Name: name, Bucket: window.Index(at, time.Minute), Length: time.Minute}
	if err := s.Load(context.Background(), id, []kvstore.Slot{slot}, counts); err != nil {
		t.Fatal(err)
	}
	return counts[0]
}

// TestRefusedRequestCountsNowhere: a request the plan denies after the ip
// rules admitted it is taken back from the ip rules, so the client that
// waits Retry-After is admitted by both; the headers show the ip rule
// without it. count_denied keeps the count; shadow mode counts as if it
// blocked.
func TestRefusedRequestCountsNowhere(t *testing.T) {
	for _, tc := range []struct {
		name        string
		countDenied bool
		shadow      bool
		code        int    // of the plan-denied request
		rateLimit   string // its RateLimit header
		ipAfter     int64  // the ip rule's count after it
		retryAdmits bool   // a request at now+Retry-After is admitted
	}{
		{"refunded", false, false, 429, `"ip-min";r=1;t=50, "sec";r=0;t=1`, 1, true},
		{"shadow counts as if it blocked", false, true, 200, `"ip-min";r=1;t=50, "sec";r=0;t=1`, 1, true},
		// The ip rule keeps the count and decides the retry on it: it
		// would deny now, so Retry-After waits for it (50 s, its t), not
		// only for the plan (2 s).
		{"count_denied keeps it", true, false, 429, `"ip-min";r=0;t=50, "sec";r=0;t=2`, 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			local := memstore.New()
			cfg := refundConfig(t, "local", func(m map[string]any) {
				m["count_denied"], m["shadow"] = tc.countDenied, tc.shadow
			})
			f := newFixture(t, cfg, func(o *Options) { o.Local = local })
			if w := f.do(req{}); w.Code != 200 {
				t.Fatalf("first request: %d", w.Code)
			}
			f.clock.t = f.clock.t.Add(100 * time.Millisecond)
			w := f.do(req{})
			if w.Code != tc.code {
				t.Fatalf("second request in the second: %d, want %d", w.Code, tc.code)
			}
			wantHeader(t, w, "RateLimit", tc.rateLimit)
			if got := ipCount(t, local, f.clock.t); got != tc.ipAfter {
				t.Errorf("ip rule count %d, want %d", got, tc.ipAfter)
			}
			if tc.shadow {
				return // no Retry-After to follow
			}
			ra, err := strconv.Atoi(w.Header().Get("Retry-After"))
			if err != nil {
				t.Fatalf("Retry-After %q: %v", w.Header().Get("Retry-After"), err)
			}
			f.clock.t = f.clock.t.Add(time.Duration(ra) * time.Second)
			if w := f.do(req{}); (w.Code == 200) != tc.retryAdmits {
				t.Errorf("at now+Retry-After (%d s): %d, want admitted %t (RateLimit %s)", ra, w.Code, tc.retryAdmits, w.Header().Get("RateLimit"))
			}
		})
	}
}

// TestStoreErrorRefund: when the plan's store fails, on_store_error deny
// refuses the request and takes back the ip rules' count; allow serves it
// and keeps the count.
func TestStoreErrorRefund(t *testing.T) {
	for _, policy := range []string{"deny", "allow"} {
		local := memstore.New()
		cfg := refundConfig(t, "local", func(m map[string]any) { m["on_store_error"] = policy })
		f := newFixture(t, cfg, func(o *Options) { o.Local, o.Store = local, &failStore{} })
		for range 2 {
			f.do(req{})
		}
		want := int64(0)
		if policy == "allow" {
			want = 2
		}
		if got := ipCount(t, local, f.clock.t); got != want {
			t.Errorf("%s: ip rule count %d after two requests the store failed, want %d", policy, got, want)
		}
	}
}

// noRefund is a memory store whose taking back (a negative Add) fails.
type noRefund struct{ *memstore.Store }

func (s noRefund) Add(ctx context.Context, id string, slots []kvstore.Slot, costs []int64) error {
	for _, c := range costs {
		if c < 0 {
			return errors.New("noRefund: cannot take back for " + id)
		}
	}
	return s.Store.Add(ctx, id, slots, costs)
}

// TestRefundErrorLogged: a refund the shared store refuses leaves the
// count (too high, never too low), is logged as a store error, and does
// not change the answer.
func TestRefundErrorLogged(t *testing.T) {
	shared := memstore.New()
	f := newFixture(t, refundConfig(t, "shared", nil), func(o *Options) { o.Store = noRefund{shared} })
	f.do(req{})
	f.clock.t = f.clock.t.Add(100 * time.Millisecond)
	if w := f.do(req{}); w.Code != 429 {
		t.Fatalf("plan-denied request: %d, want 429", w.Code)
	}
	if got := ipCount(t, shared, f.clock.t); got != 2 {
		t.Errorf("ip rule count %d after a failed refund, want 2 (kept)", got)
	}
	logs := f.logs.String()
	if !strings.Contains(logs, `"msg":"store error"`) || !strings.Contains(logs, "kept the ip_limits count") {
		t.Errorf("no store error line for the refund: %s", logs)
	}
}

// TestRefundAfterClockStepsBack: after the clock went back, the ip rule's
// item, decided again after the refund, counts from the request's now as
// the plan's does.
func TestRefundAfterClockStepsBack(t *testing.T) {
	resetOf := func(back time.Duration) (ip, plan string) {
		f := newFixture(t, refundConfig(t, "local", nil), nil)
		if w := f.do(req{}); w.Code != 200 {
			t.Fatalf("first: %d", w.Code)
		}
		f.clock.t = f.clock.t.Add(-back)
		w := f.do(req{})
		if w.Code != 429 {
			t.Fatalf("second: %d", w.Code)
		}
		items := strings.Split(w.Header().Get("RateLimit"), ", ")
		if len(items) != 2 {
			t.Fatalf("RateLimit %q", w.Header().Get("RateLimit"))
		}
		return items[0], items[1]
	}
	ip0, plan0 := resetOf(0)
	ip20, plan20 := resetOf(20 * time.Second)
	secs := func(item string) int {
		n, err := strconv.Atoi(item[strings.LastIndex(item, "=")+1:])
		if err != nil {
			t.Fatalf("item %q: %v", item, err)
		}
		return n
	}
	if secs(ip20)-secs(ip0) != 20 || secs(plan20)-secs(plan0) != 20 {
		t.Errorf("20 s back: %s, %s; without the step %s, %s; want both resets 20 s later", ip20, plan20, ip0, plan0)
	}
}

// TestRetryAfterWaitsForAKeptIPCount: when taking back the ip rules' count
// of a request the plan refused fails, the count stays, and Retry-After
// waits until the ip rules admit the retry on it: it said the plan's 1 s,
// and the retry then met the ip rule's 429 (ip-min full until some 80 s).
func TestRetryAfterWaitsForAKeptIPCount(t *testing.T) {
	cfg := refundConfig(t, "shared", nil)
	send := func(steps []time.Duration) *httptest.ResponseRecorder {
		f := newFixture(t, cfg, func(o *Options) { o.Store = noRefund{memstore.New()} })
		var w *httptest.ResponseRecorder
		for _, d := range steps {
			f.clock.t = t0.Add(10*time.Second + d)
			w = f.do(req{})
		}
		return w
	}
	const denied = 100 * time.Millisecond
	w := send([]time.Duration{0, denied})
	if w.Code != http.StatusTooManyRequests {
		t.Fatalf("plan-denied request: %d, want 429", w.Code)
	}
	ra, err := strconv.Atoi(w.Header().Get("Retry-After"))
	if err != nil {
		t.Fatalf("Retry-After %q: %v", w.Header().Get("Retry-After"), err)
	}
	var body tooMany
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	if got, want := body.RetryAfterMS, int64(ra)*1000; got > want || got <= want-1000 {
		t.Errorf("retry_after_ms %d, Retry-After %d s", got, ra)
	}
	wantHeader(t, w, "X-RateLimit-Limit", "2") // ip-min decides: it waits longest
	for _, tc := range []struct {
		after time.Duration
		code  int
	}{
		{time.Duration(ra-1) * time.Second, http.StatusTooManyRequests},
		{time.Duration(ra) * time.Second, http.StatusOK},
	} {
		if got := send([]time.Duration{0, denied, denied + tc.after}); got.Code != tc.code {
			t.Errorf("Retry-After %d s (RateLimit %s); at +%v: %d, want %d (RateLimit %s)",
				ra, w.Header().Get("RateLimit"), tc.after, got.Code, tc.code, got.Header().Get("RateLimit"))
		}
	}
}

// loadFailsAfterRefund is a memory store whose reads fail once a count was
// taken back: the refund went through, the read after it did not.
type loadFailsAfterRefund struct {
	kvstore.Conditional
	refunded bool
}

func (s *loadFailsAfterRefund) Add(ctx context.Context, id string, slots []kvstore.Slot, costs []int64) error {
	s.refunded = s.refunded || len(costs) > 0 && costs[0] < 0
	return s.Conditional.Add(ctx, id, slots, costs)
}

func (s *loadFailsAfterRefund) Load(ctx context.Context, id string, slots []kvstore.Slot, counts []int64) error {
	if s.refunded {
		return errors.New("loadfails: boom")
	}
	return s.Conditional.Load(ctx, id, slots, counts)
}

// TestStoreErrorsBesideADenial: a store error that leaves a 429 standing
// is logged as a store error, saying what the answer did without it. The
// plan's read failing for a request the ip rules denied was logged
// nowhere, and the ip rules' read failing after their count was taken
// back was logged as keeping that count.
func TestStoreErrorsBesideADenial(t *testing.T) {
	tests := []struct {
		name   string
		cfg    *config.Config
		store  kvstore.Store
		action string
	}{
		{"the plan unreadable on an ip denial",
			refundConfig(t, "local", func(m map[string]any) {
				m["ip_limits"] = []any{map[string]any{"name": "ip-min", "limit": 1, "window": "1m", "scope": "local"}}
			}),
			&failStore{}, "ip_limits decided alone, without the plan's wait"},
		{"the ip rules unreadable after their refund",
			refundConfig(t, "shared", nil),
			&loadFailsAfterRefund{Conditional: memstore.New()}, "ip_limits items as they admitted the request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.cfg, func(o *Options) { o.Store = tt.store })
			f.do(req{})
			f.logs.Reset()
			f.clock.t = f.clock.t.Add(100 * time.Millisecond)
			if w := f.do(req{}); w.Code != http.StatusTooManyRequests {
				t.Fatalf("second request: %d, want 429", w.Code)
			}
			var actions []string
			for _, l := range strings.Split(strings.TrimSpace(f.logs.String()), "\n") {
				var line struct{ Msg, Level, Action string }
				if err := json.Unmarshal([]byte(l), &line); err != nil {
					t.Fatalf("log line %q: %v", l, err)
				}
				if line.Msg == "store error" && line.Level == "WARN" {
					actions = append(actions, line.Action)
				}
			}
			if len(actions) != 1 || actions[0] != tt.action {
				t.Errorf("store error actions %q, want [%q]: %s", actions, tt.action, f.logs)
			}
		})
	}
}
