package memstore

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/slidegate/slidegate/kvstore"
)

// TestEvictionTieGoesToTheOldest: of two identities that count the same
// per unit of time, a full shard evicts the one whose counters are older
// (last counted a minute ago), not the one counting now.
func TestEvictionTieGoesToTheOldest(t *testing.T) {
	s := NewLimited(2 * shardCount)
	ids := sameShard(s, 3)
	older, recent, newcomer := ids[0], ids[1], ids[2]
	addAll(t, s, []write{
		{older, minuteSlot(t0.Add(-time.Minute)), 3},
		{recent, minuteSlot(t0), 3},
		{newcomer, minuteSlot(t0), 3},
	})
	expectLoad(t, s, older, minuteSlot(t0.Add(-time.Minute)), 0)
	expectLoad(t, s, recent, minuteSlot(t0), 3)
	expectLoad(t, s, newcomer, minuteSlot(t0), 3)
}

// TestEvictionWeighsSaturatedCounts: an identity whose counts are at the
// top of an int64 (a client punished with count_denied at the largest cost
// and limit: Add saturates) outweighs one with a few counts. Its pair's
// previous and current counts were summed in an int64, which wrapped
// negative: the heaviest identity was evicted first, its counts wiped.
func TestEvictionWeighsSaturatedCounts(t *testing.T) {
	s := NewLimited(2 * shardCount)
	ids := sameShard(s, 3)
	punished, light, newcomer := ids[0], ids[1], ids[2]
	addAll(t, s, []write{
		{punished, minuteSlot(t0.Add(-time.Minute)), math.MaxInt64},
		{punished, minuteSlot(t0), 1},
		{light, minuteSlot(t0), 3},
		{newcomer, minuteSlot(t0), 3},
	})
	expectLoad(t, s, punished, minuteSlot(t0.Add(-time.Minute)), math.MaxInt64)
	expectLoad(t, s, light, minuteSlot(t0), 0)
	expectLoad(t, s, newcomer, minuteSlot(t0), 3)
}

// TestTakingBackFromAnUnknownIdentityEvictsNothing: a refund for an
// identity a full store no longer holds (expired, or evicted) does
// nothing: it neither brings the identity back nor evicts another, whose
// counts would be lost.
func TestTakingBackFromAnUnknownIdentityEvictsNothing(t *testing.T) {
	ctx := context.Background()
	s := NewLimited(2 * shardCount)
	ids := sameShard(s, 3)
	held, gone := ids[:2], ids[2]
	for _, id := range held {
		if err := s.Add(ctx, id, []kvstore.Slot{minuteSlot(t0)}, []int64{5}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Add(ctx, gone, []kvstore.Slot{minuteSlot(t0)}, []int64{-1}); err != nil {
		t.Fatal(err)
	}
	if n := s.Evicted(); n != 0 {
		t.Errorf("Evicted = %d after taking back from an identity not held; want 0", n)
	}
	for _, id := range held {
		expectLoad(t, s, id, minuteSlot(t0), 5)
	}
	expectLoad(t, s, gone, minuteSlot(t0), 0)
}

// sameShard returns n identities that s keeps in one shard, so that a
// shard's bound is reached with few of them.
func sameShard(s *Store, n int) []string {
	var ids []string
	sh0, _ := s.shard("x")
	for i := 0; len(ids) < n; i++ {
		if id := fmt.Sprint("id-", i); func() bool { sh, _ := s.shard(id); return sh == sh0 }() {
			ids = append(ids, id)
		}
	}
	return ids
}

// write is one Add of cost to one slot of id.
type write struct {
	id   string
	sl   kvstore.Slot
	cost int64
}

// addAll makes the writes in order.
func addAll(t *testing.T, s *Store, ws []write) {
	t.Helper()
	for _, w := range ws {
		if err := s.Add(context.Background(), w.id, []kvstore.Slot{w.sl}, []int64{w.cost}); err != nil {
			t.Fatal(err)
		}
	}
}
