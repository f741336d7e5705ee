// Package storetest is the conformance suite every kvstore backend runs from
// its own tests:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) kvstore.Store { return memstore.New() })
//	}
//
// Stores that implement kvstore.Conditional also get the atomicity tests,
// and kvstore.RuleUpdater stores the tests of UpdateRule.
package storetest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slidegate/slidegate/kvstore"
	"github.com/slidegate/slidegate/window"
)

// Minute is the slot length the suite uses unless a test says otherwise.
const Minute = time.Minute

// bucket is an arbitrary current bucket index (2026-11-22 12:00 UTC).
var bucket = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC).UnixNano() / int64(Minute)

func slot(name string, b int64) kvstore.Slot {
	return kvstore.Slot{Name: name, Bucket: b, Length: Minute}
}

// Run runs the suite. newStore must return an empty store each call; it may
// register cleanups on t.
func Run(t *testing.T, newStore func(t *testing.T) kvstore.Store) {
	t.Helper()
	ctx := context.Background()

	t.Run("LoadMissingIsZero", func(t *testing.T) {
		s := newStore(t)
		counts := []int64{-1, -1}
		if err := s.Load(ctx, "id-a", []kvstore.Slot{slot("minute", bucket-1), slot("minute", bucket)}, counts); err != nil {
			t.Fatalf("Load: %v", err)
		}
		for i, c := range counts {
			if c != 0 {
				t.Errorf("counts[%d] = %d, want 0", i, c)
			}
		}
	})

	t.Run("AddThenLoad", func(t *testing.T) {
		s := newStore(t)
		slots := []kvstore.Slot{slot("minute", bucket), {Name: "day", Bucket: bucket / 1440, Length: 24 * time.Hour}}
		for range 3 {
			if err := s.Add(ctx, "id-a", slots, []int64{2, 5}); err != nil {
				t.Fatalf("Add: %v", err)
			}
		}
		expectCounts(t, s, "id-a", slots, 6, 15)
	})

	t.Run("KeysAreIndependent", func(t *testing.T) {
		s := newStore(t)
		mustAdd(t, s, "id-a", slot("minute", bucket), 3)
		mustAdd(t, s, "id-b", slot("minute", bucket), 4)
		mustAdd(t, s, "id-a", slot("minute", bucket-1), 5)
		mustAdd(t, s, "id-a", slot("hour", bucket), 6)
		expectCounts(t, s, "id-a", []kvstore.Slot{slot("minute", bucket), slot("minute", bucket-1), slot("hour", bucket), slot("minute", bucket+1)}, 3, 5, 6, 0)
		expectCounts(t, s, "id-b", []kvstore.Slot{slot("minute", bucket), slot("minute", bucket-1)}, 4, 0)
	})

	t.Run("NegativeAddUndoes", func(t *testing.T) {
		s := newStore(t)
		mustAdd(t, s, "id-a", slot("minute", bucket), 5)
		mustAdd(t, s, "id-a", slot("minute", bucket), -2)
		expectCounts(t, s, "id-a", []kvstore.Slot{slot("minute", bucket)}, 3)
	})

	t.Run("RollOverKeepsPrevious", func(t *testing.T) {
		s := newStore(t)
		for b := bucket; b < bucket+4; b++ {
			mustAdd(t, s, "id-a", slot("minute", b), b-bucket+1)
			expectCounts(t, s, "id-a", []kvstore.Slot{slot("minute", b-1), slot("minute", b)}, max(b-bucket, 0), b-bucket+1)
		}
	})

	// A write for an older bucket (a node whose clock lags, a request
	// decided before another's) counts there and leaves the newer
	// buckets alone; a bucket stays readable until it expires, two
	// periods after it began, however late it was written.
	t.Run("LaggingWriteKeepsNewer", func(t *testing.T) {
		s := newStore(t)
		mustAdd(t, s, "id-a", slot("minute", bucket+1), 5)
		mustAdd(t, s, "id-a", slot("minute", bucket), 3)
		mustAdd(t, s, "id-a", slot("minute", bucket-1), 2) // before the pair of a two-bucket store
		mustAdd(t, s, "id-a", slot("minute", bucket+1), 1)
		expectCounts(t, s, "id-a", []kvstore.Slot{slot("minute", bucket-1), slot("minute", bucket), slot("minute", bucket+1)}, 2, 3, 6)
		mustAdd(t, s, "id-a", slot("minute", bucket+2), 4)
		expectCounts(t, s, "id-a", []kvstore.Slot{slot("minute", bucket+1), slot("minute", bucket+2)}, 6, 4)
	})

	if _, ok := newStore(t).(kvstore.Conditional); !ok {
		return
	}
	cond := func(t *testing.T) kvstore.Conditional { return newStore(t).(kvstore.Conditional) }

	t.Run("AddIfApplies", func(t *testing.T) {
		s := cond(t)
		mustAdd(t, s, "id-a", slot("minute", bucket-1), 7)
		conds := []kvstore.Cond{
			{Slot: slot("minute", bucket-1), Max: 7},
			{Slot: slot("minute", bucket), Max: 10, Add: 3},
			{Slot: slot("day", bucket), Max: 100, Add: 3},
		}
		counts := make([]int64, len(conds))
		ok, err := s.AddIf(ctx, "id-a", conds, counts)
		if err != nil || !ok {
			t.Fatalf("AddIf = %v, %v; want true, nil", ok, err)
		}
		if got, want := fmt.Sprint(counts), "[7 3 3]"; got != want {
			t.Errorf("counts after = %s, want %s", got, want)
		}
	})

	t.Run("AddIfFailsWhole", func(t *testing.T) {
		s := cond(t)
		mustAdd(t, s, "id-a", slot("minute", bucket), 4)
		mustAdd(t, s, "id-a", slot("day", bucket), 9)
		conds := []kvstore.Cond{
			{Slot: slot("minute", bucket), Max: 10, Add: 1},
			{Slot: slot("day", bucket), Max: 8, Add: 1}, // 9 > 8: the whole add fails
		}
		counts := make([]int64, len(conds))
		ok, err := s.AddIf(ctx, "id-a", conds, counts)
		if err != nil || ok {
			t.Fatalf("AddIf = %v, %v; want false, nil", ok, err)
		}
		if got, want := fmt.Sprint(counts), "[4 9]"; got != want {
			t.Errorf("counts reported = %s, want current %s", got, want)
		}
		expectCounts(t, s, "id-a", []kvstore.Slot{slot("minute", bucket), slot("day", bucket)}, 4, 9)
	})

	t.Run("AddIfOnMissingCreates", func(t *testing.T) {
		s := cond(t)
		counts := make([]int64, 2)
		ok, err := s.AddIf(ctx, "fresh", []kvstore.Cond{{Slot: slot("minute", bucket-1), Max: 0}, {Slot: slot("minute", bucket), Max: 0, Add: 1}}, counts)
		if err != nil || !ok {
			t.Fatalf("AddIf = %v, %v; want true, nil", ok, err)
		}
		expectCounts(t, s, "fresh", []kvstore.Slot{slot("minute", bucket)}, 1)
	})

	// A negative Max cannot hold, not even for a missing counter, which is
	// zero.
	t.Run("AddIfNegativeMaxFails", func(t *testing.T) {
		s := cond(t)
		mustAdd(t, s, "id-a", slot("minute", bucket), 2)
		for _, id := range []string{"fresh", "id-a"} {
			counts := make([]int64, 2)
			ok, err := s.AddIf(ctx, id, []kvstore.Cond{
				{Slot: slot("minute", bucket), Max: 10, Add: 1},
				{Slot: slot("hour", bucket), Max: -1, Add: 1},
			}, counts)
			if err != nil || ok {
				t.Fatalf("%s: AddIf = %v, %v; want false, nil", id, ok, err)
			}
			want := map[string]string{"fresh": "[0 0]", "id-a": "[2 0]"}[id]
			if got := fmt.Sprint(counts); got != want {
				t.Errorf("%s: counts reported = %s, want %s", id, got, want)
			}
		}
		expectCounts(t, s, "fresh", []kvstore.Slot{slot("minute", bucket), slot("hour", bucket)}, 0, 0)
		expectCounts(t, s, "id-a", []kvstore.Slot{slot("minute", bucket), slot("hour", bucket)}, 2, 0)
	})

	t.Run("AddIfExactUnderConcurrency", func(t *testing.T) {
		// 200 clients race for 150 units: exactly 150 win and the stored
		// count is 150.
		s := cond(t)
		const clients, limit = 200, 150
		admitted := race(t, clients, func() (bool, error) {
			return s.AddIf(ctx, "hot", []kvstore.Cond{
				{Slot: slot("minute", bucket), Max: limit - 1, Add: 1},
				{Slot: slot("day", bucket), Max: 1000, Add: 1},
			}, make([]int64, 2))
		})
		if admitted != limit {
			t.Errorf("admitted %d of %d, want %d", admitted, clients, limit)
		}
		expectCounts(t, s, "hot", []kvstore.Slot{slot("minute", bucket), slot("day", bucket)}, limit, limit)
	})

	if _, ok := newStore(t).(kvstore.RuleUpdater); !ok {
		return
	}
	ru := func(t *testing.T) kvstore.RuleUpdater { return newStore(t).(kvstore.RuleUpdater) }
	rule := window.Rule{Name: "minute", Limit: 10, Period: Minute}
	// Half way through the bucket: the previous bucket weighs one half.
	half := window.Pos{Index: bucket, Elapsed: Minute / 2}

	t.Run("UpdateRuleAdmitsUpToLimit", func(t *testing.T) {
		s := ru(t)
		mustAdd(t, s, "id-a", slot("minute", bucket-1), 8) // floor(8 × 1/2) = 4
		mustAdd(t, s, "id-a", slot("hour", bucket), 100)   // another rule: not counted
		for i := range int64(6) {
			prev, cur, ok, err := s.UpdateRule(ctx, "id-a", rule, half, 1)
			if err != nil || !ok || prev != 8 || cur != i {
				t.Fatalf("request %d: UpdateRule = %d, %d, %v, %v; want 8, %d, true, nil", i+1, prev, cur, ok, err, i)
			}
		}
		prev, cur, ok, err := s.UpdateRule(ctx, "id-a", rule, half, 1)
		if err != nil || ok || prev != 8 || cur != 6 {
			t.Fatalf("7th: UpdateRule = %d, %d, %v, %v; want 8, 6, false, nil", prev, cur, ok, err)
		}
		expectCounts(t, s, "id-a", []kvstore.Slot{slot("minute", bucket-1), slot("minute", bucket), slot("hour", bucket)}, 8, 6, 100)
	})

	t.Run("UpdateRuleRollsOver", func(t *testing.T) {
		s := ru(t)
		for b := bucket; b < bucket+4; b++ {
			prev, cur, ok, err := s.UpdateRule(ctx, "id-a", rule, window.Pos{Index: b}, 3)
			if want := int64(min(b-bucket, 1) * 3); err != nil || !ok || prev != want || cur != 0 {
				t.Fatalf("bucket +%d: UpdateRule = %d, %d, %v, %v; want %d, 0, true, nil", b-bucket, prev, cur, ok, err, want)
			}
		}
	})

	t.Run("UpdateRuleDenialChangesNothing", func(t *testing.T) {
		s := ru(t)
		if _, _, ok, err := s.UpdateRule(ctx, "fresh", rule, half, rule.Limit+1); err != nil || ok {
			t.Fatalf("cost over the limit: ok = %v, %v; want false, nil", ok, err)
		}
		expectCounts(t, s, "fresh", []kvstore.Slot{slot("minute", bucket-1), slot("minute", bucket)}, 0, 0)
	})

	t.Run("UpdateRuleExactUnderConcurrency", func(t *testing.T) {
		s := ru(t)
		const clients, limit = 200, 150
		r := window.Rule{Name: "minute", Limit: limit, Period: Minute}
		admitted := race(t, clients, func() (bool, error) {
			_, _, ok, err := s.UpdateRule(ctx, "hot", r, half, 1)
			return ok, err
		})
		if admitted != limit {
			t.Errorf("admitted %d of %d, want %d", admitted, clients, limit)
		}
		expectCounts(t, s, "hot", []kvstore.Slot{slot("minute", bucket)}, limit)
	})
}

// race starts clients goroutines at once, each calling try once, and
// returns how many were admitted.
func race(t *testing.T, clients int, try func() (bool, error)) int64 {
	t.Helper()
	var admitted atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make(chan error, clients)
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			ok, err := try()
			if err != nil {
				errs <- err
				return
			}
			if ok {
				admitted.Add(1)
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return admitted.Load()
}

func mustAdd(t *testing.T, s kvstore.Store, id string, sl kvstore.Slot, cost int64) {
	t.Helper()
	if err := s.Add(context.Background(), id, []kvstore.Slot{sl}, []int64{cost}); err != nil {
		t.Fatalf("Add(%s, %+v, %d): %v", id, sl, cost, err)
	}
}

func expectCounts(t *testing.T, s kvstore.Store, id string, slots []kvstore.Slot, want ...int64) {
	t.Helper()
	got := make([]int64, len(slots))
	if err := s.Load(context.Background(), id, slots, got); err != nil {
		t.Fatalf("Load(%s): %v", id, err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Load(%s) = %v, want %v", id, got, want)
	}
}
