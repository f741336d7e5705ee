// Package memstore is slidegate's embedded counter store: exact and atomic,
// sharded across cores, bounded in memory. It is the default of the local
// server, the local-scope counters of the Lambda, and the reference backend
// for tests.
package memstore

import (
	"context"
	"hash/maphash"
	"strings"
	"sync"
	"time"

	"github.com/slidegate/slidegate/kvstore"
	"github.com/slidegate/slidegate/window"
)

// shardCount spreads identities over independently locked maps; a power of
// two well above the core count keeps lock contention rare.
const shardCount = 256

// sweepEvery is how much observed time passes between two sweeps of a shard.
const sweepEvery = int64(time.Second)

var _ kvstore.Updater = (*Store)(nil)

// Store keeps counters in process memory. The zero value is not usable; call
// New. A Store is safe for concurrent use.
//
// Memory is bounded by the live identities: a counter is dropped once the
// store has seen, for any identity in the same shard, a bucket that starts
// at or after the counter's Slot.Expires (two periods after its bucket
// began). The store reads no clock; bucket starts are its time.
type Store struct {
	seed   maphash.Seed
	shards [shardCount]shard
}

type shard struct {
	mu        sync.Mutex
	m         map[uint64]*entry // by maphash of the identity; collisions chain
	now       int64             // latest bucket start seen, Unix nanoseconds
	nextSweep int64
	_         [32]byte // keep shards on separate cache lines
}

// entry holds every counter of one identity, so that all of its rules are
// decided under one lock. An identity has few rules: a slice beats a map.
type entry struct {
	id    string
	next  *entry // another identity with the same 64-bit hash
	cells []cell
}

type cell struct {
	name   string
	length time.Duration
	bucket int64
	count  int64
}

// New returns an empty Store. Shards make their maps on first write, so a
// Store costs little to create (the Worker creates one per request).
func New() *Store {
	return &Store{seed: maphash.MakeSeed()}
}

// shard returns the shard of id and id's hash: hashed once, the value
// picks the shard and keys the shard's map.
func (s *Store) shard(id string) (*shard, uint64) {
	h := maphash.String(s.seed, id)
	return &s.shards[h&(shardCount-1)], h
}

// find returns the entry of id, or nil.
func (sh *shard) find(id string, h uint64) *entry {
	for e := sh.m[h]; e != nil; e = e.next {
		if e.id == id {
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

// Len returns the number of identities held, for tests and metrics.
func (s *Store) Len() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for _, e := range sh.m {
			for ; e != nil; e = e.next {
				n++
			}
		}
		sh.mu.Unlock()
	}
	return n
}

func (sh *shard) entry(id string, h uint64) *entry {
	e := sh.find(id, h)
	if e == nil {
		if sh.m == nil {
			sh.m = make(map[uint64]*entry)
		}
		e = &entry{id: strings.Clone(id), next: sh.m[h]}
		sh.m[h] = e
	}
	return e
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
	for h, head := range sh.m {
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
			}
			e = next
		}
		if keep == nil {
			delete(sh.m, h)
		} else {
			sh.m[h] = keep
		}
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
