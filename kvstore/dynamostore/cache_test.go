package dynamostore

import (
	"maps"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/slidegate/slidegate/kvstore"
)

func counter(attr string, n int64, ttl int64) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		attr:         &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)},
		TTLAttribute: &types.AttributeValueMemberN{Value: strconv.FormatInt(ttl, 10)},
	}
}

// cacheItem caches item for id as the answer of a call that overlapped no
// other.
func cacheItem(c *cache, id string, item map[string]types.AttributeValue) ([]cell, error) {
	cl := c.begin(id)
	return c.settle(id, &cl, item, false)
}

func TestCacheBounded(t *testing.T) {
	c := newCache(2 * shardCount) // two identities per shard
	sl := kvstore.Slot{Name: "minute", Bucket: 100, Length: time.Minute}
	attr := attrName(sl)
	for i := range 1000 {
		if _, err := cacheItem(c, "id"+strconv.Itoa(i), counter(attr, 1, 1<<40)); err != nil {
			t.Fatal(err)
		}
	}
	total := 0
	for i := range c.shards {
		total += len(c.shards[i].m)
	}
	if total > 2*shardCount {
		t.Errorf("cache holds %d identities, want at most %d", total, 2*shardCount)
	}
}

func TestCacheEvictsExpiredFirst(t *testing.T) {
	c := newCache(2 * shardCount)
	// Find three identities of one shard.
	var ids []string
	for i := 0; len(ids) < 3; i++ {
		id := "id" + strconv.Itoa(i)
		if len(ids) == 0 || c.shard(id) == c.shard(ids[0]) {
			ids = append(ids, id)
		}
	}
	old := kvstore.Slot{Name: "minute", Bucket: 100, Length: time.Minute}
	cur := kvstore.Slot{Name: "minute", Bucket: 200, Length: time.Minute}
	mustStore := func(id string, sl kvstore.Slot) {
		t.Helper()
		if _, err := cacheItem(c, id, counter(attrName(sl), 1, expiry(sl))); err != nil {
			t.Fatal(err)
		}
	}
	mustStore(ids[0], cur)
	mustStore(ids[1], old)
	c.load(ids[0], []kvstore.Slot{cur}, make([]int64, 1)) // the shard has seen bucket 200
	mustStore(ids[2], cur)
	got := make([]int64, 1)
	for i, want := range []int64{1, 0, 1} {
		sl := cur
		if i == 1 {
			sl = old
		}
		c.load(ids[i], []kvstore.Slot{sl}, got)
		if got[0] != want {
			t.Errorf("identity %d: count %d, want %d (the expired one goes first)", i, got[0], want)
		}
	}
}

func TestParseAttr(t *testing.T) {
	tests := []struct {
		attr string
		ok   bool
		want cell
	}{
		{"minute#1m0s#29384720", true, cell{name: "minute", length: time.Minute, bucket: 29384720}},
		{"a#b#24h0m0s#-3", true, cell{name: "a#b", length: 24 * time.Hour, bucket: -3}},
		{"id", false, cell{}},
		{"#1m0s#3", false, cell{}},
		{"minute#1m0s#x", false, cell{}},
		{"minute#0s#1", false, cell{}},
		{"minute#soon#1", false, cell{}},
	}
	for _, tt := range tests {
		t.Run(tt.attr, func(t *testing.T) {
			got, ok := parseAttr(tt.attr)
			tt.want.attr = got.attr
			if ok != tt.ok || (ok && got != tt.want) {
				t.Errorf("parseAttr = %+v, %v; want %+v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func FuzzParseAttr(f *testing.F) {
	f.Add("minute#1m0s#29384720")
	f.Add("##")
	f.Fuzz(func(t *testing.T, a string) {
		c, ok := parseAttr(a)
		if !ok {
			return
		}
		if c.name == "" || c.length <= 0 {
			t.Fatalf("parseAttr(%q) accepted %+v", a, c)
		}
		again, ok := parseAttr(attrName(kvstore.Slot{Name: c.name, Bucket: c.bucket, Length: c.length}))
		if c.attr, again.attr = "", ""; !ok || again != c {
			t.Errorf("round trip of %q: %+v, then %+v, %v", a, c, again, ok)
		}
	})
}

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
