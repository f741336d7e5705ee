// Package memstore is slidegate's embedded counter store: exact and atomic,
// sharded across cores, bounded in memory. It is the default of the local
// server, the local-scope counters of the Lambda, and the reference backend
// for tests.
package memstore

import (
	"context"
	"hash/maphash"
	"math/bits"
	"sync"
	"time"

	"github.com/slidegate/slidegate/kvstore"
	"github.com/slidegate/slidegate/window"
)

// shardCount spreads identities over independently locked maps; a power of
// two well above the core count keeps lock contention rare.
const shardCount = 256

// shardBits is log2(shardCount): the hash bits that pick the shard.
const shardBits = 8

// sweepEvery is how much observed time passes between two sweeps of a shard.
const sweepEvery = int64(time.Second)

var _ kvstore.RuleUpdater = (*Store)(nil)

// Store keeps counters in process memory. The zero value is not usable; call
// New. A Store is safe for concurrent use.
//
// Memory is bounded by the live identities: a counter is dropped once the
// store has seen, for any identity in the same shard, a bucket that starts
// at or after the counter's Slot.Expires (two periods after its bucket
// began). The store reads no clock; bucket starts are its time. It keeps
// the id string an identity was first given with, not a copy.
type Store struct {
	shards [shardCount]shard // first, so that shards start on a cache line
	seed   maphash.Seed
}

// shard is one independently locked hash table of identities. The table is
// the store's own (chains of entries by hash) rather than a Go map, so that
// a lookup is one load from heads and then the entry itself, which holds
// the first counters inline.
type shard struct {
	mu        sync.Mutex
	heads     []*entry // by the hash's bits above the shard's; len a power of two, or 0
	n         int      // entries held
	now       int64    // latest bucket start seen, Unix nanoseconds
	nextSweep int64
	_         [8]byte // keep shards on separate cache lines
}

// inlineCells is how many counters an entry holds without a slice of its
// own: the previous and current buckets of two rules.
const inlineCells = 4

// entry holds every counter of one identity, so that all of its rules are
// decided under one lock. An identity has few rules: a slice beats a map.
// The first counters sit in the entry itself, one allocation that a lookup
// reads from front to back.
//
// id is the string the identity was first given as, not a copy: callers
// that pass the same string each time (the HTTP layer's configured keys, a
// benchmark's keys) then compare by pointer, without reading the bytes.
// An identity sliced out of a larger string would pin that string as long
// as the identity lives; the HTTP layer's identities are strings of their
// own.
type entry struct {
	hash   uint64
	next   *entry // the next entry in the same chain of heads
	id     string
	cells  []cell // inline[:n] until it outgrows inline
	inline [inlineCells]cell
}

type cell struct {
	name   string
	length time.Duration
	bucket int64
	count  int64
}

// New returns an empty Store. Shards make their tables on first write, so a
// Store costs little to create (the Worker creates one per request).
func New() *Store {
	return &Store{seed: maphash.MakeSeed()}
}

// shard returns the shard of id and id's hash: hashed once, the low bits
// pick the shard and the bits above them the shard's chain.
func (s *Store) shard(id string) (*shard, uint64) {
	h := maphash.String(s.seed, id)
	return &s.shards[h&(shardCount-1)], h
}

// chain returns the index in heads of the chain of hash h.
func (sh *shard) chain(h uint64) int {
	return int(h>>shardBits) & (len(sh.heads) - 1)
}

// find returns the entry of id, or nil.
func (sh *shard) find(id string, h uint64) *entry {
	if len(sh.heads) == 0 {
		return nil
	}
	for e := sh.heads[sh.chain(h)]; e != nil; e = e.next {
		if e.hash == h && e.id == id {
			return e
		}
	}
	return nil
}

// Load implements kvstore.Store. It never fails.
func (s *Store) Load(_ context.Context, id string, slots []kvstore.Slot, counts []int64) error {
	sh, h := s.shard(id)
	sh.mu.Lock()
	e := sh.find(id, h)
	for i, sl := range slots {
		counts[i] = e.count(sl)
	}
	sh.mu.Unlock()
	return nil
}

// Add implements kvstore.Store. It never fails.
func (s *Store) Add(_ context.Context, id string, slots []kvstore.Slot, costs []int64) error {
	sh, h := s.shard(id)
	sh.mu.Lock()
	e := sh.entry(id, h)
	for i, sl := range slots {
		if costs[i] != 0 {
			e.cell(sl).count += costs[i]
		}
	}
	sh.observe(slots)
	sh.mu.Unlock()
	return nil
}

// AddIf implements kvstore.Conditional. It never fails.
func (s *Store) AddIf(_ context.Context, id string, conds []kvstore.Cond, counts []int64) (bool, error) {
	sh, h := s.shard(id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.find(id, h)
	ok := true
	for i, c := range conds {
		counts[i] = e.count(c.Slot)
		if counts[i] > c.Max {
			ok = false
		}
	}
	if !ok {
		return false, nil
	}
	if e == nil {
		e = sh.entry(id, h)
	}
	for i, c := range conds {
		if c.Add != 0 {
			cl := e.cell(c.Slot)
			cl.count += c.Add
			counts[i] = cl.count
		}
	}
	for _, c := range conds {
		sh.observeSlot(c.Slot)
	}
	sh.sweep()
	return true, nil
}

// Update implements kvstore.Updater. It never fails.
func (s *Store) Update(_ context.Context, id string, slots []kvstore.Slot, counts, costs []int64, a kvstore.Admitter) (bool, error) {
	sh, h := s.shard(id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.find(id, h)
	for i, sl := range slots {
		counts[i] = e.count(sl)
	}
	if !a.Admit(counts) {
		return false, nil
	}
	if e == nil {
		e = sh.entry(id, h)
	}
	for i, sl := range slots {
		if costs[i] != 0 {
			e.cell(sl).count += costs[i]
		}
	}
	sh.observe(slots)
	return true, nil
}

// UpdateRule implements kvstore.RuleUpdater. It never fails.
func (s *Store) UpdateRule(_ context.Context, id string, r window.Rule, pos window.Pos, cost int64) (prev, cur int64, ok bool, err error) {
	sh, h := s.shard(id)
	sh.mu.Lock()
	e := sh.find(id, h)
	var c *cell // the current bucket's cell, when e has one
	if e != nil {
		for i := range e.cells {
			cl := &e.cells[i]
			if cl.length != r.Period || cl.name != r.Name {
				continue
			}
			switch cl.bucket {
			case pos.Index:
				cur, c = cl.count, cl
			case pos.Index - 1:
				prev = cl.count
			}
		}
	}
	if !r.AdmitsAt(pos, prev, cur, cost) {
		sh.mu.Unlock()
		return prev, cur, false, nil
	}
	sl := kvstore.Slot{Name: r.Name, Bucket: pos.Index, Length: r.Period}
	if cost != 0 {
		if e == nil {
			e = sh.entry(id, h)
		}
		if c == nil {
			c = e.cell(sl)
		}
		c.count += cost
	}
	sh.observeSlot(sl)
	sh.sweep()
	sh.mu.Unlock()
	return prev, cur, true, nil
}

// Len returns the number of identities held, for tests and metrics.
func (s *Store) Len() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += sh.n
		sh.mu.Unlock()
	}
	return n
}

// entry returns the entry of id, adding an empty one when there is none.
func (sh *shard) entry(id string, h uint64) *entry {
	if e := sh.find(id, h); e != nil {
		return e
	}
	if sh.n >= len(sh.heads)/2 { // at most two entries per chain on average
		sh.resize(max(2*len(sh.heads), minHeads))
	}
	e := &entry{hash: h, id: id}
	e.cells = e.inline[:0]
	c := sh.chain(h)
	e.next, sh.heads[c] = sh.heads[c], e
	sh.n++
	return e
}

// minHeads is the smallest table a shard makes.
const minHeads = 8

// resize moves every entry into a table of n chains.
func (sh *shard) resize(n int) {
	old := sh.heads
	sh.heads = make([]*entry, n)
	for _, e := range old {
		for e != nil {
			next := e.next
			c := sh.chain(e.hash)
			e.next, sh.heads[c] = sh.heads[c], e
			e = next
		}
	}
}

func (sh *shard) observe(slots []kvstore.Slot) {
	for _, sl := range slots {
		sh.observeSlot(sl)
	}
	sh.sweep()
}

func (sh *shard) observeSlot(sl kvstore.Slot) {
	if t := sl.Bucket * int64(sl.Length); t > sh.now {
		sh.now = t
	}
}

// sweep drops expired counters and empty identities, at most once per
// sweepEvery of observed time, so its cost is spread over many calls.
func (sh *shard) sweep() {
	if sh.now < sh.nextSweep {
		return
	}
	sh.nextSweep = sh.now + sweepEvery
	for i, head := range sh.heads {
		var keep *entry // the chain's live entries, rebuilt
		for e := head; e != nil; {
			next := e.next
			live := e.cells[:0]
			for _, c := range e.cells {
				if window.Start(c.bucket+2, c.length).UnixNano() > sh.now {
					live = append(live, c)
				}
			}
			clear(e.cells[len(live):])
			e.cells = live
			if len(live) > 0 {
				e.next, keep = keep, e
			} else {
				sh.n--
			}
			e = next
		}
		sh.heads[i] = keep
	}
	// Give back the table of identities that have gone.
	if n := len(sh.heads); n > minHeads && sh.n < n/8 {
		sh.resize(max(minHeads, 1<<bits.Len(uint(4*sh.n))))
	}
}

func (e *entry) count(sl kvstore.Slot) int64 {
	if e == nil {
		return 0
	}
	for i := range e.cells {
		if c := &e.cells[i]; c.bucket == sl.Bucket && c.name == sl.Name && c.length == sl.Length {
			return c.count
		}
	}
	return 0
}

// cell returns the counter of sl, reusing a cell of the same rule that can no
// longer be read (older than the previous bucket) so that rolling buckets
// over allocates nothing.
func (e *entry) cell(sl kvstore.Slot) *cell {
	free := -1
	for i := range e.cells {
		c := &e.cells[i]
		if c.name != sl.Name || c.length != sl.Length {
			continue
		}
		if c.bucket == sl.Bucket {
			return c
		}
		if c.bucket < sl.Bucket-1 {
			free = i
		}
	}
	if free < 0 {
		e.cells = append(e.cells, cell{name: sl.Name, length: sl.Length})
		free = len(e.cells) - 1
	}
	c := &e.cells[free]
	c.bucket, c.count = sl.Bucket, 0
	return c
}
