package workerskv

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/slidegate/slidegate/kvstore"
)

// TestEvictedPreviousCounterStillCounts: a client served by one
// isolate counted 40 in one minute and 60 in the next. The full isolate
// evicts the cells that count least first: the client's listed sums (0:
// nobody else counts it), then its previous minute's counter (40, written
// to KV), and keeps the current one (60). Since 984e470 a missing sum of a
// client counted in the next bucket is listed behind, and the request
// decided meanwhile on the isolate's own count of the previous minute,
// which it no longer held: 0 instead of 40, and a client at 96 of 100
// (floor(40 × 0.9) + 60) was admitted for a cost of 5 until the list
// answered (while every holder is taken, KV answering slowly, no list
// starts). A counter of the previous bucket is now kept while its
// client's counter of the current one is.
func TestEvictedPreviousCounterStillCounts(t *testing.T) {
	ctx := context.Background()
	s := newSim(t0)
	kv := newFakeKV(s.Now, 0)
	iso := newIsolate(t, s, kv, "iso-a", Options{Logger: &warnLog{}})
	const id = "client"
	request := func(id string, cost int64) []int64 {
		t.Helper()
		cur := minute(s.Now())
		slots := []kvstore.Slot{{Name: cur.Name, Bucket: cur.Bucket - 1, Length: cur.Length}, cur}
		counts := make([]int64, 2)
		if err := iso.store.Load(ctx, id, slots, counts); err != nil {
			t.Fatal(err)
		}
		if cost != 0 {
			if err := iso.store.Add(ctx, id, slots[1:], []int64{cost}); err != nil {
				t.Fatal(err)
			}
		}
		return counts
	}
	request(id, 40) // 12:00:10
	s.drain(t)
	s.run(t0.Add(55 * time.Second)) // 12:01:05
	request(id, 60)
	s.drain(t)
	// Other clients, each counting 50 in this minute, fill the isolate.
	add := func(i int) {
		t.Helper()
		if err := iso.store.Add(ctx, "c-"+strconv.Itoa(i), []kvstore.Slot{minute(s.Now())}, []int64{50}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range maxCells - 10 {
		add(i)
	}
	s.drain(t)
	s.advance(2 * time.Second) // written more than FlushInterval ago: evictable
	for i := maxCells - 10; i < maxCells+10; i++ {
		add(i)
	}
	var sumHeld, curHeld bool
	iso.g.Update(func(c Cells) {
		_, sumHeld = c.Get(sumKey(SlotPrefix(id, minute(t0))))
		_, curHeld = c.Get(SlotPrefix(id, minute(s.Now())) + "iso-a")
	})
	if sumHeld || !curHeld {
		t.Fatalf("previous minute's sum held %v, current counter %v; want false, true: the test proves nothing", sumHeld, curHeld)
	}
	if got := request(id, 0); got[0] != 40 || got[1] != 60 {
		t.Errorf("the client's counts %v after the eviction, want [40 60]", got)
	}
	s.drain(t)
	if got := request(id, 0); got[0] != 40 || got[1] != 60 {
		t.Errorf("the client's counts %v once listed, want [40 60]", got)
	}
}
