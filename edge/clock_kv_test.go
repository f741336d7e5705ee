package main

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/slidegate/slidegate/kvstore/workerskv"
)

// gateKV is an empty KV whose next List, once armed, waits for release: a
// Workers KV list the request awaits while the isolate runs others.
type gateKV struct {
	mu      sync.Mutex
	armed   bool
	reached chan struct{}
	release chan struct{}
}

func (*gateKV) Put(context.Context, string, string, int64, time.Duration) error { return nil }

func (k *gateKV) List(context.Context, string, string) (workerskv.Page, error) {
	k.mu.Lock()
	wait := k.armed
	k.armed = false
	k.mu.Unlock()
	if wait {
		k.reached <- struct{}{}
		<-k.release
	}
	return workerskv.Page{Done: true}, nil
}

// TestClockKeptBeforeStoreAwait: a decision on Workers KV may await a
// list of a cold slot. A request's time was kept only once it was decided,
// so another request of the isolate meanwhile read the older kept time,
// and a clock stepped back by 0.2 s was not held: it was counted in the
// bucket the first request had moved past (found by a seventh review). A
// long-lived limiter (the local server's) decides it at +2.1 s, and the
// request after it is refused; so does the Worker now, which keeps a
// request's time as soon as it reads the clock.
func TestClockKeptBeforeStoreAwait(t *testing.T) {
	base := time.Date(2026, 11, 22, 12, 0, 30, 0, time.UTC)
	g := workerskv.NewMemGlobals("iso")
	kv := &gateKV{reached: make(chan struct{}, 1), release: make(chan struct{})}
	st, err := workerskv.New(workerskv.Options{KV: kv, Globals: g,
		Later:        func(time.Duration, func(context.Context)) {},
		Now:          func() time.Time { return base.Add(2100 * time.Millisecond) },
		ListInterval: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	o := &heldOrigin{reached: make(chan struct{}, 16), release: make(chan struct{})}
	close(o.release)
	d0 := deps{Store: st, Local: workerskv.NewLocal(g, nil), Transport: o,
		Logger: slog.New(slog.DiscardHandler), Clock: workerskv.NewClock(g)}
	send := func(ip string, at time.Time) int {
		const cfg = `{"plans": {"free": {"limits": [{"name": "second", "limit": 2, "window": "1s"}]}}}`
		d := d0
		d.Now = func() time.Time { return at }
		h, err := newHandler(env{Config: text(cfg), Origin: "https://origin.example.com"}, d)
		if err != nil {
			t.Error(err)
			return 0
		}
		r := httptest.NewRequest("GET", "https://w.example.com/x", nil)
		r.Header.Set("CF-Connecting-IP", ip)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	const x = "203.0.113.9"
	if code := send("203.0.113.10", base.Add(time.Second)); code != http.StatusCreated {
		t.Fatalf("other client at +1s: %d", code)
	}
	kv.mu.Lock()
	kv.armed = true
	kv.mu.Unlock()
	first := make(chan int, 1)
	go func() { first <- send(x, base.Add(2100*time.Millisecond)) }()
	<-kv.reached // decided at +2.1 s, awaiting the list of its previous bucket
	if code := send(x, base.Add(1900*time.Millisecond)); code != http.StatusCreated {
		t.Fatalf("+1.9s: %d, want 201", code)
	}
	close(kv.release)
	if code := <-first; code != http.StatusCreated {
		t.Fatalf("+2.1s: %d, want 201", code)
	}
	if code := send(x, base.Add(2100*time.Millisecond)); code != http.StatusTooManyRequests {
		t.Errorf("+2.1s, third request of the client (limit 2/s; the +1.9s one came after a decision at +2.1s): %d, want 429", code)
	}
}

// TestWaitAcrossBoundary: a client's first request to an isolate, 50 ms
// before a second's boundary, awaits the list of a cold slot; meanwhile
// two more of the client's requests, 50 ms after it, are decided at once
// and admitted in the new second. The first was then admitted in the
// second they had left: 3 in one second under a limit of 2. Its limiter
// now reads the isolate's newest time once its store has answered, and
// checks it again at that time, as a long-lived limiter (the local
// server's) does. TestWorkerdWaitAcrossBoundary is the same in workerd.
func TestWaitAcrossBoundary(t *testing.T) {
	boundary := time.Date(2026, 11, 22, 12, 0, 31, 0, time.UTC)
	var mu sync.Mutex
	now := boundary.Add(-50 * time.Millisecond)
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}
	g := workerskv.NewMemGlobals("iso")
	kv := &gateKV{armed: true, reached: make(chan struct{}, 1), release: make(chan struct{})}
	st, err := workerskv.New(workerskv.Options{KV: kv, Globals: g,
		Later: func(time.Duration, func(context.Context)) {}, Now: clock, ListInterval: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	o := &heldOrigin{reached: make(chan struct{}, 16), release: make(chan struct{})}
	close(o.release)
	d := deps{Store: st, Local: workerskv.NewLocal(g, nil), Transport: o,
		Logger: slog.New(slog.DiscardHandler), Clock: workerskv.NewClock(g), Now: clock}
	send := func() int {
		const cfg = `{"plans": {"free": {"limits": [{"name": "second", "limit": 2, "window": "1s"}]}}}`
		h, err := newHandler(env{Config: text(cfg), Origin: "https://origin.example.com"}, d)
		if err != nil {
			t.Error(err)
			return 0
		}
		r := httptest.NewRequest("GET", "https://w.example.com/x", nil)
		r.Header.Set("CF-Connecting-IP", "203.0.113.9")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	first := make(chan int, 1)
	go func() { first <- send() }()
	<-kv.reached // the first request awaits the list of its previous second
	mu.Lock()
	now = boundary.Add(50 * time.Millisecond)
	mu.Unlock()
	for i := range 2 {
		if code := send(); code != http.StatusCreated {
			t.Fatalf("request %d, 50 ms past the boundary: %d, want the origin's 201", i+2, code)
		}
	}
	close(kv.release)
	if code := <-first; code != http.StatusTooManyRequests {
		t.Errorf("the first request, 50 ms before the boundary, decided after two past it (limit 2 a second): %d, want 429", code)
	}
}
