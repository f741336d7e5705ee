package workerskv

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/slidegate/slidegate/kvstore"
)

// TestKeyFloodBringsNoSweepASecond: a stream of made-up keys, 40 new ones a
// second, each counted twice 0.2 s apart and never again (a flood, or the
// new visitors of a busy site loading a page). Each key's counter is one
// with counts to write (its own request waits a second to write again) or
// "written a moment ago" (adoptable) for about a second, which the sweep
// takes on as a busy client between two writes. There were always more
// than maxAdopt of them, so every sweep had the next request sweep again
// a second later for as long as the stream lasted (49 sweeps a minute),
// each reading every cell, and each taking on 30 counters that its request
// ran for 2 s and let go. A sweep a second later now needs the sweeps of
// the last sweepEvery to run still at least half the counters they took
// on, as busy clients' stay: 15 to 18 a minute (6 before such counters
// were taken on), the limit 24. The sweeps are counted as the changes of
// the sweep marker, which each sweep moves forward.
func TestKeyFloodBringsNoSweepASecond(t *testing.T) {
	s := newSim(t0)
	kv := newFakeKV(s.Now, 0)
	g := NewMemGlobals("iso-a")
	ctx := context.Background()
	const tick = 25 * time.Millisecond // one new key a tick, 40 a second
	const run = 60 * time.Second
	sweeps, last := 0, int64(0)
	for i := range int(run / tick) {
		for _, k := range []int{i, i - 8} { // each key again 0.2 s later
			if k < 0 {
				continue
			}
			sl := minute(s.Now())
			if err := s.request(t, kv, g, requestLife).Add(ctx, fmt.Sprint("made-up-", k), []kvstore.Slot{sl}, []int64{1}); err != nil {
				t.Fatal(err)
			}
		}
		g.Update(func(c Cells) {
			if m, _ := c.Get(sweepKey); m.At != last {
				sweeps, last = sweeps+1, m.At
			}
		})
		s.advance(tick)
	}
	s.drain(t)
	if sweeps > 24 {
		t.Errorf("%d sweeps in %s of made-up keys counted twice each, want at most 24", sweeps, run)
	}
}

// TestSweepRestartsManyDeadRequests: many quiet clients each counted twice,
// and the requests that were to make their trailing writes lost their
// background work (cancelled early, or a put that never answered), so each
// counter keeps counts to write and the Owner of a request that is gone.
// Another client sends a request every 0.5 s. The sweeps take them on 30 at
// a time and write them; they linger 2 s and are let go, so the sweeps of
// the last 10 s run few of those they took on, and without a sweep a
// second the rest waited 30 per 10 s, past their bucket's expiry.
func TestSweepRestartsManyDeadRequests(t *testing.T) {
	s := newSim(t0)
	kv := newFakeKV(s.Now, 0)
	g := NewMemGlobals("iso-a")
	ctx := context.Background()
	s.run(t0.Add(45 * time.Second)) // 5 s before the minute's end
	sl := minute(s.Now())
	const clients = 600
	// The first Add writes at once; the second's trailing write is due a
	// second after the first, after the request's work was cancelled.
	for range 2 {
		for c := range clients {
			if err := s.request(t, kv, g, 500*time.Millisecond).Add(ctx, fmt.Sprint("quiet-", c), []kvstore.Slot{sl}, []int64{1}); err != nil {
				t.Fatal(err)
			}
		}
		s.advance(100 * time.Millisecond)
	}
	s.advance(time.Second)
	for s.Now().Before(sl.Expires()) {
		if err := s.request(t, kv, g, requestLife).Add(ctx, "other", []kvstore.Slot{minute(s.Now())}, []int64{1}); err != nil {
			t.Fatal(err)
		}
		s.advance(500 * time.Millisecond)
	}
	s.drain(t)
	if lost := unwritten(kv, clients, sl, 2); lost > 0 {
		t.Errorf("%d of %d quiet clients' trailing counts never reached KV before their bucket expired", lost, clients)
	}
}

// unwritten returns how many of the clients "quiet-0" on have a count of sl
// other than want in KV.
func unwritten(kv *fakeKV, clients int, sl kvstore.Slot, want int64) int {
	lost := 0
	for c := range clients {
		if written(kv, fmt.Sprint("quiet-", c), sl, "iso-a") != want {
			lost++
		}
	}
	return lost
}
