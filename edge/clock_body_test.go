package main

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate/kvstore/workerskv"
)

// gatedBody is a check request's body of unknown length (no
// Content-Length: the Worker does not read it before serving, wantsBody),
// whose first Read waits for release: syumai's reader awaiting the stream
// while the isolate runs other requests.
type gatedBody struct {
	r                io.Reader
	reached, release chan struct{}
	once             bool
}

func (b *gatedBody) Read(p []byte) (int, error) {
	if !b.once {
		b.once = true
		b.reached <- struct{}{}
		<-b.release
	}
	return b.r.Read(p)
}

// TestCheckBodyAwaitSeesKeptTime: the isolate's time is read when the
// request is served (from), but a check request whose body streams awaits
// it after that, inside the handler and before it reads the clock. A
// request decided meanwhile at +2.1 s keeps +2.1 s; the streamed one reads
// +1.9 s. With the stale from, its check was counted in the bucket the
// isolate had moved past, and the third check at +2.1 s was admitted
// though the limit is 2/s (found by an eighth review). Now the clock's
// read passes on the newer kept time, as the local server's long-lived
// limiter holds it.
func TestCheckBodyAwaitSeesKeptTime(t *testing.T) {
	base := time.Date(2026, 11, 22, 12, 0, 30, 0, time.UTC)
	g := workerskv.NewMemGlobals("iso")
	kv := &gateKV{reached: make(chan struct{}, 1), release: make(chan struct{})}
	st, err := workerskv.New(workerskv.Options{KV: kv, Globals: g,
		Later: func(time.Duration, func(context.Context)) {},
		Now:   func() time.Time { return base.Add(2100 * time.Millisecond) }})
	if err != nil {
		t.Fatal(err)
	}
	d0 := deps{Store: st, Local: workerskv.NewLocal(g, nil),
		Logger: slog.New(slog.DiscardHandler), Clock: workerskv.NewClock(g)}
	const cfg = `{"plans": {"free": {"limits": [{"name": "second", "limit": 2, "window": "1s"}]}}}`
	send := func(key string, at time.Time, body io.Reader) string {
		d := d0
		d.Now = func() time.Time { return at }
		h, err := newHandler(env{Config: text(cfg)}, d)
		if err != nil {
			t.Error(err)
			return ""
		}
		if body == nil {
			body = strings.NewReader(`{"key": "` + key + `"}`)
		}
		r := httptest.NewRequest("POST", "https://w.example.com/v1/check", body)
		r.ContentLength = -1
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Body.String()
	}
	allowed := func(s string) bool { return strings.Contains(s, `"allowed":true`) }
	if got := send("other", base.Add(time.Second), nil); !allowed(got) {
		t.Fatalf("other key at +1s: %s", got)
	}
	b := &gatedBody{r: strings.NewReader(`{"key": "K"}`), reached: make(chan struct{}, 1), release: make(chan struct{})}
	first := make(chan string, 1)
	go func() { first <- send("K", base.Add(1900*time.Millisecond), b) }()
	<-b.reached // served (from = +1 s), awaiting its body
	if got := send("K", base.Add(2100*time.Millisecond), nil); !allowed(got) {
		t.Fatalf("+2.1s: %s", got)
	}
	close(b.release)
	if got := <-first; !allowed(got) {
		t.Fatalf("+1.9s after its body: %s", got)
	}
	if got := send("K", base.Add(2100*time.Millisecond), nil); allowed(got) {
		t.Errorf("+2.1s, third check of K (limit 2/s; the +1.9s one was decided after one at +2.1s): %s, want denied", got)
	}
}
