package workerskv

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/slidegate/slidegate/kvstore"
	"github.com/slidegate/slidegate/window"
)

// TestEvictedCounterKeepsItsKVCounts: a full isolate evicts a counter
// whose counts are in KV (rank 0: nothing is lost there, bound's doc says),
// and its client comes back in the same bucket. The new counter started
// from nothing and wrote its total to the same KV key, over the evicted
// one's: a client with 50 requests of an hour rule written to KV had 1
// there after its next request, in every isolate's list, and 49 more
// requests to spend. The new counter writes a key of its own, and the
// evicted one's key counts for every isolate, this one included.
func TestEvictedCounterKeepsItsKVCounts(t *testing.T) {
	ctx := context.Background()
	hour := func(t time.Time) kvstore.Slot {
		return kvstore.Slot{Name: "hour", Bucket: window.Index(t, time.Hour), Length: time.Hour}
	}
	s := newSim(t0)
	kv := newFakeKV(s.Now, 0)
	a := newIsolate(t, s, kv, "iso-a", Options{Logger: &warnLog{}})
	const id = "client"
	add := func(id string, sl kvstore.Slot, n int64) {
		t.Helper()
		if err := a.store.Add(ctx, id, []kvstore.Slot{sl}, []int64{n}); err != nil {
			t.Fatal(err)
		}
	}
	add(id, hour(s.Now()), 50)
	s.drain(t)
	// Twice: the new counter, evicted in turn, must not write over the
	// first one's key nor lose its own.
	for round := range 2 {
		s.advance(2 * time.Second)
		// Other clients fill the isolate; the client's counter, written,
		// counts least per unit of time and goes first.
		for i := range maxCells + 1 {
			add("c-"+strconv.Itoa(round)+"-"+strconv.Itoa(i), minute(s.Now()), 2)
		}
		s.drain(t)
		var held bool
		a.g.Update(func(c Cells) { _, held = c.Get(SlotPrefix(id, hour(s.Now())) + "iso-a") })
		if held {
			t.Fatalf("round %d: the client's counter was not evicted: the test proves nothing", round)
		}
		s.advance(2 * time.Second)
		add(id, hour(s.Now()), 1) // the client comes back
		s.drain(t)
	}

	var total int64
	for _, n := range kv.latest(SlotPrefix(id, hour(s.Now()))) {
		total += n
	}
	if total != 52 {
		t.Errorf("KV holds %d for the client's hour, want 52: %v", total, kv.latest(SlotPrefix(id, hour(s.Now()))))
	}
	load := func(st *Store) int64 {
		t.Helper()
		counts := make([]int64, 1)
		if err := st.Load(ctx, id, []kvstore.Slot{hour(s.Now())}, counts); err != nil {
			t.Fatal(err)
		}
		return counts[0]
	}
	b := newIsolate(t, s, kv, "iso-b", Options{})
	if got := load(b.store); got != 52 {
		t.Errorf("another isolate counts %d for the client, want 52", got)
	}
	s.advance(DefaultListInterval)
	load(a.store) // lists again, in the background
	s.drain(t)
	if got := load(a.store); got != 52 {
		t.Errorf("the isolate that evicted it counts %d for the client once listed, want 52", got)
	}
}
