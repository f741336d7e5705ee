package memstore

import (
	"context"
	"fmt"
	"testing"
	"time"
	"unsafe"

	"github.com/slidegate/slidegate/kvstore"
	"github.com/slidegate/slidegate/window"
)

// boundSlots is the largest table a shard of at most per identities
// makes: the smallest power of two (minSlots at least) that holds per at
// three quarters in use.
func boundSlots(per int) int {
	n := minSlots
	for 3*n < 4*per {
		n *= 2
	}
	return n
}

// TestBoundUnderRotation: a bounded store flooded with new identities, as
// a client rotating made-up keys and addresses makes them (one to eight
// rules each, coming back across bucket boundaries, written by UpdateRule
// and by Update as the limiter does), never holds more identities than its
// bound (maxIdentities rounded up to a multiple of 256) and never grows a
// shard's table past what that many identities need. The table is what a
// full store costs for every identity whatever it holds (up to four
// rules' counters, in the slot): at the default bound of serve, 8,192
// slots a shard, about 277 bytes an identity (the README's figures rest on
// it).
func TestBoundUnderRotation(t *testing.T) {
	if got, want := boundSlots(3907), 8192; got != want {
		t.Fatalf("boundSlots(3907) = %d, want %d", got, want)
	}
	perID := float64(boundSlots(3907)*(int(unsafe.Sizeof(slot{}))+4)) / 3907
	if perID < 275 || perID > 280 {
		t.Errorf("a full store's table costs %.1f bytes an identity at 3,907 a shard; the README says about 280", perID)
	}

	ctx := context.Background()
	periods := []time.Duration{time.Second, time.Minute, time.Hour, 24 * time.Hour}
	for _, maxIDs := range []int{10, 1000, 3000} {
		t.Run(fmt.Sprint(maxIDs), func(t *testing.T) {
			s := NewLimited(maxIDs)
			per := (maxIDs + shardCount - 1) / shardCount
			bound := per * shardCount
			var rules []window.Rule
			for r := range 8 {
				rules = append(rules, window.Rule{Name: fmt.Sprint("r", r), Limit: 1 << 20, Period: periods[r%len(periods)]})
			}
			slots := make([]kvstore.Slot, 16)
			counts := make([]int64, 16)
			costs := make([]int64, 16)
			check := func(round int) {
				t.Helper()
				if got := s.Len(); got > bound {
					t.Fatalf("round %d: Len = %d, want at most %d", round, got, bound)
				}
				for i := range s.shards {
					sh := &s.shards[i]
					sh.mu.Lock()
					n, slots := int(sh.n), 0
					if tab := sh.tab.Load(); tab != nil {
						slots = len(tab.slots)
					}
					sh.mu.Unlock()
					if n > per || slots > boundSlots(per) {
						t.Fatalf("round %d: shard %d holds %d identities in %d slots, want at most %d in %d", round, i, n, slots, per, boundSlots(per))
					}
				}
			}
			// Each round: 2 bounds of new identities, a second later than
			// the last, and the last round's again (their buckets rolled
			// over when the round crossed a boundary).
			at := time.Date(2026, 11, 23, 23, 59, 58, 0, time.UTC)
			for round := range 6 {
				for i := range 2 * bound {
					for _, k := range []int{round, round - 1} {
						if k < 0 {
							continue
						}
						id := fmt.Sprintf("k:%064x", k*2*bound+i)
						if i%2 == 1 {
							id = fmt.Sprintf("ip:2001:db8:%x:%x::/64", k, i)
						}
						rs := rules[:1+(k*2*bound+i)%len(rules)]
						if len(rs) == 1 {
							if _, _, _, err := s.UpdateRule(ctx, id, rs[0], rs[0].At(at), 1); err != nil {
								t.Fatal(err)
							}
							continue
						}
						for j, r := range rs {
							pos := r.At(at)
							slots[2*j] = kvstore.Slot{Name: r.Name, Bucket: pos.Index - 1, Length: r.Period}
							slots[2*j+1] = kvstore.Slot{Name: r.Name, Bucket: pos.Index, Length: r.Period}
							costs[2*j+1] = 1
						}
						n := 2 * len(rs)
						if _, err := s.Update(ctx, id, slots[:n], counts[:n], costs[:n], admitAll{}); err != nil {
							t.Fatal(err)
						}
					}
				}
				check(round)
				at = at.Add(time.Second)
			}
			if s.Evicted() == 0 {
				t.Errorf("Evicted = 0 after %d writes of new identities into a store of %d", 12*bound, bound)
			}
		})
	}
}
