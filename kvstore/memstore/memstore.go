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

// shardCount spreads identities over independently locked tables; a power
// of two well above the core count keeps lock contention rare.
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

// shard is one independently locked hash table of identities: open
// addressing with linear probing over slots, one cache line per identity,
// and a byte of the hash per slot in tags so that a probe reads only the
// slot it is after. The first line holds what every call reads and the
// lock writes; the second what changes when observed time moves.
type shard struct {
	mu    sync.Mutex
	tags  []uint8 // by slot: 0 when free, else tag(hash)
	slots []slot  // len(tags), a power of two, or 0
	n     int     // slots in use
	_     [64 - 8 - 24 - 24 - 8]byte

	now       int64 // latest bucket start seen, Unix nanoseconds
	nextSweep int64
	rules     []ruleKey // the rules of the slots' pairs, by slot.rule-1
	_         [64 - 8 - 8 - 24]byte
}

// maxRules bounds a shard's table of pair rules; an identity's rule beyond
// it is kept in the identity's cells instead.
const maxRules = 64

// ruleKey is one rule a shard's pairs count for, with the number of pairs
// that do: an entry nobody uses is free for the next rule.
type ruleKey struct {
	name   string
	length time.Duration
	refs   int
}

func (k *ruleKey) is(name string, length time.Duration) bool {
	return k.length == length && k.name == name
}

// slot holds every counter of one identity, so that all of its rules are
// decided under one lock, in one cache line for the common identity that
// has one rule: its pair (the current and the previous bucket of one rule)
// sits in the slot itself. Other rules, and buckets older than the pair's
// previous one written by a lagging clock, are cells behind more.
//
// id is the string the identity was first given as, not a copy: callers
// that pass the same string each time (the HTTP layer's configured keys, a
// benchmark's keys) then compare by pointer, without reading the bytes.
// An identity sliced out of a larger string would pin that string as long
// as the identity lives; the HTTP layer's identities are strings of their
// own.
type slot struct {
	hash uint64
	id   string
	rule uint32 // 1 + the index in shard.rules of the pair's rule; 0: no pair
	_    uint32
	// The pair: the counts of buckets bucket-1 (prev) and bucket (cur).
	bucket    int64
	prev, cur int64
	more      *cells // nil when the identity has no other counter
}

// cells are an identity's counters outside its pair.
type cells struct {
	c      []cell // inline[:n] until it outgrows inline
	inline [2]cell
}

type cell struct {
	name   string
	length time.Duration
	bucket int64
	count  int64
}

// minSlots is the smallest table a shard makes.
const minSlots = 8

// New returns an empty Store. Shards make their tables on first write, so a
// Store costs little to create (the Worker creates one per request).
func New() *Store {
	return &Store{seed: maphash.MakeSeed()}
}

// shard returns the shard of id and id's hash: hashed once, the low bits
// pick the shard, the bits above them the slot, and the top bits the tag.
func (s *Store) shard(id string) (*shard, uint64) {
	h := maphash.String(s.seed, id)
	return &s.shards[h&(shardCount-1)], h
}

// tag is the byte of h kept in tags: never 0, which marks a free slot.
func tag(h uint64) uint8 { return uint8(h>>56) | 0x80 }

// home returns the slot where the probe for hash h starts.
func (sh *shard) home(h uint64) int {
	return int(h>>shardBits) & (len(sh.tags) - 1)
}

// find returns the index of id's slot, or -1.
func (sh *shard) find(id string, h uint64) int {
	if len(sh.tags) == 0 {
		return -1
	}
	t, mask := tag(h), len(sh.tags)-1
	for i := sh.home(h); ; i = (i + 1) & mask {
		switch sh.tags[i] {
		case 0:
			return -1
		case t:
			if s := &sh.slots[i]; s.hash == h && s.id == id {
				return i
			}
		}
	}
}

// insert returns the index of id's slot, adding an empty one when there is
// none.
func (sh *shard) insert(id string, h uint64) int {
	if i := sh.find(id, h); i >= 0 {
		return i
	}
	if 4*(sh.n+1) > 3*len(sh.tags) { // at most three quarters in use
		sh.resize(max(2*len(sh.tags), minSlots))
	}
	i := sh.free(h)
	sh.tags[i] = tag(h)
	sh.slots[i] = slot{hash: h, id: id}
	sh.n++
	return i
}

// free returns the first free slot of h's probe sequence.
func (sh *shard) free(h uint64) int {
	mask := len(sh.tags) - 1
	i := sh.home(h)
	for sh.tags[i] != 0 {
		i = (i + 1) & mask
	}
	return i
}

// resize moves every slot into a table of n slots.
func (sh *shard) resize(n int) {
	tags, slots := sh.tags, sh.slots
	sh.tags, sh.slots = make([]uint8, n), make([]slot, n)
	for i, t := range tags {
		if t != 0 {
			j := sh.free(slots[i].hash)
			sh.tags[j], sh.slots[j] = t, slots[i]
		}
	}
}

// remove frees slot i, moving later slots of its probe run back so that
// every slot stays reachable from its home without a tombstone.
func (sh *shard) remove(i int) {
	mask := len(sh.tags) - 1
	for j := (i + 1) & mask; sh.tags[j] != 0; j = (j + 1) & mask {
		// j may fill the hole at i unless its home lies cyclically in
		// (i, j]: then moving it before its home would lose it.
		if k := sh.home(sh.slots[j].hash); (j-k)&mask >= (j-i)&mask {
			sh.tags[i], sh.slots[i] = sh.tags[j], sh.slots[j]
			i = j
		}
	}
	sh.tags[i], sh.slots[i] = 0, slot{}
	sh.n--
}

// pairOf reports whether slot s's pair counts rule (name, length).
func (sh *shard) pairOf(s *slot, name string, length time.Duration) bool {
	return s.rule != 0 && sh.rules[s.rule-1].is(name, length)
}

// count returns the count of sl in slot i (0 when i < 0).
func (sh *shard) count(i int, sl kvstore.Slot) int64 {
	if i < 0 {
		return 0
	}
	s := &sh.slots[i]
	if sh.pairOf(s, sl.Name, sl.Length) {
		switch sl.Bucket {
		case s.bucket:
			return s.cur
		case s.bucket - 1:
			return s.prev
		}
	}
	if s.more == nil {
		return 0
	}
	for j := range s.more.c {
		if c := &s.more.c[j]; c.bucket == sl.Bucket && c.name == sl.Name && c.length == sl.Length {
			return c.count
		}
	}
	return 0
}

// counter returns the counter of sl in slot i, making it when it is
// missing. Moving the pair on to a later bucket drops the counts that
// bucket can no longer read, so rolling buckets over allocates nothing.
func (sh *shard) counter(i int, sl kvstore.Slot) *int64 {
	s := &sh.slots[i]
	if s.rule == 0 && !s.more.has(sl.Name, sl.Length) {
		if r := sh.intern(sl.Name, sl.Length); r != 0 {
			s.rule, s.bucket, s.prev, s.cur = r, sl.Bucket, 0, 0
			return &s.cur
		}
	}
	if sh.pairOf(s, sl.Name, sl.Length) {
		switch d := sl.Bucket - s.bucket; {
		case d == 0:
			return &s.cur
		case d == -1:
			return &s.prev
		case d == 1:
			s.bucket, s.prev, s.cur = sl.Bucket, s.cur, 0
			return &s.cur
		case d > 1:
			s.bucket, s.prev, s.cur = sl.Bucket, 0, 0
			return &s.cur
		}
		// Older than the pair's previous bucket: a lagging clock's
		// write, kept as a cell.
	}
	if s.more == nil {
		s.more = new(cells)
		s.more.c = s.more.inline[:0]
	}
	return &s.more.cell(sl).count
}

// has reports whether cs holds a counter of rule (name, length).
func (cs *cells) has(name string, length time.Duration) bool {
	if cs == nil {
		return false
	}
	for i := range cs.c {
		if cs.c[i].name == name && cs.c[i].length == length {
			return true
		}
	}
	return false
}

// cell returns the counter of sl, reusing a cell of the same rule that can
// no longer be read (older than the previous bucket).
func (cs *cells) cell(sl kvstore.Slot) *cell {
	free := -1
	for i := range cs.c {
		c := &cs.c[i]
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
		cs.c = append(cs.c, cell{name: sl.Name, length: sl.Length})
		free = len(cs.c) - 1
	}
	c := &cs.c[free]
	c.bucket, c.count = sl.Bucket, 0
	return c
}

// intern returns 1 + the index in sh.rules of rule (name, length), adding
// it and counting one more pair of it; 0 when the table is full.
func (sh *shard) intern(name string, length time.Duration) uint32 {
	free := -1
	for i := range sh.rules {
		k := &sh.rules[i]
		if k.is(name, length) {
			k.refs++
			return uint32(i + 1)
		}
		if k.refs == 0 && free < 0 {
			free = i
		}
	}
	if free < 0 {
		if len(sh.rules) == maxRules {
			return 0
		}
		sh.rules = append(sh.rules, ruleKey{})
		free = len(sh.rules) - 1
	}
	sh.rules[free] = ruleKey{name: name, length: length, refs: 1}
	return uint32(free + 1)
}

// release drops slot s's pair.
func (sh *shard) release(s *slot) {
	k := &sh.rules[s.rule-1]
	if k.refs--; k.refs == 0 {
		*k = ruleKey{} // keep no name alive
	}
	s.rule, s.bucket, s.prev, s.cur = 0, 0, 0, 0
}

// Load implements kvstore.Store. It never fails.
func (s *Store) Load(_ context.Context, id string, slots []kvstore.Slot, counts []int64) error {
	sh, h := s.shard(id)
	sh.mu.Lock()
	i := sh.find(id, h)
	for k, sl := range slots {
		counts[k] = sh.count(i, sl)
	}
	sh.mu.Unlock()
	return nil
}

// Add implements kvstore.Store. It never fails.
func (s *Store) Add(_ context.Context, id string, slots []kvstore.Slot, costs []int64) error {
	sh, h := s.shard(id)
	sh.mu.Lock()
	i := sh.insert(id, h)
	for k, sl := range slots {
		if costs[k] != 0 {
			*sh.counter(i, sl) += costs[k]
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
	i := sh.find(id, h)
	ok := true
	for k, c := range conds {
		counts[k] = sh.count(i, c.Slot)
		if counts[k] > c.Max {
			ok = false
		}
	}
	if !ok {
		return false, nil
	}
	if i < 0 {
		i = sh.insert(id, h)
	}
	for k, c := range conds {
		if c.Add != 0 {
			n := sh.counter(i, c.Slot)
			*n += c.Add
			counts[k] = *n
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
	i := sh.find(id, h)
	for k, sl := range slots {
		counts[k] = sh.count(i, sl)
	}
	if !a.Admit(counts) {
		return false, nil
	}
	if i < 0 {
		i = sh.insert(id, h)
	}
	for k, sl := range slots {
		if costs[k] != 0 {
			*sh.counter(i, sl) += costs[k]
		}
	}
	sh.observe(slots)
	return true, nil
}

// UpdateRule implements kvstore.RuleUpdater. It never fails.
func (s *Store) UpdateRule(_ context.Context, id string, r window.Rule, pos window.Pos, cost int64) (prev, cur int64, ok bool, err error) {
	sh, h := s.shard(id)
	sh.mu.Lock()
	i := sh.find(id, h)
	var sl *slot
	if i >= 0 {
		sl = &sh.slots[i]
	}
	// The common case reads the pair of a slot at or before now's bucket;
	// the others (no pair of r, a lagging clock) go through count.
	fast := sl != nil && sh.pairOf(sl, r.Name, r.Period) && pos.Index >= sl.bucket
	if fast {
		switch pos.Index - sl.bucket {
		case 0:
			prev, cur = sl.prev, sl.cur
		case 1:
			prev = sl.cur
		}
	} else {
		prev = sh.count(i, kvstore.Slot{Name: r.Name, Bucket: pos.Index - 1, Length: r.Period})
		cur = sh.count(i, kvstore.Slot{Name: r.Name, Bucket: pos.Index, Length: r.Period})
	}
	if !r.AdmitsAt(pos, prev, cur, cost) {
		sh.mu.Unlock()
		return prev, cur, false, nil
	}
	if cost != 0 {
		if fast {
			if pos.Index != sl.bucket {
				sl.bucket, sl.prev, sl.cur = pos.Index, prev, 0
			}
			sl.cur += cost
		} else {
			if i < 0 {
				i = sh.insert(id, h)
			}
			*sh.counter(i, kvstore.Slot{Name: r.Name, Bucket: pos.Index, Length: r.Period}) += cost
		}
	}
	if t := pos.Index * int64(r.Period); t > sh.now {
		sh.now = t
	}
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
	if sh.now >= sh.nextSweep {
		sh.sweepNow()
	}
}

// sweepNow is sweep's work, out of line so that sweep's test inlines.
func (sh *shard) sweepNow() {
	sh.nextSweep = sh.now + sweepEvery
	live := func(bucket int64, length time.Duration) bool {
		return window.Start(bucket+2, length).UnixNano() > sh.now
	}
	for i := 0; i < len(sh.tags); {
		if sh.tags[i] == 0 {
			i++
			continue
		}
		s := &sh.slots[i]
		if s.rule != 0 {
			k := &sh.rules[s.rule-1]
			switch {
			case !live(s.bucket, k.length):
				sh.release(s)
			case !live(s.bucket-1, k.length):
				s.prev = 0
			}
		}
		if cs := s.more; cs != nil {
			kept := cs.c[:0]
			for _, c := range cs.c {
				if live(c.bucket, c.length) {
					kept = append(kept, c)
				}
			}
			clear(cs.c[len(kept):])
			cs.c = kept
			if len(kept) == 0 {
				s.more = nil
			}
		}
		if s.rule == 0 && s.more == nil {
			// remove moves a later slot into i, or none; either way i
			// is looked at again. A slot may move from the start of the
			// table to its end and be looked at twice: harmless.
			sh.remove(i)
			continue
		}
		i++
	}
	// Give back the table of identities that have gone.
	if n := len(sh.tags); n > minSlots && sh.n < n/8 {
		sh.resize(max(minSlots, 1<<bits.Len(uint(2*sh.n))))
	}
}
