package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// staleOrigin is an origin that can close its idle connections the way
// an instance frozen between invocations meets them: the client's
// transport has not seen the close when its next request goes out on
// the connection (a frozen instance's reader runs only once it is
// thawed, after the request has been written, and a NAT gateway drops an
// idle flow without telling either end). Such a request is read, then
// the connection is closed without an answer, which is what the
// transport gets from a connection closed under it.
type staleOrigin struct {
	*httptest.Server
	gen   atomic.Int64 // bumped by closeIdle
	conns atomic.Int64 // connections accepted
}

// connGen is the generation of a connection's latest request.
type connGen struct{ gen atomic.Int64 }

type connKey struct{}

func newStaleOrigin(t *testing.T) *staleOrigin {
	o := &staleOrigin{}
	o.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := r.Context().Value(connKey{}).(*connGen)
		if c.gen.Swap(o.gen.Load()) != o.gen.Load() {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		b, _ := io.ReadAll(r.Body)
		_, _ = w.Write(b)
	}))
	o.Config.ConnContext = func(ctx context.Context, _ net.Conn) context.Context {
		c := &connGen{}
		c.gen.Store(o.gen.Load())
		return context.WithValue(ctx, connKey{}, c)
	}
	o.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			o.conns.Add(1)
		}
	}
	o.Start()
	t.Cleanup(o.Close)
	return o
}

// closeIdle closes, as the client will find out, every connection that
// is idle now.
func (o *staleOrigin) closeIdle() { o.gen.Add(1) }

// TestOriginConnectionsAfterFreeze: a POST that comes more than
// originIdle after the instance's previous request to the origin ended
// goes out on a new connection, so that an idle connection the origin
// closed meanwhile (while the instance was frozen) does not turn it into
// the pre-filter's 502: Go's transport does not send a POST again on
// another connection. Requests closer together keep their connection.
func TestOriginConnectionsAfterFreeze(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name  string
		gap   time.Duration
		close bool  // the origin closes its idle connections between the requests
		conns int64 // connections the origin accepted for both
	}{
		{name: "busy", gap: 500 * time.Millisecond, conns: 1},
		{name: "at originIdle", gap: originIdle, conns: 1},
		{name: "frozen 6s", gap: 6 * time.Second, close: true, conns: 2},
		{name: "frozen 1h", gap: time.Hour, close: true, conns: 2},
		{name: "clock went back", gap: -time.Minute, close: true, conns: 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			origin := newStaleOrigin(t)
			u, err := url.Parse(origin.URL)
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			now := t0
			handle := Adapt(originProxy(u, nil, nil, func() time.Time { mu.Lock(); defer mu.Unlock(); return now }))
			for i, body := range []string{"first", "second"} {
				if i == 1 {
					mu.Lock()
					now = now.Add(tt.gap)
					mu.Unlock()
					if tt.close {
						origin.closeIdle()
					}
				}
				ev := event(t, "functionurl-get.json")
				ev.RequestContext.HTTP.Method = http.MethodPost
				ev.Body = body
				res, err := handle(context.Background(), ev)
				if err != nil || res.StatusCode != http.StatusOK || res.Body != body {
					t.Fatalf("POST %d: %d %q, %v; want 200 %q", i+1, res.StatusCode, res.Body, err, body)
				}
			}
			if got := origin.conns.Load(); got != tt.conns {
				t.Errorf("the origin accepted %d connections, want %d", got, tt.conns)
			}
		})
	}
}
