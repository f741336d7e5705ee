package dynamostore

import (
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/slidegate/slidegate/kvstore"
	"github.com/slidegate/slidegate/window"
)

// shardCount spreads identities over independently locked maps.
const shardCount = 64

// sweepEvery is how much observed time passes between two sweeps of a full
// shard for expired identities.
const sweepEvery = time.Second

// cache keeps, per identity, the counters of the last item DynamoDB returned.
// Its values only ever come from the server, or are lowered by an undo whose
// answer was lost (lower), so they are lower bounds of the stored counts
// (counters grow within their bucket), except that an undo (a negative Add;
// another instance's, or one of this Store's that overlapped other calls of
// the identity) can leave a cached count above the truth by the undone
// amount, which errs towards denial, until the answer to a call of the
// identity that overlapped no other replaces the counts (see call): the
// next write of a Lambda instance, which serves one request at a time.
// Merged by maximum instead, the count stayed above the table's until the
// bucket stopped being read, and the limiter refused on it, as final,
// requests the table had room for.
//
// The cache reads no clock: the latest bucket start it has been asked about is
// its time. An identity whose TTL has passed is dropped when its shard is full;
// when nothing has expired an arbitrary identity makes room, which only costs
// that identity one conditional write that fails and returns its counts.
type cache struct {
	seed   maphash.Seed
	limit  int // identities per shard
	shards [shardCount]cacheShard
}

type cacheShard struct {
	mu        sync.Mutex
	m         map[string]*entry
	now       time.Time
	nextSweep time.Time
	// calls holds the identities with a call to DynamoDB in flight.
	calls map[string]*flight
}

// flight counts the calls of one identity in flight.
type flight struct {
	n     int    // calls in flight
	begun uint64 // calls begun since the entry was made
}

// call is one call of the Store to DynamoDB for an identity (a write,
// with the read after its failed condition, or a read). Its answer is the
// newest state of the item the Store knows when no other call of the
// identity was in flight at any time during it: every answer cached
// before came from a call that ended before it began. Such an answer
// replaces the cached counts; one that overlapped another call may be
// older than that call's and is merged by maximum.
type call struct {
	alone bool   // no other call of the identity in flight when it began
	nth   uint64 // its number among the calls of its flight entry
	ended bool
}

type entry struct {
	cells []cell
	ttl   int64 // Unix seconds
}

// cell is one counter attribute, parsed from its name.
type cell struct {
	attr   string
	name   string // rule name, a substring of attr
	length time.Duration
	bucket int64
	count  int64
}

func newCache(size int) *cache {
	c := &cache{seed: maphash.MakeSeed(), limit: max(1, size/shardCount)}
	for i := range c.shards {
		c.shards[i].m = make(map[string]*entry)
		c.shards[i].calls = make(map[string]*flight)
	}
	return c
}

func (c *cache) shard(id string) *cacheShard {
	return &c.shards[maphash.String(c.seed, id)%shardCount]
}

// observe advances the shard's clock to the start of the newest slot seen.
func (sh *cacheShard) observe(sl kvstore.Slot) {
	if t := window.Start(sl.Bucket, sl.Length); t.After(sh.now) {
		sh.now = t
	}
}

// load sets counts[i] to the cached count of slots[i], zero when unknown.
func (c *cache) load(id string, slots []kvstore.Slot, counts []int64) {
	sh := c.shard(id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	var cells []cell
	if e := sh.m[id]; e != nil {
		cells = e.cells
	}
	for i, sl := range slots {
		sh.observe(sl)
		counts[i] = find(cells, sl)
	}
}

// find returns the count of sl in cells, zero when absent.
func find(cells []cell, sl kvstore.Slot) int64 {
	for _, c := range cells {
		if c.bucket == sl.Bucket && c.length == sl.Length && c.name == sl.Name {
			return c.count
		}
	}
	return 0
}

// stale returns the cached attributes of id that belong to a rule in conds
// but to a bucket more than two before the newest bucket conds name for
// that rule: nothing reads them any more, even on a node whose clock lags
// by up to one bucket. It also returns the cached TTL, so that a write never
// shortens it.
func (c *cache) stale(id string, conds []kvstore.Cond) ([]string, int64) {
	sh := c.shard(id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for _, cd := range conds {
		sh.observe(cd.Slot)
	}
	e := sh.m[id]
	if e == nil {
		return nil, 0
	}
	var old []string
	for _, cl := range e.cells {
		newest, ours := int64(0), false
		for _, cd := range conds {
			if cd.Name == cl.name && cd.Length == cl.length && (!ours || cd.Bucket > newest) {
				newest, ours = cd.Bucket, true
			}
		}
		// Keep two buckets before the newest: a writer whose clock runs
		// ahead is in bucket i+1 while another node in bucket i still
		// reads i-1 as its previous bucket.
		if ours && cl.bucket < newest-2 {
			old = append(old, cl.attr)
		}
	}
	return old, e.ttl
}

// lower adds the negative Adds of conds to id's cached counts, never below
// zero: an undo whose outcome is unknown, which keeps them lower bounds
// whether DynamoDB applied it or not.
func (c *cache) lower(id string, conds []kvstore.Cond) {
	sh := c.shard(id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.m[id]
	if e == nil {
		return
	}
	cells := slices.Clone(e.cells) // a returned item may share the array
	for _, cd := range conds {
		if cd.Add >= 0 {
			continue
		}
		for i, cl := range cells {
			if cl.bucket == cd.Bucket && cl.length == cd.Length && cl.name == cd.Name {
				cells[i].count = max(cl.count+cd.Add, 0)
			}
		}
	}
	sh.m[id] = &entry{cells: cells, ttl: e.ttl}
}

// raiseTTL raises id's cached TTL to ttl, when it is cached with a lower
// one, so that the Store's next write of id sets it (keepTTL).
func (c *cache) raiseTTL(id string, ttl int64) {
	sh := c.shard(id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e := sh.m[id]; e != nil && e.ttl < ttl {
		sh.m[id] = &entry{cells: e.cells, ttl: ttl}
	}
}

// begin notes a call to DynamoDB for id; end or settle must follow.
func (c *cache) begin(id string) call {
	sh := c.shard(id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	f := sh.calls[id]
	if f == nil {
		f = &flight{}
		sh.calls[id] = f
	}
	f.begun++
	f.n++
	return call{alone: f.n == 1, nth: f.begun}
}

// end notes that cl has ended and reports whether it overlapped no other
// call of id. It does nothing for a call ended already. The shard's lock
// must be held.
func (sh *cacheShard) end(id string, cl *call) bool {
	if cl.ended {
		return false
	}
	cl.ended = true
	f := sh.calls[id]
	alone := cl.alone && f.begun == cl.nth
	if f.n--; f.n == 0 {
		delete(sh.calls, id)
	}
	return alone
}

// end notes that cl, a call that cached nothing, has ended.
func (c *cache) end(id string, cl *call) {
	sh := c.shard(id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.end(id, cl)
}

// settle ends cl, caches item, its answer, for id and returns its
// counters: replacing the cached counts when cl overlapped no other call
// of id or undo is set (an undo lowers counts, which merging would undo),
// else merging them (answers to concurrent calls can arrive out of order).
// A nil item (no such identity) caches nothing, and drops the cached
// entry when cl overlapped no other call.
func (c *cache) settle(id string, cl *call, item map[string]types.AttributeValue, undo bool) ([]cell, error) {
	e, err := parseItem(item)
	if err != nil {
		c.end(id, cl)
		return nil, err
	}
	sh := c.shard(id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	alone := sh.end(id, cl)
	if e == nil {
		if alone {
			delete(sh.m, id) // the item is gone (expired, or deleted by hand)
		}
		return nil, nil
	}
	return sh.put(id, e, !undo && !alone, c.limit), nil
}

// parseItem parses a returned item; nil for none.
func parseItem(item map[string]types.AttributeValue) (*entry, error) {
	if item == nil {
		return nil, nil
	}
	e := &entry{cells: make([]cell, 0, len(item))}
	for a, v := range item {
		switch a {
		case KeyAttribute:
			continue
		case TTLAttribute:
			n, err := parseNumber(a, v)
			if err != nil {
				return nil, err
			}
			e.ttl = n
			continue
		}
		cl, ok := parseAttr(a)
		if !ok {
			continue // not a counter: leave it alone
		}
		n, err := parseNumber(a, v)
		if err != nil {
			return nil, err
		}
		cl.count = n
		e.cells = append(e.cells, cl)
	}
	return e, nil
}

// put caches e for id, merged with the cached entry or replacing its
// counters (see settle), and returns e's counters. The shard's lock must be held.
func (sh *cacheShard) put(id string, e *entry, merge bool, limit int) []cell {
	if prev := sh.m[id]; prev != nil {
		if merge {
			merged := make([]cell, len(e.cells))
			copy(merged, e.cells)
			for i, cl := range merged {
				for _, p := range prev.cells {
					if p.attr == cl.attr && p.count > cl.count {
						merged[i].count = p.count
					}
				}
			}
			sh.m[id] = &entry{cells: merged, ttl: max(e.ttl, prev.ttl)}
		} else {
			// The counts are replaced, not the TTL: an item's TTL is never
			// lowered by this Store (its writes set at least the cached
			// one), so a lower one is another writer's, whose shorter
			// rules do not say when this Store's longer ones expire.
			sh.m[id] = &entry{cells: e.cells, ttl: max(e.ttl, prev.ttl)}
		}
		return e.cells
	}
	if len(sh.m) >= limit {
		sh.evict(limit)
	}
	sh.m[id] = e
	return e.cells
}

// evict makes room for one identity: expired ones first (at most one sweep
// per sweepEvery of observed time), else an arbitrary one.
func (sh *cacheShard) evict(limit int) {
	if !sh.now.Before(sh.nextSweep) {
		sh.nextSweep = sh.now.Add(sweepEvery)
		now := sh.now.Unix()
		for id, e := range sh.m {
			if e.ttl <= now {
				delete(sh.m, id)
			}
		}
	}
	if len(sh.m) < limit {
		return
	}
	for id := range sh.m {
		delete(sh.m, id)
		return
	}
}

// parseAttr splits "<rule>#<length>#<bucket>".
func parseAttr(a string) (cell, bool) {
	j := strings.LastIndexByte(a, '#')
	if j <= 0 {
		return cell{}, false
	}
	i := strings.LastIndexByte(a[:j], '#')
	if i <= 0 {
		return cell{}, false
	}
	b, err := strconv.ParseInt(a[j+1:], 10, 64)
	if err != nil {
		return cell{}, false
	}
	d, err := time.ParseDuration(a[i+1 : j])
	if err != nil || d <= 0 {
		return cell{}, false
	}
	return cell{attr: a, name: a[:i], length: d, bucket: b}, true
}

// parseNumber reads the number attribute a, v, saturated to int64.
func parseNumber(a string, v types.AttributeValue) (int64, error) {
	n, ok := v.(*types.AttributeValueMemberN)
	if !ok {
		return 0, fmt.Errorf("%w: attribute %q is not a number", ErrItem, a)
	}
	x, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, fmt.Errorf("%w: attribute %q: %v", ErrItem, a, err)
	}
	// Beyond int64, x is the bound nearer it: a count stops at
	// math.MaxInt64, as the memory store's does. DynamoDB adds without a
	// bound (count_denied's adds racing near the top took a counter past
	// it), and the item failed every read, a store error, until it expired.
	return x, nil
}
