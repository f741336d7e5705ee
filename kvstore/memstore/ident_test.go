package memstore

import (
	"testing"
	"time"

	"github.com/slidegate/slidegate/kvstore"
	"github.com/slidegate/slidegate/window"
)

// TestFirstHashCollision: two identities whose first hash (the one that
// picks the shard, the slot and the tag) is equal, told apart by the
// second, keep counters of their own through every kind of call, on the
// path that holds only the slot's lock and on the one that takes the
// shard's, and expire on their own. With identities compared by the first
// hash alone, the second wrote into the first's counters.
func TestFirstHashCollision(t *testing.T) {
	minute := window.Rule{Name: "minute", Limit: 1 << 40, Period: time.Minute}
	day := window.Rule{Name: "day", Limit: 1 << 40, Period: 24 * time.Hour}
	slotsAt := func(at time.Time) []kvstore.Slot { return ruleSlots(at, minute, day) }
	s := New()
	_, a := s.shard("a")
	b := ident{a.h, a.h2 ^ 1}
	c := ident{a.h, a.h2 ^ 2} // written last, alone, two minutes later
	want := map[ident]int64{}
	// Each identity's writes, in turns, so that each turn finds the other
	// one's slot on its probe: a's first (inserted, under the shard's
	// lock), then b's, then each again (known: the slot's lock alone).
	for round := range 2 {
		for n, k := range []ident{a, b} {
			cost := int64(1 + n) // a counts 1 a call, b 2
			sl := slotsAt(t0)
			counts := make([]int64, len(sl))
			if ok := s.update(k, sl, counts, []int64{0, cost, 0, cost}, admitAll{}); !ok {
				t.Fatalf("round %d: update of %v refused", round, k)
			}
			if got := counts[1]; got != want[k] {
				t.Errorf("round %d: update of %v read %d this minute, want %d", round, k, got, want[k])
			}
			s.add(k, sl[1:2], []int64{cost})
			if _, cur, ok := s.updateRule(k, minute, minute.At(t0), cost); !ok || cur != want[k]+2*cost {
				t.Errorf("round %d: updateRule of %v read %d this minute (ok %v), want %d", round, k, cur, ok, want[k]+2*cost)
			}
			if !s.addIf(k, []kvstore.Cond{{Slot: sl[1], Max: 1 << 40, Add: cost}}, counts[:1]) {
				t.Fatalf("round %d: addIf of %v refused", round, k)
			}
			want[k] += 4 * cost
		}
	}
	for _, k := range []ident{a, b} {
		counts := make([]int64, 4)
		s.load(k, slotsAt(t0), counts)
		if counts[1] != want[k] || counts[3] != want[k]/4 {
			t.Errorf("%v: minute %d, day %d; want %d and %d", k, counts[1], counts[3], want[k], want[k]/4)
		}
	}
	if got, want := s.Len(), 2; got != want {
		t.Errorf("Len = %d, want %d", got, want)
	}
	// Two minutes on, c's write sweeps the minutes of a and b (their days
	// stay), and a take-back from a leaves b alone.
	later := t0.Add(2 * time.Minute)
	s.add(c, slotsAt(later)[1:2], []int64{1})
	s.add(a, slotsAt(t0)[3:4], []int64{-1})
	check := func(name string, k ident, at time.Time, minute, day int64) {
		t.Helper()
		counts := make([]int64, 2)
		s.load(k, []kvstore.Slot{slotsAt(at)[1], slotsAt(at)[3]}, counts)
		if counts[0] != minute || counts[1] != day {
			t.Errorf("after the sweep, %s: minute %d, day %d; want %d and %d", name, counts[0], counts[1], minute, day)
		}
	}
	check("a", a, t0, 0, want[a]/4-1)
	check("b", b, t0, 0, want[b]/4)
	check("c", c, later, 1, 0)
	if got, want := s.Len(), 3; got != want {
		t.Errorf("Len = %d after the sweep, want %d", got, want)
	}
}

// ruleSlots returns the slots the limiter reads for rules at at: of each,
// the previous and the current bucket.
func ruleSlots(at time.Time, rules ...window.Rule) []kvstore.Slot {
	var sl []kvstore.Slot
	for _, r := range rules {
		pos := r.At(at)
		sl = append(sl,
			kvstore.Slot{Name: r.Name, Bucket: pos.Index - 1, Length: r.Period},
			kvstore.Slot{Name: r.Name, Bucket: pos.Index, Length: r.Period})
	}
	return sl
}
