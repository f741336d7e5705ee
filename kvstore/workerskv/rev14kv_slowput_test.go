package workerskv

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/slidegate/slidegate/kvstore"
)

// TestRev14SlowKVWritesStayBoundedAndLoseNothing: since 51ee0be the next
// write of a key starts FlushInterval after the last one answered. With KV
// answering every put in 4 s (the simulated clock moves on while a put is
// awaited), a client counting through requests whose background work ends
// 30 s after they start (waitUntil) has its key written every 4 s +
// FlushInterval, never two landings within
// a second, and once the writes have been handed on (a later request's
// sweep) KV holds every count: nothing is dropped at a request's end.
func TestRev14SlowKVWritesStayBoundedAndLoseNothing(t *testing.T) {
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
