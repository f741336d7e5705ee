package workerskv

import (
	"context"
	"testing"

	"github.com/slidegate/slidegate/kvstore"
)

// jsLikeGlobals are the Worker's globals as jsGlobals has them: Update runs
// fn at once, with no lock, so that a call fn makes which runs other code of
// the instance (a log write, in the Worker) runs it inside the update.
type jsLikeGlobals struct{ m memCells }

func (g *jsLikeGlobals) ID() string              { return "iso-a" }
func (g *jsLikeGlobals) Update(fn func(c Cells)) { fn(g.m) }

// duringWarn runs during on each Warn of msg, as the Worker's log line, a
// write to stderr through syumai's fs.write, calls back into Go and lets
// the Go instance's other goroutines run before the write returns.
type duringWarn struct {
	msg    string
	during func()
}

func (l duringWarn) Warn(msg string, _ ...any) {
	if msg == l.msg {
		l.during()
	}
}

// TestDeferredLogDoesNotLoseAnAdd: a flush that stops after three failed
// writes logs "write deferred". In the Worker that log line let the
// instance's other goroutines run while the flush held the counter's cell
// as it had read it, and it then wrote that copy back: an Add of the same
// counter made meanwhile was lost, in the isolate and in KV.
func TestDeferredLogDoesNotLoseAnAdd(t *testing.T) {
	s := newSim(t0)
	kv := newFakeKV(s.Now, 0)
	kv.failPuts = maxPutFailures
	g := &jsLikeGlobals{m: memCells{}}
	sl := minute(t0)
	var st *Store
	add := func() {
		t.Helper()
		if err := st.Add(context.Background(), "id", []kvstore.Slot{sl}, []int64{1}); err != nil {
			t.Fatal(err)
		}
	}
	adds := 0
	log := duringWarn{msg: "workerskv: write deferred to a later request", during: func() {
		if adds == 0 { // the other goroutine: one more request's count
			adds++
			add()
		}
	}}
	var err error
	st, err = New(Options{KV: kv, Globals: g, Later: s.later("iso-a"), Now: s.Now, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	add()
	s.drain(t)
	if adds != 1 {
		t.Fatalf("the flush logged no deferred write (%d adds during a log)", adds)
	}
	key := SlotPrefix("id", sl) + "iso-a"
	if got := g.m[key].N; got != 2 {
		t.Errorf("the isolate counts %d, want 2", got)
	}
	if got := written(kv, "id", sl, "iso-a"); got != 2 {
		t.Errorf("KV holds %d, want 2", got)
	}
}
