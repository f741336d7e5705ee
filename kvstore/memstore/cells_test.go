package memstore

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/slidegate/slidegate/kvstore"
	"github.com/slidegate/slidegate/window"
)

// TestRuleBeyondMaxRulesOnTwoRules: in a shard whose pairs already count
// for maxRules rules, an identity of a minute-and-day plan counts its
// minute (one of the shard's rules) in a pair and its day (not one) in
// cells, by name; both count exactly through the limiter's calls, across a
// roll-over of the minute and after the other rules expire, when the day
// stays in the cells it began in.
func TestRuleBeyondMaxRulesOnTwoRules(t *testing.T) {
	ctx := context.Background()
	s := New()
	ids := sameShard(s, maxRules+1)
	sh, _ := s.shard(ids[0])
	minute := window.Rule{Name: "minute", Limit: 1 << 40, Period: time.Minute}
	day := window.Rule{Name: "day", Limit: 1 << 40, Period: 24 * time.Hour}
	// maxRules identities of one rule each, "minute" among them, all with
	// a minute's period (they expire two minutes on).
	for i, id := range ids[1:] {
		name := fmt.Sprint("filler-", i)
		if i == 0 {
			name = "minute"
		}
		r := window.Rule{Name: name, Limit: 1 << 40, Period: time.Minute}
		if _, _, ok, err := s.UpdateRule(ctx, id, r, r.At(t0), 1); !ok || err != nil {
			t.Fatalf("%s: %v, %v", id, ok, err)
		}
	}
	if got := len(sh.ruleList()); got != maxRules {
		t.Fatalf("%d rules in the shard, want %d", got, maxRules)
	}
	id := ids[0]
	slotsAt := func(at time.Time) []kvstore.Slot { return ruleSlots(at, minute, day) }
	var wantMinute, wantDay int64
	check := func(when string, at time.Time) {
		t.Helper()
		counts := make([]int64, 4)
		if err := s.Load(ctx, id, slotsAt(at), counts); err != nil {
			t.Fatal(err)
		}
		if counts[1] != wantMinute || counts[3] != wantDay {
			t.Errorf("%s: minute %d, day %d; want %d and %d", when, counts[1], counts[3], wantMinute, wantDay)
		}
	}
	for i, at := range []time.Time{t0, t0.Add(time.Minute), t0.Add(3 * time.Minute)} {
		if i > 0 {
			wantMinute = 0 // a new minute
		}
		for range 3 {
			sl := slotsAt(at)
			counts := make([]int64, len(sl))
			if _, err := s.Update(ctx, id, sl, counts, []int64{0, 1, 0, 1}, admitAll{}); err != nil {
				t.Fatal(err)
			}
			if counts[1] != wantMinute || counts[3] != wantDay {
				t.Errorf("Update at %s read minute %d, day %d; want %d and %d", at.Format(time.TimeOnly), counts[1], counts[3], wantMinute, wantDay)
			}
			wantMinute, wantDay = wantMinute+1, wantDay+1
			if _, cur, ok, err := s.UpdateRule(ctx, id, day, day.At(at), 2); err != nil || !ok || cur != wantDay {
				t.Errorf("UpdateRule(day) at %s read %d (%v, %v), want %d", at.Format(time.TimeOnly), cur, ok, err, wantDay)
			}
			wantDay += 2
		}
		check(fmt.Sprint("at ", at.Format(time.TimeOnly)), at)
		_, k := s.shard(id)
		sl := slotOf(sh, k)
		if sl == nil || sh.pairOf(sl, "minute", time.Minute) < 0 || !sh.cellsOf(sl).has("day", 24*time.Hour) {
			t.Fatalf("at %s: the minute is not in a pair and the day in cells", at.Format(time.TimeOnly))
		}
	}
	if got := len(sh.ruleList()); got != maxRules {
		t.Errorf("%d rules in the shard, want %d", got, maxRules)
	}
}

// TestCellsWhileTableChanges: identities with more rules than a slot has
// pairs (their last in cells) are written and read by every kind of call
// from several goroutines, with a lagging clock's writes (cells of a
// pair's rule), while other identities come and go: every count lands
// once, and the race detector sees the cells read and written only under
// the shard's lock.
func TestCellsWhileTableChanges(t *testing.T) {
	ctx := context.Background()
	s := New()
	var rules []window.Rule
	for r := range pairs + 2 {
		rules = append(rules, window.Rule{Name: fmt.Sprint("r", r), Limit: 1 << 40, Period: time.Minute})
	}
	pos := rules[0].At(t0)
	slots := make([]kvstore.Slot, len(rules))
	for r := range rules {
		slots[r] = kvstore.Slot{Name: rules[r].Name, Bucket: pos.Index, Length: time.Minute}
	}
	lagging := kvstore.Slot{Name: rules[0].Name, Bucket: pos.Index - 3, Length: time.Minute}
	const writers, calls = 3, 600
	costs := make([]int64, len(slots))
	for i := range costs {
		costs[i] = 1
	}
	// All in one shard, so that the others' cells come beside the hot
	// identities'.
	ids := sameShard(s, 4+calls)
	hot, quiet, others := ids[:3], ids[3], ids[4:]
	if err := s.Add(ctx, quiet, slots, costs); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	// One goroutine adds other identities with cells (the table grows and
	// moves slots, the shard's cells grow), one reads the hot ones and one
	// that is not written.
	wg.Add(2)
	go func() {
		defer wg.Done()
		for _, id := range others {
			if err := s.Add(ctx, id, slots, costs); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		counts := make([]int64, len(slots))
		for n := range 2 * calls {
			id := hot[n%len(hot)]
			if n%2 == 0 {
				id = quiet // no writer's lock orders its reads after the others' cells
			}
			if err := s.Load(ctx, id, slots, counts); err != nil {
				t.Error(err)
				return
			}
			if id == quiet && fmt.Sprint(counts) != fmt.Sprint(costs) {
				t.Errorf("%s: %v, want %v", id, counts, costs)
				return
			}
		}
	}()
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			counts := make([]int64, len(slots))
			for n := range calls {
				id := hot[(w+n)%len(hot)]
				var err error
				switch n % 5 {
				case 0:
					_, err = s.Update(ctx, id, slots, counts, costs, admitAll{})
				case 1:
					err = s.Add(ctx, id, slots, costs)
				case 2:
					_, err = s.AddIf(ctx, id, []kvstore.Cond{{Slot: slots[len(slots)-1], Max: 1 << 40, Add: 1}}, counts[:1])
					if err == nil {
						err = s.Add(ctx, id, slots[:len(slots)-1], costs[:len(slots)-1])
					}
				case 3:
					err = s.Add(ctx, id, []kvstore.Slot{lagging}, []int64{1})
					if err == nil {
						err = s.Add(ctx, id, slots, costs)
					}
				case 4:
					for _, r := range rules {
						if _, _, _, err = s.UpdateRule(ctx, id, r, r.At(t0), 1); err != nil {
							break
						}
					}
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	// Every write counted 1 in every rule of one identity.
	want := map[string]int64{}
	for w := range writers {
		for n := range calls {
			want[hot[(w+n)%len(hot)]]++
		}
	}
	for _, id := range hot {
		counts := make([]int64, len(slots))
		if err := s.Load(ctx, id, slots, counts); err != nil {
			t.Fatal(err)
		}
		for r, c := range counts {
			if c != want[id] {
				t.Errorf("%s, rule %d: %d, want %d", id, r, c, want[id])
			}
		}
		sh, k := s.shard(id)
		sh.mu.Lock()
		if sl := slotOf(sh, k); sl == nil || sh.cellsOf(sl) == nil {
			t.Errorf("%s has no cells", id)
		}
		sh.mu.Unlock()
	}
}
