// Package storetest is the conformance suite every kvstore backend runs from
// its own tests:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) kvstore.Store { return memstore.New() })
//	}
//
// Stores that implement kvstore.Conditional also get the atomicity tests.
package storetest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slidegate/slidegate/kvstore"
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

	t.Run("AddIfExactUnderConcurrency", func(t *testing.T) {
		// 200 clients race for 150 units: exactly 150 win and the stored
		// count is 150.
		s := cond(t)
		const clients, limit = 200, 150
		var admitted atomic.Int64
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make(chan error, clients)
		for range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				counts := make([]int64, 2)
				ok, err := s.AddIf(ctx, "hot", []kvstore.Cond{
					{Slot: slot("minute", bucket), Max: limit - 1, Add: 1},
					{Slot: slot("day", bucket), Max: 1000, Add: 1},
				}, counts)
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
			t.Fatalf("AddIf: %v", err)
		}
		if got := admitted.Load(); got != limit {
			t.Errorf("admitted %d of %d, want %d", got, clients, limit)
		}
		expectCounts(t, s, "hot", []kvstore.Slot{slot("minute", bucket), slot("day", bucket)}, limit, limit)
	})
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
