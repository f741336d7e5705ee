package memstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slidegate/slidegate/kvstore"
	"github.com/slidegate/slidegate/window"
)

// checkShard checks sh's invariants, with no call on the store under way:
// every tagged slot holds one identity, reachable from its home, and every
// free slot nothing; n counts the tagged slots; each rule's refs is the
// number of pairs that count for it, a free rule keeps no name and no rule
// is interned twice; each identity's cells are its own, in the overflow,
// which holds no others (none leaked) and goes when empty; and no cell of
// a rule is at or after the previous bucket of that rule's pair (the
// check on the slot's lock alone reads only the pair).
func checkShard(t *testing.T, sh *shard) {
	t.Helper()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	rs := sh.ruleList()
	refs := make([]int, len(rs))
	mores := map[uint32]bool{}
	keys := map[ident]bool{}
	n := 0
	if tab := sh.tab.Load(); tab != nil {
		for i := range tab.tags {
			g := tab.tags[i].Load()
			s := &tab.slots[i]
			s.mu.Lock()
			st := s.state
			s.mu.Unlock()
			if g == 0 {
				if st != (state{}) {
					t.Errorf("free slot %d holds %+v", i, st)
				}
				continue
			}
			n++
			if g != tag(st.key.h) {
				t.Errorf("slot %d: tag %x, key's %x", i, g, tag(st.key.h))
			}
			if st.rule == [pairs]uint8{} && st.more == 0 {
				t.Errorf("slot %d tagged but unused", i)
			}
			if keys[st.key] {
				t.Errorf("identity %v twice", st.key)
			}
			keys[st.key] = true
			if _, j := tab.lookup(st.key); j != i {
				t.Errorf("slot %d: lookup finds %d", i, j)
			} else {
				s.mu.Unlock()
			}
			for j, r := range st.rule {
				if r == 0 {
					if st.pair[j] != (pair{}) {
						t.Errorf("slot %d: free pair %d holds %+v", i, j, st.pair[j])
					}
					continue
				}
				if int(r) > len(rs) {
					t.Errorf("slot %d: rule %d beyond %d", i, r, len(rs))
					continue
				}
				refs[r-1]++
			}
			if st.more != 0 {
				if mores[st.more] {
					t.Errorf("cells %d shared", st.more)
				}
				mores[st.more] = true
				if sh.over == nil || int(st.more) > len(sh.over.cells) || sh.over.cells[st.more-1] == nil {
					t.Errorf("slot %d: cells %d missing", i, st.more)
					continue
				}
				cs := sh.over.cells[st.more-1]
				if len(cs.c) == 0 {
					t.Errorf("slot %d: empty cells", i)
				}
				for _, c := range cs.c {
					for j, r := range st.rule {
						if r != 0 && rs[r-1].is(c.name, c.length) && c.bucket >= st.pair[j].bucket-1 {
							t.Errorf("slot %d: cell %s@%d beside its pair at %d", i, c.name, c.bucket, st.pair[j].bucket)
						}
					}
				}
			}
		}
	}
	if int(sh.n) != n {
		t.Errorf("n = %d, %d slots tagged", sh.n, n)
	}
	live := map[ruleKey]bool{}
	for i, k := range rs {
		if k.refs != refs[i] {
			t.Errorf("rule %d (%s/%v): refs %d, %d pairs", i, k.name, k.length, k.refs, refs[i])
		}
		if k.refs == 0 && k.name != "" {
			t.Errorf("rule %d free but keeps %q", i, k.name)
		}
		if k.refs > 0 {
			kk := ruleKey{name: k.name, length: k.length}
			if live[kk] {
				t.Errorf("rule %s/%v twice", k.name, k.length)
			}
			live[kk] = true
		}
	}
	if o := sh.over; o != nil {
		nonNil := 0
		for _, c := range o.cells {
			if c != nil {
				nonNil++
			}
		}
		if nonNil != len(mores) {
			t.Errorf("overflow holds %d cells, slots %d (leak)", nonNil, len(mores))
		}
		if len(o.free)+nonNil != len(o.cells) {
			t.Errorf("overflow: %d free + %d used != %d", len(o.free), nonNil, len(o.cells))
		}
		seen := map[uint32]bool{}
		for _, f := range o.free {
			if seen[f] || o.cells[f] != nil {
				t.Errorf("free list entry %d bad", f)
			}
			seen[f] = true
		}
		if nonNil == 0 {
			t.Errorf("empty overflow kept")
		}
	} else if len(mores) != 0 {
		t.Errorf("no overflow, %d slots with cells", len(mores))
	}
}

// TestInvariantsUnderChurn: goroutines make every kind of call on the
// identities of one shard, each call with up to six rules of 90 (more than
// pairs and maxRules), some lagging, some taking counts back, while time
// moves on (sweeps, the table shrinking), unbounded and bounded (evictions):
// after each round the shard's invariants hold, and once everything has
// expired the shard holds no identity and no cells.
func TestInvariantsUnderChurn(t *testing.T) {
	ctx := context.Background()
	for _, limit := range []int{0, 256 * 12} {
		s := NewLimited(limit)
		ids := sameShard(s, 64)
		sh, _ := s.shard(ids[0])
		var names []string
		for i := range 90 {
			names = append(names, fmt.Sprint("r", i))
		}
		var now atomic.Int64 // seconds after t0
		for round := range 30 {
			var wg sync.WaitGroup
			for w := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(uint64(round), uint64(w)))
					for range 400 {
						id := ids[rng.IntN(len(ids))]
						nr := 1 + rng.IntN(6)
						var rules []window.Rule
						for range nr {
							p := time.Duration(1+rng.IntN(3)) * time.Second
							name := names[rng.IntN(len(names))]
							if rng.IntN(2) == 0 {
								name = names[rng.IntN(5)]
							}
							rules = append(rules, window.Rule{Name: name, Limit: 1 << 40, Period: p})
						}
						at := t0.Add(time.Duration(now.Load()) * time.Second)
						if rng.IntN(4) == 0 {
							at = at.Add(-time.Duration(rng.IntN(8)) * time.Second)
						}
						sl := ruleSlots(at, rules...)
						costs := make([]int64, len(sl))
						for i := range costs {
							costs[i] = int64(rng.IntN(3))
						}
						counts := make([]int64, len(sl))
						switch rng.IntN(6) {
						case 0:
							r := rules[0]
							s.UpdateRule(ctx, id, r, r.At(at), int64(rng.IntN(2)))
						case 1:
							s.Update(ctx, id, sl, counts, costs, admitAll{})
						case 2:
							s.Add(ctx, id, sl, costs)
						case 3:
							for i := range costs {
								costs[i] = -costs[i]
							}
							s.Add(ctx, id, sl, costs)
						case 4:
							conds := make([]kvstore.Cond, len(sl))
							for i := range sl {
								conds[i] = kvstore.Cond{Slot: sl[i], Max: 1 << 40, Add: costs[i]}
							}
							s.AddIf(ctx, id, conds, counts)
						case 5:
							s.Load(ctx, id, sl, counts)
						}
						if rng.IntN(50) == 0 {
							now.Add(1)
						}
					}
				}()
			}
			wg.Wait()
			checkShard(t, sh)
			if t.Failed() {
				t.Fatalf("limit %d, round %d", limit, round)
			}
		}
		// Everything expires: nothing is left, no rule and no cells.
		far := window.Rule{Name: "far", Limit: 1, Period: time.Second}
		at := t0.Add(time.Duration(now.Load()+100) * time.Second)
		s.UpdateRule(ctx, ids[0], far, far.At(at), 0)
		s.UpdateRule(ctx, ids[0], far, far.At(at.Add(2*time.Second)), 0)
		checkShard(t, sh)
		sh.mu.Lock()
		if sh.n != 0 || sh.over != nil {
			t.Errorf("limit %d: after expiry n=%d over=%v", limit, sh.n, sh.over != nil)
		}
		sh.mu.Unlock()
	}
}

// TestCountsExactWhileRulesChurn: identities of six rules (some in cells)
// count exactly, written by every kind of call from several goroutines,
// while other identities of the same shard intern and release more than
// maxRules rules of their own (rule indexes freed and reused, the rules
// array grown and published anew), and the table grows, is swept and
// shrinks.
func TestCountsExactWhileRulesChurn(t *testing.T) {
	ctx := context.Background()
	s := New()
	ids := sameShard(s, 3+40*80)
	hot, crowd := ids[:3], ids[3:]
	sh, _ := s.shard(hot[0])
	var rules []window.Rule
	for i := range 6 {
		rules = append(rules, window.Rule{Name: fmt.Sprint("h", i), Limit: 1 << 50, Period: time.Hour})
	}
	admitted := make([][6]atomic.Int64, len(hot))
	var done atomic.Bool
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(9, uint64(w)))
			for n := 0; n < 2000 || !done.Load(); n++ {
				k := rng.IntN(len(hot))
				id := hot[k]
				r := rng.IntN(6)
				pos := rules[r].At(t0)
				cur := kvstore.Slot{Name: rules[r].Name, Bucket: pos.Index, Length: time.Hour}
				switch rng.IntN(4) {
				case 0:
					if _, _, ok, _ := s.UpdateRule(ctx, id, rules[r], pos, 1); ok {
						admitted[k][r].Add(1)
					}
				case 1:
					if ok, _ := s.Update(ctx, id, []kvstore.Slot{cur}, make([]int64, 1), []int64{1}, admitAll{}); ok {
						admitted[k][r].Add(1)
					}
				case 2:
					s.Add(ctx, id, []kvstore.Slot{cur}, []int64{1})
					admitted[k][r].Add(1)
				case 3:
					if ok, _ := s.AddIf(ctx, id, []kvstore.Cond{{Slot: cur, Max: 1 << 50, Add: 1}}, make([]int64, 1)); ok {
						admitted[k][r].Add(1)
					}
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer done.Store(true)
		for sec := range 40 {
			at := t0.Add(time.Duration(sec) * time.Second)
			for i := range 80 {
				r := window.Rule{Name: fmt.Sprint("c", sec, "-", i), Limit: 1 << 40, Period: time.Second}
				s.UpdateRule(ctx, crowd[sec*80+i], r, r.At(at), 1)
			}
		}
	}()
	wg.Wait()
	for k, id := range hot {
		sl := make([]kvstore.Slot, 6)
		for r := range rules {
			sl[r] = kvstore.Slot{Name: rules[r].Name, Bucket: rules[r].At(t0).Index, Length: time.Hour}
		}
		counts := make([]int64, 6)
		s.Load(ctx, id, sl, counts)
		for r := range rules {
			if counts[r] != admitted[k][r].Load() {
				t.Errorf("%s rule %d: %d, admitted %d", id, r, counts[r], admitted[k][r].Load())
			}
		}
	}
	checkShard(t, sh)
}
