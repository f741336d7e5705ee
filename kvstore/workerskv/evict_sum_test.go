package workerskv

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slidegate/slidegate/kvstore"
)

// stallingListKV is a KV whose puts succeed and whose lists find nothing, at
// once, or while stall is set only when the caller gives up (KV lists
// slower than store_timeout).
type stallingListKV struct {
	putKV
	stall atomic.Bool
}

func (k *stallingListKV) List(ctx context.Context, _, _ string) (Page, error) {
	if k.stall.Load() {
		<-ctx.Done()
		return Page{}, ctx.Err()
	}
	return Page{Done: true}, nil
}

// TestEvictedSumIsListedBehind: a full isolate evicts listed sums first (a
// cache; those of clients counted nowhere else weigh nothing), and a
// client the isolate serves, whose counter it keeps, then listed KV again
// in its next request, as a new client's first request does: while KV
// lists outlasted store_timeout, every such client's request was a store
// error (a 503 under on_store_error deny), over and over as the isolate
// kept evicting. The isolate knows the client's counts: the sum is listed
// behind, as a stale one is. A new client still waits for its list.
func TestEvictedSumIsListedBehind(t *testing.T) {
	s := newSim(t0)
	kv := &stallingListKV{}
	iso := newIsolate(t, s, kv, "iso-a", Options{Logger: &warnLog{}})
	cur := minute(t0)
	slots := []kvstore.Slot{{Name: cur.Name, Bucket: cur.Bucket - 1, Length: cur.Length}, cur}
	check := func(ctx context.Context, id string, cost int64) ([]int64, error) {
		t.Helper()
		counts := make([]int64, 2)
		if err := iso.store.Load(ctx, id, slots, counts); err != nil {
			return counts, err
		}
		if err := iso.store.Add(ctx, id, slots[1:], []int64{cost}); err != nil {
			t.Fatal(err)
		}
		return counts, nil
	}
	const client = "client"
	if _, err := check(context.Background(), client, 50); err != nil {
		t.Fatal(err)
	}
	s.drain(t)
	sumGone := func() bool {
		var ok bool
		iso.g.Update(func(c Cells) { _, ok = c.Get(sumKey(SlotPrefix(client, cur))) })
		return !ok
	}
	// Other clients, each looked at once (their day rule), fill the
	// isolate until its eviction takes the client's sums (its counter,
	// counting more, stays).
	for i := 0; !sumGone(); i++ {
		if i > 10*maxCells {
			t.Fatal("the client's sum was never evicted: the test proves nothing")
		}
		d := day(s.Now())
		if err := iso.store.Load(context.Background(), "c-"+strconv.Itoa(i), []kvstore.Slot{{Name: d.Name, Bucket: d.Bucket - 1, Length: d.Length}, d}, make([]int64, 2)); err != nil {
			t.Fatal(err)
		}
	}
	s.drain(t)
	var own Cell
	iso.g.Update(func(c Cells) { own, _ = c.Get(SlotPrefix(client, cur) + "iso-a") })
	if own.N != 50 {
		t.Fatalf("the client's counter holds %d, want 50 (kept)", own.N)
	}

	kv.stall.Store(true) // KV lists outlast store_timeout from now on
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	counts, err := check(ctx, client, 1)
	if err != nil {
		t.Errorf("the client's next request: %v, want its count, with the sum listed behind", err)
	} else if counts[1] != 50 {
		t.Errorf("the client's count %d, want 50", counts[1])
	}
	kv.stall.Store(false)
	s.drain(t)
	if sumGone() {
		t.Error("the client's sum was not listed behind")
	}
	kv.stall.Store(true)
	ctx2, cancel2 := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel2()
	if _, err := check(ctx2, "new-client", 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a new client's first request: %v, want its list's deadline", err)
	}
}
