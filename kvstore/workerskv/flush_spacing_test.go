package workerskv

import (
	"context"
	"testing"
	"time"

	"github.com/slidegate/slidegate/kvstore"
)

// latencyKV is a KV whose puts take the given times, in turn, on the
// simulated clock, and reach KV when they answer (a put waiting its turn
// for one of the request's six connections, or answered late); during
// runs while the first put is awaited. It records when each put landed.
type latencyKV struct {
	*fakeKV
	s       *sim
	latency []time.Duration
	during  func()
	landed  []putRecord
}

func (k *latencyKV) Put(ctx context.Context, key, value string, n int64, ttl time.Duration) error {
	d := time.Duration(0)
	if len(k.latency) > 0 {
		d, k.latency = k.latency[0], k.latency[1:]
	}
	k.s.mu.Lock()
	k.s.now = k.s.now.Add(d)
	k.s.mu.Unlock()
	if f := k.during; f != nil {
		k.during = nil
		f()
	}
	k.landed = append(k.landed, putRecord{key: key, at: k.s.Now(), n: n})
	return k.fakeKV.Put(ctx, key, value, n, ttl)
}

// TestWritesOfAKeyLandASecondApart: Workers KV refuses a second write of a
// key within a second (429). The writes of a counter were spaced from the
// start of one to the start of the next: a put that took 1.2 s (queued
// behind the request's other KV calls, or answered late) landed at its
// end, and the next, started at once, landed 50 ms after it, refused. The
// next write now starts FlushInterval after the last one answered.
func TestWritesOfAKeyLandASecondApart(t *testing.T) {
	s := newSim(t0)
	kv := &latencyKV{fakeKV: newFakeKV(s.Now, 0), s: s, latency: []time.Duration{1200 * time.Millisecond, 50 * time.Millisecond}}
	log := &warnLog{}
	iso := newIsolate(t, s, kv, "iso-a", Options{Logger: log})
	add := func() {
		t.Helper()
		if err := iso.store.Add(context.Background(), "id", []kvstore.Slot{minute(s.Now())}, []int64{1}); err != nil {
			t.Fatal(err)
		}
	}
	add()
	kv.during = add // a count arrives while the first write is awaited
	s.drain(t)
	if len(kv.landed) != 2 {
		t.Fatalf("%d writes, want 2: %v", len(kv.landed), kv.landed)
	}
	if gap := kv.landed[1].at.Sub(kv.landed[0].at); gap < time.Second {
		t.Errorf("the key's writes landed %s apart, want at least 1s", gap)
	}
	if got := kv.landed[1].n; got != 2 {
		t.Errorf("the last write holds %d, want 2", got)
	}
}
