package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slidegate/slidegate/kvstore/workerskv"
)

// countedKV is a Workers KV namespace in memory that counts its puts and
// lists, and the puts of a key less than a second apart, which KV refuses.
type countedKV struct {
	mu          sync.Mutex
	now         func() time.Time
	n           map[string]int64
	last        map[string]time.Time
	puts, lists int
	tooSoon     int
}

func (k *countedKV) Put(_ context.Context, key, _ string, n int64, _ time.Duration) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.puts++
	if at, ok := k.last[key]; ok && k.now().Sub(at) < time.Second {
		k.tooSoon++
	}
	k.n[key], k.last[key] = n, k.now()
	return nil
}

func (k *countedKV) List(_ context.Context, prefix, _ string) (workerskv.Page, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.lists++
	var p workerskv.Page
	for key, n := range k.n {
		if strings.HasPrefix(key, prefix) {
			p.Keys = append(p.Keys, workerskv.Key{Name: key, N: n})
		}
	}
	slices.SortFunc(p.Keys, func(a, b workerskv.Key) int { return strings.Compare(a.Name, b.Name) })
	p.Done = true
	return p, nil
}

// virtualIsolate serves requests as one isolate does: a handler and a
// store per request on the isolate's globals, and the background work
// (waitUntil) run on a virtual clock between requests.
type virtualIsolate struct {
	t     *testing.T
	cfg   string
	now   time.Time
	tasks []virtualTask
	kv    *countedKV
	g     *workerskv.MemGlobals
}

type virtualTask struct {
	at   time.Time
	task func(context.Context)
}

func newVirtualIsolate(t *testing.T, cfg string, at time.Time) *virtualIsolate {
	v := &virtualIsolate{t: t, cfg: cfg, now: at, g: workerskv.NewMemGlobals("iso")}
	v.kv = &countedKV{now: v.clock, n: map[string]int64{}, last: map[string]time.Time{}}
	return v
}

func (v *virtualIsolate) clock() time.Time { return v.now }

func (v *virtualIsolate) later(d time.Duration, task func(context.Context)) {
	v.tasks = append(v.tasks, virtualTask{v.now.Add(d), task})
}

// run runs the background work due up to to, in time order.
func (v *virtualIsolate) run(to time.Time) {
	for {
		i := slices.IndexFunc(v.tasks, func(t virtualTask) bool { return !t.at.After(to) })
		if i < 0 {
			v.now = to
			return
		}
		for j, t := range v.tasks {
			if t.at.Before(v.tasks[i].at) {
				i = j
			}
		}
		t := v.tasks[i]
		v.tasks = slices.Delete(v.tasks, i, i+1)
		if t.at.After(v.now) {
			v.now = t.at
		}
		t.task(context.Background())
	}
}

// serve answers one GET with key (none when empty) from addr, then runs
// the background work due in the gap before the next request.
func (v *virtualIsolate) serve(key, addr string, gap time.Duration) int {
	st, err := workerskv.New(workerskv.Options{KV: v.kv, Globals: v.g, Later: v.later, Now: v.clock})
	if err != nil {
		v.t.Fatal(err)
	}
	d := deps{Store: st, Local: workerskv.NewLocal(v.g, v.clock), Transport: &fakeOrigin{},
		Logger: slog.New(slog.DiscardHandler), Now: v.clock, Clock: workerskv.NewClock(v.g)}
	h, err := newHandler(env{Config: text(v.cfg), Origin: "https://origin.example.com"}, d)
	if err != nil {
		v.t.Fatal(err)
	}
	r := httptest.NewRequest("GET", "https://w.example.com/x", nil)
	r.Header.Set("CF-Connecting-IP", addr)
	if key != "" {
		r.Header.Set("X-API-Key", key)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	v.run(v.now.Add(gap))
	return w.Code
}

// TestKVOperationsPerRequest counts the Workers KV operations of request
// shapes, for docs/edge.md's "Cost per million requests", with two shared
// rules (minute and day): a busy client's steady state costs at most the
// table's 0.10 writes and 0.06 lists per request; a used-up key flooding
// costs no write; a made-up key per request, a new client every time,
// costs one write per rule and one list per rule and bucket (2 and 4); a
// local ip_limits rule's refusals cost nothing. No key is written twice
// within a second, which KV refuses.
func TestKVOperationsPerRequest(t *testing.T) {
	const cfg = `{"plans": {"free": {"limits": [{"name": "minute", "limit": 5, "window": "1m"}, {"name": "day", "limit": 1000, "window": "24h"}]},
		"pro": {"limits": [{"name": "minute", "limit": 100000, "window": "1m"}, {"name": "day", "limit": 10000000, "window": "24h"}]}},
		"api_keys": {"c9bc072f4fa8189466c2a8f2c36a56a4ef1e60a2ffa4986ba2f155cd176c128b": "pro"},
		"ip_limits": [{"name": "ip-second", "limit": 50, "window": "1s", "scope": "local"}]}` // the pro key is "busy"
	at := time.Date(2026, 11, 22, 12, 0, 30, 0, time.UTC)
	shape := func(t *testing.T, n int, gap time.Duration, want int, req func(i int) (key, addr string)) (puts, lists int) {
		t.Helper()
		v := newVirtualIsolate(t, cfg, at)
		for i := range n {
			key, addr := req(i)
			if code := v.serve(key, addr, gap); code != want {
				t.Fatalf("request %d: %d, want %d", i+1, code, want)
			}
		}
		v.run(v.now.Add(5 * time.Second)) // the trailing writes
		if v.kv.tooSoon != 0 {
			t.Errorf("%d writes of a key came within a second of the last", v.kv.tooSoon)
		}
		t.Logf("%d requests %s apart: %d writes, %d lists", n, gap, v.kv.puts, v.kv.lists)
		return v.kv.puts, v.kv.lists
	}
	t.Run("busy client", func(t *testing.T) {
		puts, lists := shape(t, 1200, 50*time.Millisecond, 201, func(int) (string, string) { return "busy", "192.0.2.1" })
		if puts > 120 || lists > 72 {
			t.Errorf("%d writes and %d lists for 1,200 requests, want at most 0.10 and 0.06 a request", puts, lists)
		}
	})
	t.Run("used-up key flooding", func(t *testing.T) {
		v := newVirtualIsolate(t, cfg, at)
		for range 5 {
			v.serve("used-up", "192.0.2.1", 100*time.Millisecond)
		}
		v.run(v.now.Add(5 * time.Second))
		puts := v.kv.puts
		for i := range 200 {
			if code := v.serve("used-up", "192.0.2.1", 10*time.Millisecond); code != 429 {
				t.Fatalf("request %d: %d, want 429", i+6, code)
			}
		}
		v.run(v.now.Add(5 * time.Second))
		if got := v.kv.puts - puts; got != 0 {
			t.Errorf("200 requests of a used-up key: %d writes, want 0", got)
		}
	})
	t.Run("made-up key each request", func(t *testing.T) {
		puts, lists := shape(t, 40, 25*time.Millisecond, 201, func(i int) (string, string) { return fmt.Sprintf("made-up-%d", i), "192.0.2.1" })
		if puts != 2*40 || lists != 4*40 {
			t.Errorf("%d writes and %d lists for 40 made-up keys, want 80 and 160", puts, lists)
		}
	})
	t.Run("refused by a local ip rule", func(t *testing.T) {
		v := newVirtualIsolate(t, cfg, at)
		for i := range 50 {
			v.serve(fmt.Sprintf("made-up-%d", i), "192.0.2.1", 0)
		}
		puts, lists := v.kv.puts, v.kv.lists
		for i := range 50 {
			if code := v.serve(fmt.Sprintf("other-%d", i), "192.0.2.1", 0); code != 429 {
				t.Fatalf("request %d: %d, want 429 from ip-second", i+51, code)
			}
		}
		if p, l := v.kv.puts-puts, v.kv.lists-lists; p != 0 || l != 0 {
			t.Errorf("50 requests refused by ip-second: %d writes and %d lists, want none", p, l)
		}
	})
}
