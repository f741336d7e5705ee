package limiter

import (
	"hash/maphash"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slidegate/slidegate/window"
)

const denyShards = 64

// denyCache remembers identities that are blocked, with the counts they
// were denied on, so that later requests are answered exactly (any cost) by
// window math alone until a request of cost 1 could be admitted. Nothing
// else is counted for the identity meanwhile, so the remembered counts stay
// a lower bound of the truth and a remembered denial stays a true one.
type denyCache struct {
	size   atomic.Int64 // identities held; zero lets lookups skip hashing
	seed   maphash.Seed
	perMap int
	shards [denyShards]denyShard
}

type denyShard struct {
	n  atomic.Int32 // len(m): lets a probe of an empty shard skip the lock
	mu sync.Mutex
	m  map[string]*denial
}

type denial struct {
	until int64 // Unix nanos: a cost-1 request is admitted from then on
	n     int
	rules [MaxRules]struct {
		name          string
		limit         int64
		period        time.Duration
		bucket        int64
		prev, current int64
	}
}

func newDenyCache(size int) *denyCache {
	if size <= 0 {
		size = 1 << 16
	}
	// Shards make their maps on first use: most limiters never deny.
	return &denyCache{seed: maphash.MakeSeed(), perMap: max(size/denyShards, 1)}
}

func (c *denyCache) shard(id string) *denyShard {
	return &c.shards[maphash.String(c.seed, id)%denyShards]
}

// answer fills res and reports true when id is remembered as blocked for
// these rules at now and the request of this cost is denied.
func (c *denyCache) answer(id string, now time.Time, rules []Rule, cost int64, res *Result) bool {
	if c.size.Load() == 0 {
		return false
	}
	sh := c.shard(id)
	if sh.n.Load() == 0 {
		return false
	}
	sh.mu.Lock()
	d := sh.m[id]
	if d == nil {
		sh.mu.Unlock()
		return false
	}
	if now.UnixNano() >= d.until || !d.matches(rules) {
		delete(sh.m, id)
		sh.n.Add(-1)
		c.size.Add(-1)
		sh.mu.Unlock()
		return false
	}
	for i, r := range rules {
		s := &d.rules[i]
		var prev, cur int64
		switch window.Index(now, r.Period) {
		case s.bucket:
			prev, cur = s.prev, s.current
		case s.bucket + 1:
			prev = s.current
		}
		res.Rules[i] = r.Decide(now, prev, cur, cost)
	}
	sh.mu.Unlock()
	res.Decision = window.Combine(res.All())
	if res.Allowed { // only a cost of 0 gets here: let the store answer
		return false
	}
	res.Cached = true
	return true
}

func (d *denial) matches(rules []Rule) bool {
	if d.n != len(rules) {
		return false
	}
	for i, r := range rules {
		if s := &d.rules[i]; s.name != r.Name || s.limit != r.Limit || s.period != r.Period {
			return false
		}
	}
	return true
}

// remember records that id was denied at now on the counts in sc.
func (c *denyCache) remember(id string, now time.Time, rules []Rule, sc *scratch) {
	var until time.Duration
	for i, r := range rules {
		until = max(until, r.Wait(now, sc.prev[i], sc.cur[i], r.Limit-1))
	}
	if until <= 0 {
		return
	}
	sh := c.shard(id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	d := sh.m[id]
	if d == nil {
		if len(sh.m) >= c.perMap {
			for k, old := range sh.m { // evict one at random: map order is random
				delete(sh.m, k)
				sh.n.Add(-1)
				c.size.Add(-1)
				d = old
				break
			}
		}
		if d == nil {
			d = new(denial)
		}
		if sh.m == nil {
			sh.m = make(map[string]*denial)
		}
		sh.m[strings.Clone(id)] = d
		sh.n.Add(1)
		c.size.Add(1)
	}
	d.until = now.UnixNano() + int64(until)
	d.n = len(rules)
	for i, r := range rules {
		s := &d.rules[i]
		s.name, s.limit, s.period = r.Name, r.Limit, r.Period
		s.bucket, s.prev, s.current = window.Index(now, r.Period), sc.prev[i], sc.cur[i]
	}
}
