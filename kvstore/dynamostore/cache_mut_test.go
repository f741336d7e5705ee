package dynamostore

import (
	"maps"
	"testing"
	"time"

	"github.com/slidegate/slidegate/kvstore"
)

// TestCacheLower: an undo whose outcome is unknown lowers the cached
// count of exactly the counter it names (name, bucket and length), by its
// negative cost and never below zero, leaves the other counters (the
// rule's previous bucket among them) and the cached TTL as they were, and
// does not raise a counter for a positive cost. Hand mutations of each of
// these went unseen: the undo tests run on dynalite with one counter.
func TestCacheLower(t *testing.T) {
	const ttl = 1 << 40
	cur := kvstore.Slot{Name: "minute", Bucket: 200, Length: time.Minute}
	prev := kvstore.Slot{Name: "minute", Bucket: 199, Length: time.Minute}
	hour := kvstore.Slot{Name: "minute", Bucket: 200, Length: time.Hour} // same name and bucket, another length
	low := kvstore.Slot{Name: "burst", Bucket: 200, Length: time.Minute}
	up := kvstore.Slot{Name: "day", Bucket: 200, Length: 24 * time.Hour}
	item := counter(attrName(cur), 5, ttl)
	for sl, n := range map[kvstore.Slot]int64{prev: 7, hour: 9, low: 1, up: 4} {
		maps.Copy(item, counter(attrName(sl), n, ttl))
	}
	c := newCache(2 * shardCount)
	if _, err := cacheItem(c, "k", item); err != nil {
		t.Fatal(err)
	}
	c.lower("k", []kvstore.Cond{
		{Slot: cur, Add: -2},
		{Slot: low, Add: -3},
		{Slot: up, Add: 2},
	})
	slots := []kvstore.Slot{cur, prev, hour, low, up}
	got := make([]int64, len(slots))
	c.load("k", slots, got)
	for i, want := range []int64{3, 7, 9, 0, 4} {
		if got[i] != want {
			t.Errorf("%s (bucket %d, %s): cached %d, want %d", slots[i].Name, slots[i].Bucket, slots[i].Length, got[i], want)
		}
	}
	if _, gotTTL := c.stale("k", []kvstore.Cond{{Slot: cur}}); gotTTL != ttl {
		t.Errorf("cached TTL %d after lower, want %d (kept: a write never shortens it)", gotTTL, ttl)
	}
	c.lower("absent", []kvstore.Cond{{Slot: cur, Add: -1}}) // nothing cached: nothing to lower
	c.load("absent", slots[:1], got)
	if got[0] != 0 {
		t.Errorf("absent identity: cached %d, want 0", got[0])
	}
}
