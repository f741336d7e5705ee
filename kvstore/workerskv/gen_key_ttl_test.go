package workerskv

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate/kvstore"
	"github.com/slidegate/slidegate/window"
)

// TestGenKeyLivesAsItsSlot: a counter made after an eviction writes a
// KV key of its own ({isolate}.{Gen}); that key must live as long as the
// slot is read (two periods after its bucket began: the previous bucket is
// read through the next), and never ask KV for less than its 60 s.
func TestGenKeyLivesAsItsSlot(t *testing.T) {
	for _, length := range []time.Duration{time.Second, time.Minute, time.Hour} {
		t.Run(length.String(), func(t *testing.T) {
			s := newSim(t0.Add(length / 2))
			kv := newFakeKV(s.Now, 0)
			iso := newIsolate(t, s, kv, "iso-a", Options{})
			// The isolate has evicted a written counter that lives as long.
			iso.g.Update(func(c Cells) { c.Set(evictKey, Cell{N: math.MaxInt64 - 1, Expires: math.MaxInt64}) })
			sl := kvstore.Slot{Name: "r", Bucket: window.Index(s.Now(), length), Length: length}
			for range 3 {
				if err := iso.store.Add(context.Background(), "client", []kvstore.Slot{sl}, []int64{1}); err != nil {
					t.Fatal(err)
				}
				s.advance(length / 8)
			}
			s.drain(t)
			puts := kv.putLog()
			if len(puts) == 0 {
				t.Fatal("nothing written")
			}
			until := window.Start(sl.Bucket, length).Add(2 * length)
			for _, p := range puts {
				if !strings.Contains(p.key, "iso-a.") {
					t.Errorf("put %q: want the Gen key of a counter made after an eviction", p.key)
				}
				if p.ttl < MinTTL {
					t.Errorf("put %q at %s: ttl %s, below KV's %s", p.key, p.at, p.ttl, MinTTL)
				}
				if end := p.at.Add(p.ttl); end.Before(until) {
					t.Errorf("put %q at %s: expires %s, before the slot stops being read at %s", p.key, p.at, end, until)
				}
			}
		})
	}
}
