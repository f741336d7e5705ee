package workerskv

import (
	"context"
	"strconv"
	"testing"

	"github.com/slidegate/slidegate/kvstore"
)

// TestEvictionLogDoesNotLoseAnAdd: an isolate over maxCells evicts, and logs
// each counter whose counts are not yet in KV. In the Worker that log line
// (a write to stderr) lets the Go instance's other goroutines run, and one
// of them counted meanwhile: on the counter being logged, which the eviction
// then deleted with the new count that its line did not name, and on a
// written counter the eviction had just deleted, made again before the
// eviction marked it (evictKey) and so writing over the KV key that held
// the evicted one's counts.
func TestEvictionLogDoesNotLoseAnAdd(t *testing.T) {
	s := newSim(t0)
	kv := newFakeKV(s.Now, 0)
	g := &jsLikeGlobals{m: memCells{}}
	sl := minute(t0)
	ms, exp := t0.UnixMilli(), sl.Expires().UnixMilli()
	ids := map[string]string{} // a counter's cell key, its identity
	for i := range maxCells {
		id := "c-" + strconv.Itoa(i)
		key := SlotPrefix(id, sl) + "iso-a"
		ids[key] = id
		g.m[key] = Cell{N: 1, Expires: exp} // not yet written
	}
	// A counter written 5 s ago, the first evicted: it counts least.
	wkey := SlotPrefix("w", sl) + "iso-a"
	g.m[wkey] = Cell{N: 3, Flushed: 3, At: ms - 5000, Expires: exp}
	if err := kv.Put(context.Background(), wkey, "", 3, MinTTL); err != nil {
		t.Fatal(err)
	}
	var st *Store
	add := func(id string) {
		t.Helper()
		if err := st.Add(context.Background(), id, []kvstore.Slot{sl}, []int64{1}); err != nil {
			t.Fatal(err)
		}
	}
	logged := "" // the identity of the first counter logged
	log := &duringArgs{during: func(args []any) {
		if logged == "" { // the other goroutine: two more requests' counts
			logged = ids[args[1].(string)]
			add(logged)
			add("w")
		}
	}}
	var err error
	st, err = New(Options{KV: kv, Globals: g, Later: s.later("iso-a"), Now: s.Now, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	add("x")
	s.drain(t)
	if logged == "" {
		t.Fatal("no unwritten counter was evicted")
	}
	total := func(id string) (n int64) {
		for _, v := range kv.latest(SlotPrefix(id, sl)) {
			n += v
		}
		return n
	}
	// The evicted counter's own count is lost, as its line says; the one
	// made while it was logged is not.
	if got := total(logged); got != 1 {
		t.Errorf("KV holds %d for the counter logged, want 1 (the count made during its line)", got)
	}
	if got := total("w"); got != 4 {
		t.Errorf("KV holds %d for the written counter, want 4 (3 before its eviction, 1 after)", got)
	}
}

// duringArgs runs during on each Warn with the line's fields.
type duringArgs struct{ during func(args []any) }

func (l *duringArgs) Warn(_ string, args ...any) { l.during(args) }
