package workerskv

import (
	"context"
	"strconv"
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

// TestSlowKVWritesStayBoundedAndLoseNothing: since 51ee0be the next
// write of a key starts FlushInterval after the last one answered. With KV
// answering every put in 4 s (the simulated clock moves on while a put is
// awaited), a client counting through requests whose background work ends
// 30 s after they start (waitUntil) has its key written every 4 s +
// FlushInterval, never two landings within
// a second, and once the writes have been handed on (a later request's
// sweep) KV holds every count: nothing is dropped at a request's end.
func TestSlowKVWritesStayBoundedAndLoseNothing(t *testing.T) {
	const latency = 4 * time.Second
	s := newSim(t0)
	lat := make([]time.Duration, 1000)
	for i := range lat {
		lat[i] = latency
	}
	kv := &latencyKV{fakeKV: newFakeKV(s.Now, 0), s: s, latency: lat}
	g := NewMemGlobals("iso-a")
	ctx := context.Background()
	slot := func() kvstore.Slot { return day(s.Now()) }
	var counted int64
	end := t0.Add(60 * time.Second)
	for s.Now().Before(end) {
		if err := s.request(t, kv, g, 30*time.Second).Add(ctx, "client", []kvstore.Slot{slot()}, []int64{1}); err != nil {
			t.Fatal(err)
		}
		counted++
		s.advance(500 * time.Millisecond)
	}
	// Other clients' requests for two minutes more: their sweeps take up
	// writes left when a request's time ran out.
	for i := range 24 {
		if err := s.request(t, kv, g, 30*time.Second).Add(ctx, "other-"+strconv.Itoa(i), []kvstore.Slot{slot()}, []int64{1}); err != nil {
			t.Fatal(err)
		}
		s.advance(5 * time.Second)
	}
	s.drain(t)
	var written int64
	for _, n := range kv.latest(SlotPrefix("client", slot())) {
		written += n
	}
	if written != counted {
		t.Errorf("KV holds %d of the client's %d counts", written, counted)
	}
	var last time.Time
	for i, p := range kv.landed {
		if p.key != SlotPrefix("client", slot())+"iso-a" {
			continue
		}
		if !last.IsZero() {
			if gap := p.at.Sub(last); gap < time.Second {
				t.Errorf("write %d landed %s after the one before, want at least 1s", i, gap)
			} else if gap > latency+FlushInterval+time.Second && p.at.Before(end) {
				t.Errorf("write %d landed %s after the one before while the client counted, want at most %s", i, gap, latency+FlushInterval+time.Second)
			}
		}
		last = p.at
	}
}
