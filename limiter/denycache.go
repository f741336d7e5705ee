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
	// refunds counts the refunds of shared rules by the stamp of their
	// identity: a check reads its stamp's count before it reads the store,
	// and remembers a denial only if no refund of a like-stamped identity
	// came in between (the denial may have been decided on the cost taken
	// back, and forget ran before it was remembered).
	refunds [refundStamps]atomic.Uint64
	// ahead is the newest time seen before the last correction of the
	// clock (Unix nanoseconds): until checks reach it again, a bucket
	// after a remembered one may hold counts, and no denial decided at
	// or before it is remembered.
	ahead atomic.Int64
}

// refundStamps is the number of refund counters: identities share one by
// stamp, so that a refund holds back the denials of a few others only.
const refundStamps = 64

// stamp picks an identity's refund counter from its length and two of its
// bytes, without hashing it (checks read it on the hot path).
func stamp(id string) int {
	if id == "" {
		return 0
	}
	return (len(id)*31 + int(id[len(id)-1])*7 + int(id[len(id)/2])) % refundStamps
}

// generation is what a check reads before it reads the store, for
// remember.
func (c *denyCache) generation(id string) uint64 { return c.refunds[stamp(id)].Load() }

type denyShard struct {
	n  atomic.Int32 // len(m): lets a probe of an empty shard skip the lock
	mu sync.Mutex
	m  map[string]*denial
}

// denial is what the cache knows of one identity under one rule set. An
// identity checked with several rule sets (an anonymous client's ip_limits
// and its plan, both on its IP) has one denial per set, chained. A denial
// is dropped when a request of another set that shares a counter with it
// goes to the store (answer).
type denial struct {
	next  *denial
	until int64 // Unix nanos: a cost-1 request is admitted from then on
	n     int
	rules [MaxRules]struct {
		// Not comparable, so that the Worker's bundle carries no equality
		// function for it (docs/edge.md, "Size").
		_ [0]func()

		name          string
		local         bool
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

// any reports whether the cache holds an identity: while it holds none, a
// check skips hashing the identity.
func (c *denyCache) any() bool { return c.size.Load() != 0 }

// answer reports whether id is remembered as blocked for these rules at now
// and a request of this cost is denied. It then returns the deciding
// decision, having written each rule's to out (len(rules) of them). When
// it reports false, the decision and out mean nothing (a cost of 0 can be
// decided and still report false: the store answers those).
func (c *denyCache) answer(id string, now time.Time, rules []Rule, cost int64, out []window.Decision) (window.Decision, bool) {
	sh := c.shard(id)
	if sh.n.Load() == 0 {
		return window.Decision{}, false
	}
	sh.mu.Lock()
	d := sh.find(id, rules)
	if d == nil || now.UnixNano() >= d.until {
		// The request goes to the store, which may count it. A denial of
		// id under another rule set that shares a counter with these
		// rules (a check API request naming another plan: plans share
		// "minute" and "day") would not see that count, and would answer
		// later with too short a wait: it goes, with d if d expired.
		c.dropSharing(sh, id, sh.m[id], rules)
		sh.mu.Unlock()
		return window.Decision{}, false
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
		d := &out[i]
		r.DecideInto(d, now, prev, cur, cost)
		// The request is denied and not counted: a rule that admits it
		// reports the state without it, as the store's answer does.
		unadmit(d, now, r.Rule, cost, prev, cur)
	}
	sh.mu.Unlock()
	dec := window.Combine(out)
	// Only a cost of 0 is allowed here: let the store answer.
	return dec, !dec.Allowed
}

// find returns the denial of id under rules, or nil.
func (sh *denyShard) find(id string, rules []Rule) *denial {
	for d := sh.m[id]; d != nil; d = d.next {
		if d.matches(rules) {
			return d
		}
	}
	return nil
}

// forget drops what the cache remembers of id under rules and under every
// set that shares a counter with them: a cost taken back (Limiter.Refund)
// may have been what a remembered denial was decided on. It also keeps a
// check already past the store from remembering such a denial after this
// (generation). Local rules are never remembered: refunding them changes
// nothing here.
func (c *denyCache) forget(id string, rules []Rule) {
	for _, r := range rules {
		if !r.Local {
			c.refunds[stamp(id)].Add(1)
			break
		}
	}
	// The lock is taken even when the shard looks empty: a remember that
	// checked the generation before the count above may be inserting under
	// it, and counts the shard's identities only after (found by review).
	sh := c.shard(id)
	sh.mu.Lock()
	c.dropSharing(sh, id, sh.m[id], rules)
	sh.mu.Unlock()
}

// dropSharing unlinks, from id's chain starting at head, every denial that
// shares a counter with rules.
func (c *denyCache) dropSharing(sh *denyShard, id string, head *denial, rules []Rule) {
	for p := head; p != nil; p = p.next {
		if p.shares(rules) {
			c.unlink(sh, id, p)
		}
	}
}

// unlink removes d from id's chain, and id when the chain is empty.
func (c *denyCache) unlink(sh *denyShard, id string, d *denial) {
	head := sh.m[id]
	if head == d {
		head = d.next
	} else {
		for p := head; p != nil; p = p.next {
			if p.next == d {
				p.next = d.next
				break
			}
		}
	}
	if head != nil {
		sh.m[id] = head
		return
	}
	delete(sh.m, id)
	sh.n.Add(-1)
	c.size.Add(-1)
}

func (d *denial) matches(rules []Rule) bool {
	if d.n != len(rules) {
		return false
	}
	for i, r := range rules {
		if s := &d.rules[i]; s.name != r.Name || s.local != r.Local || s.limit != r.Limit || s.period != r.Period {
			return false
		}
	}
	return true
}

// shares reports whether d counts on a counter of rules: a rule of the
// same name, period and scope (its limit may differ).
func (d *denial) shares(rules []Rule) bool {
	for i := range d.n {
		s := &d.rules[i]
		for _, r := range rules {
			if s.name == r.Name && s.period == r.Period && s.local == r.Local {
				return true
			}
		}
	}
	return false
}

// remember records that id was denied at now on the counts prev[i] and
// cur[i] of rules[i], read after gen was (generation): not if a refund
// came in since.
func (c *denyCache) remember(id string, now time.Time, rules []Rule, prev, cur []int64, gen uint64) {
	var until time.Duration
	for i, r := range rules {
		until = max(until, r.Wait(now, prev[i], cur[i], r.Limit-1))
	}
	if until <= 0 {
		return
	}
	sh := c.shard(id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if c.generation(id) != gen || now.UnixNano() <= c.ahead.Load() {
		// Checked under the locks that forget's drop takes after its
		// count and corrected's clear after its time: either they see
		// this denial, or this sees their count or time.
		return
	}
	d := sh.find(id, rules)
	if d == nil {
		head, known := sh.m[id]
		if !known && len(sh.m) >= c.perMap {
			for k := range sh.m { // evict one identity at random: map order is random
				delete(sh.m, k)
				sh.n.Add(-1)
				c.size.Add(-1)
				break
			}
		}
		if sh.m == nil {
			sh.m = make(map[string]*denial)
		}
		d = &denial{next: head}
		if known {
			sh.m[id] = d
		} else {
			sh.m[strings.Clone(id)] = d
			sh.n.Add(1)
			c.size.Add(1)
		}
	}
	d.until = now.UnixNano() + int64(until)
	d.n = len(rules)
	for i, r := range rules {
		s := &d.rules[i]
		s.name, s.local, s.limit, s.period = r.Name, r.Local, r.Limit, r.Period
		s.bucket, s.prev, s.current = window.Index(now, r.Period), prev[i], cur[i]
	}
}

// corrected records a correction of the clock from last, the newest time
// seen before it, and drops every denial: they were decided in the time the
// clock ran ahead.
func (c *denyCache) corrected(last int64) {
	for a := c.ahead.Load(); last > a && !c.ahead.CompareAndSwap(a, last); a = c.ahead.Load() {
	}
	c.clear()
}

// clear drops every denial.
func (c *denyCache) clear() {
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		c.size.Add(-int64(len(sh.m)))
		sh.n.Store(0)
		clear(sh.m)
		sh.mu.Unlock()
	}
}
