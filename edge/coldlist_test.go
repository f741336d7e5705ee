package main

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/slidegate/slidegate/httpapi"
	"github.com/slidegate/slidegate/kvstore/workerskv"
)

// stalledListKV is a KV whose lists answer only when the caller gives up.
type stalledListKV struct{ nopKV }

func (stalledListKV) List(ctx context.Context, _, _ string) (workerskv.Page, error) {
	<-ctx.Done()
	return workerskv.Page{}, ctx.Err()
}

// TestSlowListsFailTheFirstRequests: while KV lists outlast store_timeout,
// a new client's first request in an isolate is a store error, and only
// that one. With shared ip_limits the ip rules' list spends its
// store_timeout, and the plan is asked with no time left (a denial on the
// isolate's counts stands), which leaves the plan's list to the
// background, as after any list that outlasted store_timeout. Without a
// local rule in the plan, the plan was not asked: its own first list
// failed the client's second request too (docs/edge.md said "that one
// request").
func TestSlowListsFailTheFirstRequests(t *testing.T) {
	at := time.Date(2026, 11, 22, 12, 0, 30, 0, time.UTC)
	for _, tc := range []struct {
		name, cfg string
		want      []string // Slidegate-Store of requests 1, 2, 3
	}{
		{"shared ip_limits, shared plan",
			`{"plans": {"free": {"limits": [{"name": "minute", "limit": 60, "window": "1m"}]}},
			  "ip_limits": [{"name": "ip-minute", "limit": 100, "window": "1m"}], "store_timeout": "5ms"}`,
			[]string{httpapi.StoreErrorAllowed, "", ""}},
		{"shared ip_limits, plan with a local rule",
			`{"plans": {"free": {"limits": [{"name": "minute", "limit": 60, "window": "1m"},
			  {"name": "second", "limit": 10, "window": "1s", "scope": "local"}]}},
			  "ip_limits": [{"name": "ip-minute", "limit": 100, "window": "1m"}], "store_timeout": "5ms"}`,
			[]string{httpapi.StoreErrorAllowed, "", ""}},
		{"local ip_limits, shared plan",
			`{"plans": {"free": {"limits": [{"name": "minute", "limit": 60, "window": "1m"}]}},
			  "ip_limits": [{"name": "ip-second", "limit": 100, "window": "1s", "scope": "local"}], "store_timeout": "5ms"}`,
			[]string{httpapi.StoreErrorAllowed, "", ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := stalledDeps(t, at)
			for i, want := range tc.want {
				w := serveOnce(t, tc.cfg, d)
				if got := w.Header().Get(httpapi.StoreHeader); got != want {
					t.Errorf("request %d: %s %q, want %q", i+1, httpapi.StoreHeader, got, want)
				}
			}
		})
	}
}

// stalledDeps are the deps of an isolate whose KV lists answer only when
// the caller gives up, and whose clocks all read at (the local rules'
// too: on the wall clock, their sweep took the shared counts' cells for
// expired).
func stalledDeps(t *testing.T, at time.Time) deps {
	t.Helper()
	g := workerskv.NewMemGlobals("iso")
	st, err := workerskv.New(workerskv.Options{KV: stalledListKV{}, Globals: g,
		Later: func(time.Duration, func(context.Context)) {}, Now: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	return deps{Store: st, Local: workerskv.NewLocal(g, func() time.Time { return at }), Transport: &fakeOrigin{},
		Logger: slog.New(slog.DiscardHandler), Now: func() time.Time { return at }, Clock: workerskv.NewClock(g)}
}

// serveOnce builds the handler of one request, as the Worker does, and
// serves it a GET from 203.0.113.9 in front of an origin.
func serveOnce(t *testing.T, cfg string, d deps) *httptest.ResponseRecorder {
	t.Helper()
	h, err := newHandler(env{Config: text(cfg), Origin: "https://origin.example.com"}, d)
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("GET", "https://w.example.com/x", nil)
	r.Header.Set("CF-Connecting-IP", "203.0.113.9")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// TestNewAddressLeavesKeyDenied: while KV lists outlast store_timeout, a
// client whose key has used its minute in the isolate sends from an
// address new to the isolate. The ip rules' first list fails, and the plan
// still refuses the key on the isolate's count of it: a 429. The plan was
// not asked, and each request from a fresh address (a /64 of an IPv6
// network each) passed, uncounted.
func TestNewAddressLeavesKeyDenied(t *testing.T) {
	at := time.Date(2026, 11, 22, 12, 0, 30, 0, time.UTC)
	const cfg = `{"plans": {"free": {"limits": [{"name": "minute", "limit": 3, "window": "1m"}]}},
		"ip_limits": [{"name": "ip-minute", "limit": 100, "window": "1m"}], "store_timeout": "5ms"}`
	d := stalledDeps(t, at)
	var codes []int
	for _, ip := range []string{"2001:db8:0:1::1", "2001:db8:0:1::1", "2001:db8:0:1::1", "2001:db8:0:1::1", "2001:db8:0:1::1", "2001:db8:0:2::1", "2001:db8:0:3::1"} {
		h, err := newHandler(env{Config: text(cfg), Origin: "https://origin.example.com"}, d)
		if err != nil {
			t.Fatal(err)
		}
		r := httptest.NewRequest("GET", "https://w.example.com/x", nil)
		r.Header.Set("CF-Connecting-IP", ip)
		r.Header.Set("X-API-Key", "used-up")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		codes = append(codes, w.Code)
	}
	// The first request is the store error of the first lists (uncounted);
	// three more fill the minute (fakeOrigin answers 201), and the key is
	// refused from then on, from its first network and the two new ones.
	if want := []int{201, 201, 201, 201, 429, 429, 429}; !slices.Equal(codes, want) {
		t.Errorf("statuses %v, want %v", codes, want)
	}
}
