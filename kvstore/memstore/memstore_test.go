package memstore

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/slidegate/slidegate/kvstore"
	"github.com/slidegate/slidegate/kvstore/storetest"
	"github.com/slidegate/slidegate/window"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(*testing.T) kvstore.Store { return New() })
	t.Run("Limited", func(t *testing.T) {
		storetest.Run(t, func(*testing.T) kvstore.Store { return NewLimited(1 << 20) })
	})
}

// TestLimitedEvicts fills a store bounded to two identities per shard:
// every kind of write still counts a new identity, the store holds no more
// than its bound, and what it drops first is what expired, then the
// identity with the fewest counts, never one that has used its quota.
func TestLimitedEvicts(t *testing.T) {
	ctx := context.Background()
	s := NewLimited(2 * shardCount)
	minute := window.Rule{Name: "minute", Limit: 100, Period: time.Minute}
	pos := minute.At(t0)
	if _, _, ok, err := s.UpdateRule(ctx, "heavy", minute, pos, 90); err != nil || !ok {
		t.Fatalf("heavy: %v, %v", ok, err)
	}
	const light = 5000
	for i := range light {
		if _, _, ok, err := s.UpdateRule(ctx, fmt.Sprintf("id-%d", i), minute, pos, 1); err != nil || !ok {
			t.Fatalf("id-%d: %v, %v", i, ok, err)
		}
	}
	if got, want := s.Len(), 2*shardCount; got != want {
		t.Fatalf("Len = %d, want the bound, %d", got, want)
	}
	if got, want := s.Evicted(), uint64(light+1-2*shardCount); got != want {
		t.Errorf("Evicted = %d, want %d", got, want)
	}
	expectLoad(t, s, "heavy", minuteSlot(t0), 90)

	slots := []kvstore.Slot{minuteSlot(t0)}
	counts := make([]int64, 1)
	writes := map[string]func(id string) error{
		"UpdateRule": func(id string) error { _, _, _, err := s.UpdateRule(ctx, id, minute, pos, 1); return err },
		"Add":        func(id string) error { return s.Add(ctx, id, slots, []int64{1}) },
		"Update": func(id string) error {
			_, err := s.Update(ctx, id, slots, counts, []int64{1}, admitAll{})
			return err
		},
		"AddIf": func(id string) error {
			_, err := s.AddIf(ctx, id, []kvstore.Cond{{Slot: slots[0], Max: 10, Add: 1}}, counts)
			return err
		},
	}
	for name, write := range writes {
		if err := write("new-" + name); err != nil {
			t.Errorf("%s of a new identity into a full store: %v", name, err)
		}
		expectLoad(t, s, "new-"+name, minuteSlot(t0), 1)
	}
	if got := s.Len(); got != 2*shardCount {
		t.Errorf("Len = %d, want %d", got, 2*shardCount)
	}

	// Two minutes on, the held counters have expired: a new identity's
	// write drops them from its shard, and evicts nothing.
	later := t0.Add(2 * time.Minute)
	pos, slots[0] = minute.At(later), minuteSlot(later)
	before := s.Evicted()
	for name, write := range writes {
		if err := write("later-" + name); err != nil {
			t.Errorf("%s after the held identities expired: %v", name, err)
		}
	}
	if got := s.Evicted(); got != before {
		t.Errorf("Evicted went from %d to %d: expired identities should have made room", before, got)
	}
}

// TestTakeBackOfMissingIdentity: a take-back (an Add of negative costs: a
// refund, a rollback) for an identity the store no longer holds leaves it
// missing, gives it no credit and evicts no one; for one it holds, it takes
// the count back.
func TestTakeBackOfMissingIdentity(t *testing.T) {
	ctx := context.Background()
	s := NewLimited(shardCount) // one identity per shard
	sl := []kvstore.Slot{minuteSlot(t0)}
	if err := s.Add(ctx, "held", sl, []int64{5}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"gone", "never"} {
		if err := s.Add(ctx, id, sl, []int64{-1}); err != nil {
			t.Fatal(err)
		}
		expectLoad(t, s, id, sl[0], 0)
	}
	if s.Len() != 1 || s.Evicted() != 0 {
		t.Errorf("Len %d, Evicted %d after take-backs of missing identities; want 1 and 0", s.Len(), s.Evicted())
	}
	if err := s.Add(ctx, "held", sl, []int64{-2}); err != nil {
		t.Fatal(err)
	}
	expectLoad(t, s, "held", sl[0], 3)
}

// TestAddSaturates: an unconditional Add (the limiter's count of a denied
// request, CountDenied) stops at math.MaxInt64. Two such counts racing on a
// counter near it (the limiter caps each by the count it read) wrapped it
// negative, which reads as empty: the client was admitted again. Both the
// pair and a cell (a rule beyond the pair) saturate.
func TestAddSaturates(t *testing.T) {
	ctx := context.Background()
	pair, cell := minuteSlot(t0), kvstore.Slot{Name: "day", Bucket: window.Index(t0, 24*time.Hour), Length: 24 * time.Hour}
	for _, tt := range []struct {
		name  string
		slots []kvstore.Slot
	}{
		{"pair", []kvstore.Slot{pair}},
		{"pair and cell", []kvstore.Slot{pair, cell}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := New()
			near, more := make([]int64, len(tt.slots)), make([]int64, len(tt.slots))
			for i := range tt.slots {
				near[i], more[i] = math.MaxInt64-3, 5
			}
			for _, costs := range [][]int64{near, more, more} {
				if err := s.Add(ctx, "k", tt.slots, costs); err != nil {
					t.Fatal(err)
				}
			}
			for _, sl := range tt.slots {
				expectLoad(t, s, "k", sl, math.MaxInt64)
			}
		})
	}
}

// TestEvictsTheLeastRate: among identities of a minute-and-day plan, the
// one that used up its minute (60 this minute, 60 today) outweighs one
// that is busy by the day but under both limits (5 this minute, 5,000
// today): a newcomer evicts the busy one. Counts per unit of time decide,
// not raw counts, which a day's counter would dominate.
func TestEvictsTheLeastRate(t *testing.T) {
	ctx := context.Background()
	day := func(at time.Time) kvstore.Slot {
		return kvstore.Slot{Name: "day", Bucket: window.Index(at, 24*time.Hour), Length: 24 * time.Hour}
	}
	s := NewLimited(2 * shardCount)
	// Two identities in one shard, so that a third there must evict.
	ids := sameShard(s, 3)
	exhausted, busy, newcomer := ids[0], ids[1], ids[2]
	if err := s.Add(ctx, exhausted, []kvstore.Slot{minuteSlot(t0), day(t0)}, []int64{60, 60}); err != nil {
		t.Fatal(err)
	}
	if err := s.Add(ctx, busy, []kvstore.Slot{minuteSlot(t0), day(t0)}, []int64{5, 5000}); err != nil {
		t.Fatal(err)
	}
	if err := s.Add(ctx, newcomer, []kvstore.Slot{minuteSlot(t0), day(t0)}, []int64{1, 1}); err != nil {
		t.Fatal(err)
	}
	expectLoad(t, s, exhausted, minuteSlot(t0), 60)
	expectLoad(t, s, busy, day(t0), 0)
	expectLoad(t, s, newcomer, minuteSlot(t0), 1)
}

// TestLimitedConcurrent writes with every kind of write from many
// goroutines into a small bounded store while time moves on: the store
// never holds more than its bound and its bookkeeping stays whole.
func TestLimitedConcurrent(t *testing.T) {
	ctx := context.Background()
	s := NewLimited(4 * shardCount)
	minute := window.Rule{Name: "m", Limit: 1 << 40, Period: time.Minute}
	var step atomic.Int64
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 5000 {
				now := t0.Add(time.Duration(step.Load()) * time.Second)
				id := fmt.Sprintf("id-%d", (i*7919+g*104729)%3000)
				pos := minute.At(now)
				sl := []kvstore.Slot{{Name: "m", Bucket: pos.Index - 1, Length: time.Minute}, {Name: "m", Bucket: pos.Index, Length: time.Minute}}
				var err error
				switch i % 4 {
				case 0:
					_, _, _, err = s.UpdateRule(ctx, id, minute, pos, 1)
				case 1:
					err = s.Add(ctx, id, sl[1:], []int64{1})
				case 2:
					_, err = s.Update(ctx, id, sl, make([]int64, 2), []int64{0, 1}, admitAll{})
				case 3:
					_, err = s.AddIf(ctx, id, []kvstore.Cond{{Slot: sl[1], Max: 1 << 40, Add: 1}}, make([]int64, 1))
				}
				if err != nil {
					t.Error(err)
					return
				}
				if g == 0 && i%500 == 0 {
					step.Add(7)
				}
			}
		}()
	}
	wg.Wait()
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		used := 0
		if tb := sh.tab.Load(); tb != nil {
			for j := range tb.tags {
				if tb.tags[j].Load() == 0 {
					continue
				}
				used++
				if sl := &tb.slots[j]; !sl.used() {
					t.Errorf("shard %d slot %d tagged but empty", i, j)
				}
			}
		}
		if int(sh.n) != used || sh.n > sh.limit {
			t.Errorf("shard %d: n %d, slots in use %d, limit %d", i, sh.n, used, sh.limit)
		}
		sh.mu.Unlock()
	}
	if s.Evicted() == 0 {
		t.Error("3,000 identities in a store bound to 1,024 and none evicted")
	}
}

func expectLoad(t *testing.T, s *Store, id string, sl kvstore.Slot, want int64) {
	t.Helper()
	counts := make([]int64, 1)
	if err := s.Load(context.Background(), id, []kvstore.Slot{sl}, counts); err != nil || counts[0] != want {
		t.Errorf("Load(%s) = %d, %v; want %d", id, counts[0], err, want)
	}
}

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func minuteSlot(t time.Time) kvstore.Slot {
	return kvstore.Slot{Name: "minute", Bucket: window.Index(t, time.Minute), Length: time.Minute}
}

func TestEvictsAfterTwoPeriods(t *testing.T) {
	ctx := context.Background()
	s := New()
	// Many identities in the same period, so every shard holds some.
	ids := make([]string, 2000)
	for i := range ids {
		ids[i] = "id-" + string(rune('a'+i%26)) + time.Duration(i).String()
		if err := s.Add(ctx, ids[i], []kvstore.Slot{minuteSlot(t0)}, []int64{1}); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := s.Len(), len(ids); got != want {
		t.Fatalf("Len = %d, want %d", got, want)
	}
	// One minute later the counters are the previous bucket: still readable.
	for _, id := range ids {
		_ = s.Add(ctx, id+"-later", []kvstore.Slot{minuteSlot(t0.Add(time.Minute))}, []int64{1})
	}
	counts := []int64{0}
	if err := s.Load(ctx, ids[0], []kvstore.Slot{minuteSlot(t0)}, counts); err != nil || counts[0] != 1 {
		t.Fatalf("previous bucket after one period = %d, %v; want 1", counts[0], err)
	}
	// Two minutes later they can no longer be read and are dropped, as are
	// the identities they belonged to.
	// A shard sweeps when it is written to: make sure every shard is, or
	// the test fails on the seeds that leave one out (a few percent).
	written := map[*shard]bool{}
	much := func(id string) {
		sh, _ := s.shard(id)
		written[sh] = true
		_ = s.Add(ctx, id, []kvstore.Slot{minuteSlot(t0.Add(2 * time.Minute))}, []int64{1})
	}
	for _, id := range ids {
		much(id + "-much-later")
	}
	extra := 0
	for i := 0; len(written) < shardCount; i++ {
		if sh, _ := s.shard(fmt.Sprint("sweeper-", i)); !written[sh] {
			much(fmt.Sprint("sweeper-", i))
			extra++
		}
	}
	if got, want := s.Len(), 2*len(ids)+extra; got != want {
		t.Errorf("Len after two periods = %d, want %d (only the newer identities)", got, want)
	}
}

func TestRollOverReusesCells(t *testing.T) {
	ctx := context.Background()
	s := New()
	counts := make([]int64, 2)
	now := t0
	step := func() {
		prev, cur := minuteSlot(now.Add(-time.Minute)), minuteSlot(now)
		if _, err := s.AddIf(ctx, "k", []kvstore.Cond{{Slot: prev, Max: 1 << 40}, {Slot: cur, Max: 1 << 40, Add: 1}}, counts); err != nil {
			t.Fatal(err)
		}
		now = now.Add(time.Minute)
	}
	for range 3 {
		step()
	}
	if allocs := testing.AllocsPerRun(100, step); allocs != 0 {
		t.Errorf("AddIf across bucket roll-overs allocates %.1f per call, want 0", allocs)
	}
	sh, k := s.shard("k")
	if got := counters(sh, slotOf(sh, k)); got > 3 {
		t.Errorf("identity holds %d counters after 100 roll-overs, want at most 3", got)
	}
}

// find returns the index of k's slot, or -1.
func (sh *shard) find(k ident) int {
	s, i := sh.locked(k)
	if s != nil {
		s.mu.Unlock()
	}
	return i
}

// slotOf returns k's slot, or nil.
func slotOf(sh *shard, k ident) *slot {
	if i := sh.find(k); i >= 0 {
		return &sh.tab.Load().slots[i]
	}
	return nil
}

// counters returns how many counters s holds: two for each of its pairs
// and its cells.
func counters(sh *shard, s *slot) int {
	n := 0
	for _, r := range s.rule {
		if r != 0 {
			n += 2
		}
	}
	if cs := sh.cellsOf(s); cs != nil {
		n += len(cs.c)
	}
	return n
}

func TestBackwardsSlotKeepsNewer(t *testing.T) {
	// A node whose clock is behind writes into an older bucket: the newer
	// counters must survive.
	ctx := context.Background()
	s := New()
	mustAdd := func(tm time.Time, n int64) {
		if err := s.Add(ctx, "k", []kvstore.Slot{minuteSlot(tm)}, []int64{n}); err != nil {
			t.Fatal(err)
		}
	}
	mustAdd(t0.Add(2*time.Minute), 5)
	mustAdd(t0, 7)
	counts := make([]int64, 2)
	_ = s.Load(ctx, "k", []kvstore.Slot{minuteSlot(t0), minuteSlot(t0.Add(2 * time.Minute))}, counts)
	if counts[0] != 7 || counts[1] != 5 {
		t.Errorf("counts = %v, want [7 5]", counts)
	}
}

func TestHashCollisionsProbe(t *testing.T) {
	// Two identities forced onto one hash must keep separate counters and
	// be swept separately.
	s := New()
	sh, ka := s.shard("a")
	kb := ident{ka.h, ka.h2 + 1} // same h: the slot after a's
	sh.mu.Lock()
	a, i := sh.insert(ka, 0, &s.evicted)
	*sh.counter(a, minuteSlot(t0), -1) = 3
	a.mu.Unlock()
	b, j := sh.insert(kb, 0, &s.evicted)
	*sh.counter(b, minuteSlot(t0.Add(-10*time.Minute)), -1) = 5 // long expired
	b.mu.Unlock()
	if i == j || sh.find(ka) != i || sh.find(kb) != j {
		t.Fatal("colliding identities not told apart")
	}
	sh.observeSlot(minuteSlot(t0))
	sh.nextSweep.Store(0)
	sh.sweep()
	sh.mu.Unlock()
	if sh.find(kb) >= 0 {
		t.Error("expired colliding identity not swept")
	}
	if a := slotOf(sh, ka); a == nil || sh.count(a, minuteSlot(t0), -1) != 3 {
		t.Error("live colliding identity lost in the sweep")
	}
}

func TestRemoveKeepsProbeRuns(t *testing.T) {
	// Identities whose homes crowd one end of the table, so that probe
	// runs wrap around, are removed in every order: the others must stay
	// reachable and keep their counters.
	const n = 12
	for seed := range uint64(200) {
		var sh shard
		sh.resize(16)
		hash := func(k int) ident {
			home := uint64(13 + (k*7+int(seed))%5) // homes 13..17 wrap past 15
			return ident{home<<shardBits | uint64(k)<<20, uint64(k)}
		}
		for k := range n {
			s, _ := sh.insert(hash(k), 0, nil)
			*sh.counter(s, minuteSlot(t0), -1) = int64(k + 1)
			s.mu.Unlock()
		}
		gone := map[int]bool{}
		x := seed*0x9e3779b97f4a7c15 | 1
		for len(gone) < n {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			k := int(x % n)
			if gone[k] {
				continue
			}
			gone[k] = true
			i := sh.find(hash(k))
			s := &sh.tab.Load().slots[i]
			s.mu.Lock()
			sh.drop(s)
			s.mu.Unlock()
			sh.remove(i)
			for k := range n {
				s := slotOf(&sh, hash(k))
				switch {
				case gone[k] && s != nil:
					t.Fatalf("seed %d: removed id-%d still found", seed, k)
				case !gone[k] && (s == nil || sh.count(s, minuteSlot(t0), -1) != int64(k+1)):
					t.Fatalf("seed %d: id-%d lost after removing %d identities", seed, k, len(gone))
				}
			}
		}
		if sh.n != 0 {
			t.Fatalf("seed %d: n = %d after removing every identity", seed, sh.n)
		}
	}
}

func TestPairRulesBounded(t *testing.T) {
	// Rules come and go; a shard's table of pair rules must only hold the
	// live ones, and rules past maxRules must still count, in cells.
	ctx := context.Background()
	s := New()
	sh, _ := s.shard("k")
	for round := range 3 {
		at := t0.Add(time.Duration(round) * 10 * time.Minute)
		for r := range maxRules + 10 {
			id := fmt.Sprint("id-", round, "-", r)
			for sh2, _ := s.shard(id); sh2 != sh; sh2, _ = s.shard(id) {
				id += "x" // keep every identity in one shard
			}
			sl := kvstore.Slot{Name: fmt.Sprint("rule-", round, "-", r), Bucket: window.Index(at, time.Minute), Length: time.Minute}
			if err := s.Add(ctx, id, []kvstore.Slot{sl}, []int64{int64(r + 1)}); err != nil {
				t.Fatal(err)
			}
			counts := []int64{0}
			if err := s.Load(ctx, id, []kvstore.Slot{sl}, counts); err != nil || counts[0] != int64(r+1) {
				t.Fatalf("round %d, rule %d: count %d, %v; want %d", round, r, counts[0], err, r+1)
			}
		}
		if got := len(sh.ruleList()); got > maxRules {
			t.Fatalf("round %d: %d pair rules, want at most %d", round, got, maxRules)
		}
	}
	live := 0
	for _, k := range sh.ruleList() {
		if k.refs > 0 {
			live++
		} else if k.name != "" {
			t.Errorf("a free pair rule keeps its name %q", k.name)
		}
	}
	if live > maxRules {
		t.Errorf("%d live pair rules, want at most %d", live, maxRules)
	}
}

func TestIdentityLengths(t *testing.T) {
	// Around the length of a key identity ("k:" and 64 hex digits), and for
	// prefixes of each other, every identity keeps its own counters.
	const inlineID = 66
	ctx := context.Background()
	s := New()
	long := strings.Repeat("k", 3*inlineID)
	var ids []string
	for _, n := range []int{0, 1, inlineID - 1, inlineID, inlineID + 1, 3 * inlineID} {
		ids = append(ids, long[:n])
	}
	ids = append(ids, long[:inlineID-1]+"x", long[:inlineID]+"x")
	for i, id := range ids {
		if err := s.Add(ctx, id, []kvstore.Slot{minuteSlot(t0)}, []int64{int64(i + 1)}); err != nil {
			t.Fatal(err)
		}
	}
	for i, id := range ids {
		counts := []int64{0}
		if err := s.Load(ctx, id, []kvstore.Slot{minuteSlot(t0)}, counts); err != nil || counts[0] != int64(i+1) {
			t.Errorf("identity of length %d: count %d, %v; want %d", len(id), counts[0], err, i+1)
		}
	}
	if got, want := s.Len(), len(ids); got != want {
		t.Errorf("Len = %d, want %d", got, want)
	}
}

func TestTableShrinksAfterSweep(t *testing.T) {
	ctx := context.Background()
	s := New()
	for i := range 20_000 {
		_ = s.Add(ctx, fmt.Sprintf("id-%d", i), []kvstore.Slot{minuteSlot(t0)}, []int64{1})
	}
	heads := func() (n int) {
		for i := range s.shards {
			if t := s.shards[i].tab.Load(); t != nil {
				n += len(t.slots)
			}
		}
		return n
	}
	grown := heads()
	if grown < 20_000*4/3 {
		t.Fatalf("%d slots for 20000 identities, want at least 4 per 3 identities", grown)
	}
	// Two periods later every old identity expires; a new one in each
	// shard sweeps it, and the few new ones must not keep the grown tables.
	written := map[*shard]bool{}
	for i := 0; len(written) < shardCount; i++ {
		id := fmt.Sprintf("new-%d", i)
		sh, _ := s.shard(id)
		if !written[sh] {
			written[sh] = true
			_ = s.Add(ctx, id, []kvstore.Slot{minuteSlot(t0.Add(2 * time.Minute))}, []int64{1})
		}
	}
	if got, want := s.Len(), shardCount; got != want {
		t.Fatalf("Len = %d, want %d", got, want)
	}
	if got := heads(); got > grown/8 {
		t.Errorf("%d slots after the sweep (%d before), want at most %d", got, grown, grown/8)
	}
}

func TestManyRulesOutgrowInline(t *testing.T) {
	// Past its pairs an identity's counters are cells, and past the cells'
	// inline array a slice of their own; every counter must survive the
	// moves and the sweeps.
	ctx := context.Background()
	s := New()
	const rules = pairs + len(cells{}.inline) + 2
	slots := func(at time.Time) []kvstore.Slot {
		var sl []kvstore.Slot
		for r := range rules {
			sl = append(sl, kvstore.Slot{Name: fmt.Sprint("r", r), Bucket: window.Index(at, time.Minute), Length: time.Minute})
		}
		return sl
	}
	costs := make([]int64, rules)
	for i := range costs {
		costs[i] = int64(i + 1)
	}
	for _, at := range []time.Time{t0, t0.Add(time.Minute), t0.Add(2 * time.Minute)} {
		if err := s.Add(ctx, "k", slots(at), costs); err != nil {
			t.Fatal(err)
		}
		for _, back := range []time.Duration{0, time.Minute} {
			if at.Add(-back).Before(t0) {
				continue
			}
			counts := make([]int64, rules)
			if err := s.Load(ctx, "k", slots(at.Add(-back)), counts); err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(counts) != fmt.Sprint(costs) {
				t.Errorf("at %s, %s back: counts %v, want %v", at.Format(time.TimeOnly), back, counts, costs)
			}
		}
	}
	sh, k := s.shard("k")
	if got, want := counters(sh, slotOf(sh, k)), 2*rules; got != want {
		t.Errorf("%d cells after three minutes, want %d: the previous and the current minute of each rule", got, want)
	}
}

func TestLayout(t *testing.T) {
	// An identity in two cache lines, its first rule's pair in the first
	// with the identity; one cache line per shard.
	if got, want := unsafe.Sizeof(slot{}), uintptr(2*cacheLine); got != want {
		t.Errorf("slot is %d bytes, want %d", got, want)
	}
	var s slot
	if end := unsafe.Offsetof(s.state) + unsafe.Offsetof(s.pair) + unsafe.Sizeof(pair{}); end > cacheLine {
		t.Errorf("the first pair ends %d bytes into a slot, past its first cache line", end)
	}
	if got, want := unsafe.Sizeof(shard{}), uintptr(cacheLine); got != want {
		t.Errorf("shard is %d bytes, want %d", got, want)
	}
}

// TestSlotHasNoPointers: a slot holds no Go pointer, so that the runtime
// allocates a table unscanned and the collector never marks identities.
func TestSlotHasNoPointers(t *testing.T) {
	var walk func(typ reflect.Type, path string)
	walk = func(typ reflect.Type, path string) {
		switch typ.Kind() {
		case reflect.Struct:
			for i := range typ.NumField() {
				f := typ.Field(i)
				walk(f.Type, path+"."+f.Name)
			}
		case reflect.Array:
			walk(typ.Elem(), path+"[]")
		case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
			reflect.Float32, reflect.Float64:
		default:
			t.Errorf("slot%s is a %s, which holds a pointer", path, typ.Kind())
		}
	}
	walk(reflect.TypeFor[slot](), "")
}

// TestSlotsAligned: every table a shard makes, of minSlots up to 2^17
// slots, starts on a multiple of a slot's size, so that each slot is an
// aligned pair of cache lines. A slot holds no pointer, so the allocator
// puts no malloc header in front of a table (one that held pointers
// started mallocHeader bytes into a line at 512 bytes to 32 KiB).
func TestSlotsAligned(t *testing.T) {
	var sh shard
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for n := minSlots; n <= 1<<17; n *= 2 {
		tab := sh.resize(n)
		if len(tab.slots) != n || cap(tab.slots) != n || len(tab.tags) != n {
			t.Fatalf("resize(%d): %d slots (capacity %d), %d tags", n, len(tab.slots), cap(tab.slots), len(tab.tags))
		}
		if off := uintptr(unsafe.Pointer(&tab.slots[0])) % unsafe.Sizeof(slot{}); off != 0 {
			t.Errorf("a table of %d slots starts %d bytes into a slot's size", n, off)
		}
	}
}

// TestShardsAligned: a Store's shards start on cache lines, each shard
// one line (TestLayout). Allocated as &Store{}, a Store starts
// mallocHeader bytes into a line (checked: this test failed with it).
func TestShardsAligned(t *testing.T) {
	for _, s := range []*Store{New(), NewLimited(1000)} {
		if off := uintptr(unsafe.Pointer(&s.shards[0])) % cacheLine; off != 0 {
			t.Errorf("a Store's shards start %d bytes into a cache line", off)
		}
	}
}

// admitAll is a kvstore.Admitter that admits every request.
type admitAll struct{}

func (admitAll) Admit([]int64) bool { return true }

func TestCountsExactWhileTableChanges(t *testing.T) {
	// Calls that hold only their slot's lock (every kind of write) run
	// while other identities are inserted (tables grow), expire and are
	// swept (slots move back over removed ones) and tables shrink: every
	// admitted request must be counted once, in its own identity.
	ctx := context.Background()
	s := New()
	minute := window.Rule{Name: "minute", Limit: 1 << 40, Period: time.Minute}
	second := window.Rule{Name: "second", Limit: 1 << 40, Period: time.Second}
	for i := range 3000 { // expire when the test's minute begins
		if _, _, ok, err := s.UpdateRule(ctx, fmt.Sprint("old-", i), minute, minute.At(t0), 1); !ok || err != nil {
			t.Fatalf("old-%d: %v, %v", i, ok, err)
		}
	}
	start := t0.Add(2 * time.Minute)
	hot := make([]string, 300)
	for i := range hot {
		hot[i] = fmt.Sprint("hot-", i)
	}
	const workers = 4
	admitted := make([]atomic.Int64, len(hot))
	var churned atomic.Bool // the workers check until the churn is over
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			x := uint64(w+1) * 0x9e3779b97f4a7c15
			for n := 0; n < 1000 || !churned.Load(); n++ {
				x ^= x << 13
				x ^= x >> 7
				x ^= x << 17
				k := int(x % uint64(len(hot)))
				ok, err := true, error(nil)
				pos := minute.At(start)
				cur := kvstore.Slot{Name: "minute", Bucket: pos.Index, Length: time.Minute}
				prev := kvstore.Slot{Name: "minute", Bucket: pos.Index - 1, Length: time.Minute}
				switch (w + n) % 4 {
				case 0:
					_, _, ok, err = s.UpdateRule(ctx, hot[k], minute, pos, 1)
				case 1:
					ok, err = s.AddIf(ctx, hot[k], []kvstore.Cond{{Slot: prev, Max: 1 << 40}, {Slot: cur, Max: 1 << 40, Add: 1}}, make([]int64, 2))
				case 2:
					ok, err = s.Update(ctx, hot[k], []kvstore.Slot{prev, cur}, make([]int64, 2), []int64{0, 1}, admitAll{})
				case 3:
					err = s.Add(ctx, hot[k], []kvstore.Slot{cur}, []int64{1})
				}
				if err != nil || !ok {
					t.Errorf("%s: %v, %v", hot[k], ok, err)
					return
				}
				admitted[k].Add(1)
			}
		}()
	}
	// Load finds an identity whose slot moves (resizes, removals before
	// it) as exactly as the writes do: fixed identities of 7 each, read
	// until the churn is over.
	fixed := make([]string, 300)
	minuteSlot := []kvstore.Slot{{Name: "minute", Bucket: minute.At(start).Index, Length: time.Minute}}
	for i := range fixed {
		fixed[i] = fmt.Sprint("fixed-", i)
		if err := s.Add(ctx, fixed[i], minuteSlot, []int64{7}); err != nil {
			t.Fatal(err)
		}
	}
	for l := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			counts := []int64{0}
			for n := l; n < 1000 || !churned.Load(); n++ {
				id := fixed[n%len(fixed)]
				if err := s.Load(ctx, id, minuteSlot, counts); err != nil || counts[0] != 7 {
					t.Errorf("Load %s while the table changes: %d, %v; want 7", id, counts[0], err)
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() { // churn: identities of a one-second rule, swept every second
		defer wg.Done()
		defer churned.Store(true)
		for sec := range 40 {
			at := start.Add(time.Duration(sec) * time.Second)
			for i := range 200 {
				id := fmt.Sprint("churn-", sec, "-", i)
				if _, _, ok, err := s.UpdateRule(ctx, id, second, second.At(at), 1); err != nil || !ok {
					t.Errorf("%s: %v, %v", id, ok, err)
					return
				}
			}
		}
	}()
	wg.Wait()
	for k, id := range hot {
		counts := []int64{0}
		if err := s.Load(ctx, id, []kvstore.Slot{{Name: "minute", Bucket: minute.At(start).Index, Length: time.Minute}}, counts); err != nil {
			t.Fatal(err)
		}
		if got, want := counts[0], admitted[k].Load(); got != want {
			t.Errorf("%s: count %d, admitted %d", id, got, want)
		}
	}
	// The 3000 old identities are gone; what remains is the hot ones and
	// the churn of the last seconds (a shard sweeps when it is written
	// to, so a few shards keep some seconds more).
	if got, most := s.Len(), len(hot)+len(fixed)+10*200; got > most {
		t.Errorf("Len = %d, want at most %d", got, most)
	}
}
