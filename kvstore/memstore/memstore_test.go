package memstore

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate/kvstore"
	"github.com/slidegate/slidegate/kvstore/storetest"
	"github.com/slidegate/slidegate/window"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(*testing.T) kvstore.Store { return New() })
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
	sh, h := s.shard("k")
	e := sh.find("k", h)
	if got := len(e.cells); got > 3 {
		t.Errorf("identity holds %d cells after 100 roll-overs, want at most 3", got)
	}
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

func TestHashCollisionsChain(t *testing.T) {
	// Two identities forced onto one hash must keep separate counters and
	// be swept separately.
	ctx := context.Background()
	s := New()
	sh, h := s.shard("a")
	sh.mu.Lock()
	a := sh.entry("a", h)
	b := sh.entry("b", h) // same h: chained behind a
	sh.mu.Unlock()
	if a == b || sh.find("a", h) != a || sh.find("b", h) != b {
		t.Fatal("chained identities not told apart")
	}
	sh.mu.Lock()
	a.cell(minuteSlot(t0)).count = 3
	b.cell(minuteSlot(t0.Add(-10 * time.Minute))).count = 5 // long expired
	sh.observeSlot(minuteSlot(t0))
	sh.nextSweep = 0
	sh.sweep()
	sh.mu.Unlock()
	if sh.find("b", h) != nil {
		t.Error("expired chained identity not swept")
	}
	if e := sh.find("a", h); e == nil || e.count(minuteSlot(t0)) != 3 {
		t.Error("live chained identity lost in the sweep")
	}
	_ = ctx
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
			n += len(s.shards[i].heads)
		}
		return n
	}
	grown := heads()
	if grown < 2*20_000 {
		t.Fatalf("%d chains for 20000 identities, want at least two per identity", grown)
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
		t.Errorf("%d chains after the sweep (%d before), want at most %d", got, grown, grown/8)
	}
}

func TestManyRulesOutgrowInline(t *testing.T) {
	// Past inlineCells counters an identity's cells move to a slice of
	// their own; every counter must survive the move and the sweeps.
	ctx := context.Background()
	s := New()
	const rules = inlineCells + 1
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
	sh, h := s.shard("k")
	if got, want := len(sh.find("k", h).cells), 2*rules; got != want {
		t.Errorf("%d cells after three minutes, want %d: the previous and the current minute of each rule", got, want)
	}
}
