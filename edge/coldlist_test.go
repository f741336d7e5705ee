package main

import (
	"context"
	"log/slog"
	"net/http/httptest"
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
// a new client's first request in an isolate is a store error, and with
// shared ip_limits its second one too: the ip rules' list spends the first
// one's store_timeout, the plan's shared rules are not listed on it (with
// local rules in the plan, they are asked with no time left), and the
// plan's own first list fails the second (docs/edge.md said "that one
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
			[]string{httpapi.StoreErrorAllowed, httpapi.StoreErrorAllowed, ""}},
		{"shared ip_limits, plan with a local rule",
			`{"plans": {"free": {"limits": [{"name": "minute", "limit": 60, "window": "1m"},
			  {"name": "second", "limit": 10, "window": "1s", "scope": "local"}]}},
			  "ip_limits": [{"name": "ip-minute", "limit": 100, "window": "1m"}], "store_timeout": "5ms"}`,
			[]string{httpapi.StoreErrorAllowed, httpapi.StoreErrorAllowed, ""}},
		{"local ip_limits, shared plan",
			`{"plans": {"free": {"limits": [{"name": "minute", "limit": 60, "window": "1m"}]}},
			  "ip_limits": [{"name": "ip-second", "limit": 100, "window": "1s", "scope": "local"}], "store_timeout": "5ms"}`,
			[]string{httpapi.StoreErrorAllowed, "", ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := workerskv.NewMemGlobals("iso")
			st, err := workerskv.New(workerskv.Options{KV: stalledListKV{}, Globals: g,
				Later: func(time.Duration, func(context.Context)) {}, Now: func() time.Time { return at }})
			if err != nil {
				t.Fatal(err)
			}
			d := deps{Store: st, Local: workerskv.NewLocal(g, nil), Transport: &fakeOrigin{},
				Logger: slog.New(slog.DiscardHandler), Now: func() time.Time { return at }, Clock: workerskv.NewClock(g)}
			for i, want := range tc.want {
				w := serveOnce(t, tc.cfg, d)
				if got := w.Header().Get(httpapi.StoreHeader); got != want {
					t.Errorf("request %d: %s %q, want %q", i+1, httpapi.StoreHeader, got, want)
				}
			}
		})
	}
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
