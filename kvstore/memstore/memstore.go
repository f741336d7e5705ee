// Package memstore is slidegate's embedded counter store: exact and atomic,
// sharded across cores, bounded in memory. It is the default of the local
// server, the local-scope counters of the Lambda, and the reference backend
// for tests.
package memstore

import (
	"context"
	"hash/maphash"
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

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

var (
	_ kvstore.RuleUpdater = (*Store)(nil)
	_ kvstore.Immediate   = (*Store)(nil)
)

// evictSample is how many identities a full shard compares to pick the one
// it drops for a new identity.
const evictSample = 8

// Store keeps counters in process memory. The zero value is not usable; call
// New. A Store is safe for concurrent use.
//
// Memory is bounded by the live identities: a counter is dropped once the
// store has seen, for any identity in the same shard, a bucket that starts
// at or after the counter's Slot.Expires (two periods after its bucket
// began), and NewLimited bounds how many identities it holds. The store
// reads no clock; bucket starts are its time.
//
// The store keeps no id string: an identity is known by two 64-bit hashes
// of its id, keyed with seeds drawn at random for each Store (maphash), and
// two ids are the same identity when both hashes are equal. Two different
// ids would share counters only if both of their hashes collided: each
// alone does so with odds of 2^-64 for a pair of ids, and a client cannot
// aim at a collision without the seeds, which never leave the process.
// With no id strings and rules kept by index, the tables hold no pointers,
// so the garbage collector allocates them unscanned and never walks the
// identities; only the rare counters beyond an identity's pairs (cells:
// more rules than a slot holds, a lagging clock's buckets, rules beyond a
// shard's maxRules) hold names, in a small table of their own per shard.
type Store struct {
	shards  [shardCount]shard // first, so that shards start on a cache line (New)
	seed    maphash.Seed      // of ident.h
	seed2   maphash.Seed      // of ident.h2
	evicted atomic.Uint64     // identities dropped to make room (NewLimited)
}

// ident is an identity as the store knows it: two independently keyed
// hashes of its id. h picks the shard, the home slot and the tag; h2 only
// tells apart ids whose h is equal.
type ident struct{ h, h2 uint64 }

// shard is one hash table of identities: open addressing with linear
// probing, one slot per identity, its first cache line holding the
// identity and the counters of its first rule, and a word of the hash per
// slot in tags, so that a probe reads only the slot it is after.
//
// Two kinds of lock keep it exact. A slot's own lock guards its identity
// and counters: the common check (UpdateRule on a known identity, no new
// time to record) finds the slot without the shard's lock and holds only
// the slot's, so that concurrent checks write no shared line but their
// slots. The shard's lock serializes everything that changes the table
// (inserts, removals, resizes, the rules, the cells, observed time); a
// change to a slot also takes the slot's lock. A slot found without the
// shard's lock counts only once its lock is held and it still holds the
// identity, and only in its pairs; anything else (an identity's cells, a
// new rule) takes the shard's lock and looks again.
type shard struct {
	mu        sync.Mutex
	tab       atomic.Pointer[table] // nil until the first insert
	n         int32                 // slots in use
	limit     int32                 // most slots in use; 0: no bound
	now       atomic.Int64          // latest bucket start seen, Unix nanoseconds
	nextSweep atomic.Int64
	rules     atomic.Pointer[[]ruleKey] // the rules of the slots' pairs, by index; nil until the first
	over      *overflow                 // the slots' cells; nil when none has any
	_         [8]byte                   // 64 bytes in all
}

// table is a shard's slots. A resize makes a new one and empties the old
// one's slots, so that a check still probing the old one finds nothing
// and takes the shard's lock.
type table struct {
	tags  []atomic.Uint32 // by slot: 0 when free, else tag(ident.h)
	slots []slot          // len(tags), a power of two, from newSlots
}

// cacheLine is the boundary newSlots puts every slot on, and a slot is
// two of it.
const cacheLine = 64

// mallocHeader is the word Go's allocator (since Go 1.22; the runtime's
// mallocHeaderSize) puts in front of a heap object that holds pointers
// and is larger than 512 bytes on 64-bit platforms, up to 32 KiB less the
// header: its size class then has room for the object and the header, and
// the object starts mallocHeader bytes past the start of its block. A
// Store holds pointers (its shards' tables, rules and cells); a table's
// slots do not, and get no header.
const mallocHeader = 8

// padded is A (a Store) behind a pad that makes up for the malloc header:
// allocated on its own, the header and the pad fill the first cache line
// of its block and A starts on the next. The pad is bytes, so the
// collector sees A's pointer words where A's type has them.
type padded[A any] struct {
	_ [cacheLine - mallocHeader]byte
	a A
}

// newSlots returns n zeroed slots, n a power of two from minSlots, whose
// first starts on a cache line, so that each slot is two lines and no
// slot straddles a third. Slots hold no pointers, so the allocator puts
// no header in front of them, and every block of 1 KiB (minSlots slots)
// and more starts at a multiple of its size class, all of which from 1 KiB
// up are multiples of 128 bytes: a slot is an aligned pair of lines.
// TestSlotsAligned checks every size up to 2^17 slots.
func newSlots(n int) []slot { return make([]slot, n) }

// maxRules bounds a shard's rules (a pair's rule index is a byte); an
// identity's rule beyond it is kept in the identity's cells instead of a
// pair.
const maxRules = 64

// pairs is how many rules a slot counts for in itself, each in a pair:
// with the identity, four fill two cache lines. The first rule's pair
// shares the first line with the identity; the default plans (a minute
// and a day) use the first two.
const pairs = 4

// ruleKey is one rule a shard's pairs count for, at its index in the
// shard's rules. name and length never change while refs is positive, so
// a check reads them under its slot's lock alone, the slot's pair holding
// one of the refs; refs, the pairs that count for it, changes under the
// shard's lock. A key with no refs is free, its name dropped.
type ruleKey struct {
	name   string
	length time.Duration
	refs   int
}

// is reports whether k is rule (name, length). The limiter passes a rule's
// configured name, the string k was interned with: comparing the bytes'
// addresses first spares a call to compare them.
func (k *ruleKey) is(name string, length time.Duration) bool {
	return k.length == length && len(k.name) == len(name) &&
		(unsafe.StringData(k.name) == unsafe.StringData(name) || k.name == name)
}

// slot holds every counter of one identity, so that all of its rules are
// decided under one lock: up to pairs rules in pairs (the current and the
// previous bucket of one rule) in the slot itself, the first of them in
// the first cache line with the identity, which is all a check of a
// one-rule identity reads. Other rules, and buckets older than a pair's
// previous one written by a lagging clock, are cells, in the shard's
// overflow. A slot with neither a pair nor cells is free.
//
// A slot holds no pointer (TestSlotHasNoPointers), so a table is
// allocated unscanned and costs the garbage collector nothing to mark.
type slot struct {
	mu sync.Mutex
	state
}

// state is a slot's identity and counters: all of it but its lock.
type state struct {
	key  ident
	rule [pairs]uint8 // by pair: 1 + its rule's index in the shard's rules; 0: no pair
	more uint32       // 1 + the index of the identity's cells in the shard's overflow; 0: none
	pair [pairs]pair  // pair j counts for rule[j]
}

// pair is the count of buckets bucket-1 (prev) and bucket (cur) of a rule.
type pair struct {
	bucket    int64
	prev, cur int64
}

// used reports whether s holds an identity; s.mu must be held.
func (s *slot) used() bool { return s.rule != [pairs]uint8{} || s.more != 0 }

// freePair returns the index of a pair s does not use, or -1.
func (s *slot) freePair() int {
	for j, r := range s.rule {
		if r == 0 {
			return j
		}
	}
	return -1
}

// moveTo moves s's identity and counters to d and empties s; both locks
// must be held (or d be unreachable).
func (s *slot) moveTo(d *slot) { d.state, s.state = s.state, state{} }

// cells are an identity's counters outside its pairs.
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

// overflow is a shard's cells, each identity's at a fixed index (the
// slot's more), so that slots moving in the table keep them. It holds
// the cells' names, and so pointers, but only for the identities that
// have cells: most have none.
type overflow struct {
	cells []*cells // by index; nil when free
	free  []uint32 // the indexes of nil entries of cells
}

// minSlots is the smallest table a shard makes.
const minSlots = 8

// New returns an empty Store. Shards make their tables on first write, so a
// Store costs little to create (a limiter given no store makes one; the
// Worker, which gives it both of its stores, links none). A Store (16 KiB,
// with pointers) gets a malloc header: padded puts its shards on cache
// lines, each shard one line, in the same size class.
func New() *Store {
	p := new(padded[Store])
	p.a.seed, p.a.seed2 = maphash.MakeSeed(), maphash.MakeSeed()
	return &p.a
}

// NewLimited returns an empty Store that holds at most about maxIdentities
// identities, so that a flood of made-up identities cannot take the
// process's memory. A write for a new identity into a full shard first
// drops what the write's time has expired; when nothing has, it evicts
// the identity that counts least per unit of time among a few near the new
// one's slot (evictSample): a made-up identity counted once, or one whose
// counts a refund zeroed, before a client that has used its minute's
// quota. The evicted identity starts afresh if it comes back, so its
// counts are lost: Evicted says how many were. Taking counts back (Add of
// costs none of which is positive) from an identity the store no longer
// holds does nothing. The bound is kept per shard (maxIdentities/256,
// rounded up), so a shard can evict somewhat before the store as a whole
// is full. maxIdentities <= 0 means no bound (New).
func NewLimited(maxIdentities int) *Store {
	s := New()
	if maxIdentities <= 0 {
		return s
	}
	per := int32(min(maxIdentities/shardCount+1, 1<<30))
	if maxIdentities%shardCount == 0 {
		per--
	}
	for i := range s.shards {
		s.shards[i].limit = per
	}
	return s
}

// Evicted returns how many identities the store has dropped to make room
// for new ones (NewLimited), counts and all.
func (s *Store) Evicted() uint64 { return s.evicted.Load() }

// shard returns id's identity and its shard: hashed once, the low bits of
// h pick the shard and the bits above them the slot and the tag.
func (s *Store) shard(id string) (*shard, ident) {
	k := ident{maphash.String(s.seed, id), maphash.String(s.seed2, id)}
	return s.shardOf(k), k
}

func (s *Store) shardOf(k ident) *shard { return &s.shards[k.h&(shardCount-1)] }

// tag is the word of h kept in tags: the hash bits above the shard's,
// whose low bits are the home slot, and the top bit set so that it is
// never 0, which marks a free slot.
func tag(h uint64) uint32 { return uint32(h>>shardBits) | 1<<31 }

// lookup returns k's slot, locked, and its index when t holds it; nil
// otherwise. It needs no shard lock: a slot counts only once it is locked
// and holds k. Under the shard's lock, where no slot changes identity,
// nil means that t does not hold k.
func (t *table) lookup(k ident) (*slot, int) {
	g, mask := tag(k.h), len(t.tags)-1
	for i, n := int(g)&mask, 0; n < len(t.tags); i, n = (i+1)&mask, n+1 {
		switch t.tags[i].Load() {
		case 0:
			return nil, -1
		case g:
			s := &t.slots[i]
			s.mu.Lock()
			if s.key == k && s.used() {
				return s, i
			}
			s.mu.Unlock()
		}
	}
	return nil, -1
}

// locked returns k's slot, locked, and its index, or nil; sh.mu must be
// held.
func (sh *shard) locked(k ident) (*slot, int) {
	if t := sh.tab.Load(); t != nil {
		return t.lookup(k)
	}
	return nil, -1
}

// insert returns the index of k's slot, locked, adding an empty one when
// there is none; sh.mu must be held. The caller gives it a counter before
// it unlocks it (an empty slot is free). at is the latest bucket start
// the write touches: a full shard first drops what that time has expired,
// then evicts an identity, counted in ev.
func (sh *shard) insert(k ident, at int64, ev *atomic.Uint64) (*slot, int) {
	if s, i := sh.locked(k); s != nil {
		return s, i
	}
	if sh.limit > 0 && sh.n >= sh.limit {
		sh.observeAt(at)
		sh.sweep()
		if sh.n >= sh.limit {
			sh.evict(k.h)
			ev.Add(1)
		}
	}
	t := sh.tab.Load()
	if t == nil || 4*(int(sh.n)+1) > 3*len(t.tags) { // at most three quarters in use
		n := minSlots
		if t != nil {
			n = 2 * len(t.tags)
		}
		t = sh.resize(n)
	}
	g := tag(k.h)
	i := t.free(g)
	s := &t.slots[i]
	s.mu.Lock()
	s.key = k
	t.tags[i].Store(g)
	sh.n++
	return s, i
}

// evict drops one identity of a full shard: of the first evictSample in
// use from h's home slot on, the one that counts least per unit of time
// (each counter's count over its rule's period, summed: a minute's quota
// used up weighs more than a busy day's share of it), the one whose
// latest pair is oldest on a tie; sh.mu must be held.
func (sh *shard) evict(h uint64) {
	t := sh.tab.Load()
	rs := sh.ruleList()
	mask := len(t.tags) - 1
	best, bestW, bestAt := -1, 0.0, int64(0)
	for i, seen, n := int(tag(h))&mask, 0, 0; seen < evictSample && n < len(t.tags); i, n = (i+1)&mask, n+1 {
		if t.tags[i].Load() == 0 {
			continue
		}
		seen++
		s := &t.slots[i]
		s.mu.Lock()
		w, at := 0.0, int64(0)
		for j, r := range s.rule {
			if r == 0 {
				continue
			}
			p, length := &s.pair[j], rs[r-1].length
			// Summed as floats: the int64 sum of saturated counts wraps.
			w += (float64(p.prev) + float64(p.cur)) / float64(length)
			at = max(at, p.bucket*int64(length))
		}
		if cs := sh.cellsOf(s); cs != nil {
			for _, c := range cs.c {
				w += float64(c.count) / float64(c.length)
			}
		}
		s.mu.Unlock()
		if best < 0 || w < bestW || (w == bestW && at < bestAt) {
			best, bestW, bestAt = i, w, at
		}
	}
	s := &t.slots[best]
	s.mu.Lock()
	sh.drop(s)
	s.mu.Unlock()
	sh.remove(best)
}

// drop empties slot s, releasing its pairs' rules and its cells; sh.mu
// and s.mu must be held.
func (sh *shard) drop(s *slot) {
	for j, r := range s.rule {
		if r != 0 {
			sh.release(s, j)
		}
	}
	if s.more != 0 {
		sh.dropCells(s)
	}
	s.state = state{}
}

// free returns the first free slot of the probe sequence of tag g.
func (t *table) free(g uint32) int {
	mask := len(t.tags) - 1
	i := int(g) & mask
	for t.tags[i].Load() != 0 {
		i = (i + 1) & mask
	}
	return i
}

// resize moves every identity into a new table of n slots and returns it;
// sh.mu must be held.
func (sh *shard) resize(n int) *table {
	t := &table{tags: make([]atomic.Uint32, n), slots: newSlots(n)}
	if old := sh.tab.Load(); old != nil {
		for i := range old.tags {
			g := old.tags[i].Load()
			if g == 0 {
				continue
			}
			s := &old.slots[i]
			s.mu.Lock()
			j := t.free(g)
			s.moveTo(&t.slots[j]) // t is not yet published: no lock needed
			t.tags[j].Store(g)
			s.mu.Unlock()
		}
	}
	sh.tab.Store(t)
	return t
}

// remove frees slot i, which the caller has emptied and unlocked, moving
// later slots of its probe run back so that every slot stays reachable
// from its home without a tombstone; sh.mu must be held.
func (sh *shard) remove(i int) {
	t := sh.tab.Load()
	mask := len(t.tags) - 1
	t.tags[i].Store(0)
	for j := (i + 1) & mask; ; j = (j + 1) & mask {
		g := t.tags[j].Load()
		if g == 0 {
			break
		}
		// j may fill the hole at i unless its home lies cyclically in
		// (i, j]: then moving it before its home would lose it.
		if k := int(g) & mask; (j-k)&mask >= (j-i)&mask {
			d, s := &t.slots[i], &t.slots[j]
			d.mu.Lock()
			s.mu.Lock()
			s.moveTo(d)
			t.tags[i].Store(g)
			t.tags[j].Store(0)
			s.mu.Unlock()
			d.mu.Unlock()
			i = j
		}
	}
	sh.n--
}

// ruleList returns the shard's rules, by index.
func (sh *shard) ruleList() []ruleKey {
	if p := sh.rules.Load(); p != nil {
		return *p
	}
	return nil
}

// pairOf returns the index of the pair of slot s that counts rule (name,
// length), or -1; s.mu must be held. It reads only rules that s's pairs
// hold, which no other call changes meanwhile.
func (sh *shard) pairOf(s *slot, name string, length time.Duration) int {
	if s.rule == [pairs]uint8{} {
		return -1
	}
	return pairIn(*sh.rules.Load(), &s.rule, name, length)
}

// pairIn returns the index of the pair of rule that counts rule (name,
// length), rs being the shard's rules, or -1.
func pairIn(rs []ruleKey, rule *[pairs]uint8, name string, length time.Duration) int {
	for j, r := range rule {
		if r != 0 && rs[r-1].is(name, length) {
			return j
		}
	}
	return -1
}

// held returns the counter of bucket b in p, or nil.
func (p *pair) held(b int64) *int64 {
	switch b {
	case p.bucket:
		return &p.cur
	case p.bucket - 1:
		return &p.prev
	}
	return nil
}

// at returns the counter of bucket b in p, moving p on to b when b is
// later (dropping the counts b can no longer read, so that rolling
// buckets over allocates nothing); nil when b is older than p's previous
// bucket.
func (p *pair) at(b int64) *int64 {
	switch d := b - p.bucket; {
	case d == 0:
		return &p.cur
	case d == -1:
		return &p.prev
	case d == 1:
		p.bucket, p.prev, p.cur = b, p.cur, 0
		return &p.cur
	case d > 1:
		p.bucket, p.prev, p.cur = b, 0, 0
		return &p.cur
	}
	return nil
}

// hint is the pair of slots[i] that known found (fast), or -1: none
// found, look it up.
func hint(fast bool, js *[2 * pairs]int8, i int) int {
	if fast {
		return int(js[i])
	}
	return -1
}

// cellsOf returns s's cells, or nil; s.mu must be held, and sh.mu too
// when s has cells (s.more != 0).
func (sh *shard) cellsOf(s *slot) *cells {
	if s.more == 0 {
		return nil
	}
	return sh.over.cells[s.more-1]
}

// newCells gives s empty cells and returns them; sh.mu and s.mu must be
// held.
func (sh *shard) newCells(s *slot) *cells {
	o := sh.over
	if o == nil {
		o = new(overflow)
		sh.over = o
	}
	cs := new(cells)
	cs.c = cs.inline[:0]
	if n := len(o.free); n > 0 {
		i := o.free[n-1]
		o.free = o.free[:n-1]
		o.cells[i] = cs
		s.more = i + 1
	} else {
		o.cells = append(o.cells, cs)
		s.more = uint32(len(o.cells))
	}
	return cs
}

// dropCells drops s's cells; sh.mu and s.mu must be held. The overflow
// goes once no identity of the shard has cells.
func (sh *shard) dropCells(s *slot) {
	o := sh.over
	o.cells[s.more-1] = nil
	o.free = append(o.free, s.more-1)
	s.more = 0
	if len(o.free) == len(o.cells) {
		sh.over = nil
	}
}

// count returns the count of sl in s (0 when s is nil), j being sl's pair
// when known found it, else -1; s.mu must be held, and sh.mu too when s
// has cells.
func (sh *shard) count(s *slot, sl kvstore.Slot, j int) int64 {
	if s == nil {
		return 0
	}
	if n := sh.held(s, sl, j); n != nil {
		return *n
	}
	return 0
}

// counter returns the counter of sl in s, making it when it is missing, j
// being sl's pair when known found it, else -1; s.mu must be held, and
// sh.mu too unless known allowed the call.
func (sh *shard) counter(s *slot, sl kvstore.Slot, j int) *int64 {
	if j < 0 {
		j = sh.pairOf(s, sl.Name, sl.Length)
	}
	if j < 0 && !sh.cellsOf(s).has(sl.Name, sl.Length) {
		if f := s.freePair(); f >= 0 {
			if r := sh.intern(sl.Name, sl.Length); r != 0 {
				s.rule[f], s.pair[f] = r, pair{bucket: sl.Bucket}
				return &s.pair[f].cur
			}
		}
	}
	if j >= 0 {
		if n := s.pair[j].at(sl.Bucket); n != nil {
			return n
		}
		// Older than the pair's previous bucket: a lagging clock's
		// write, kept as a cell.
	}
	cs := sh.cellsOf(s)
	if cs == nil {
		cs = sh.newCells(s)
	}
	return &cs.cell(sl).count
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

// intern returns 1 + the index of the shard's key of rule (name, length),
// adding it, and counts one more pair of it; 0 when the shard has
// maxRules rules. sh.mu must be held. A key is written only while no pair
// holds it, and the rules grow into a new array published whole, so that
// a check reading a key its slot's pair holds, under that slot's lock
// alone, never races with intern.
func (sh *shard) intern(name string, length time.Duration) uint8 {
	rs := sh.ruleList()
	free := -1
	for i := range rs {
		k := &rs[i]
		if k.refs == 0 {
			if free < 0 {
				free = i
			}
			continue
		}
		if k.is(name, length) {
			k.refs++
			return uint8(i + 1)
		}
	}
	switch {
	case free >= 0:
		rs[free] = ruleKey{name: name, length: length, refs: 1}
	case len(rs) < maxRules:
		rs = append(rs, ruleKey{name: name, length: length, refs: 1})
		sh.rules.Store(&rs)
		free = len(rs) - 1
	default:
		return 0
	}
	return uint8(free + 1)
}

// release drops slot s's pair j; sh.mu and s.mu must be held.
func (sh *shard) release(s *slot, j int) {
	k := &sh.ruleList()[s.rule[j]-1]
	if k.refs--; k.refs == 0 {
		k.name = "" // keep no name alive
	}
	s.rule[j], s.pair[j] = 0, pair{}
}

// unlockSlot unlocks slot i, returned by insert, freeing it when it holds
// no counter (an identity whose first request changed nothing); sh.mu must
// be held.
func (sh *shard) unlockSlot(s *slot, i int) {
	used := s.used()
	if !used {
		s.state = state{}
	}
	s.mu.Unlock()
	if !used {
		sh.remove(i)
	}
}

// known returns k's slot, locked, when a call on slots may read and count
// in it without the shard's lock: the slot holds k and has no cells, a
// pair of the slot counts every slot's rule (js[i] is slots[i]'s), and
// with each pair moved on to the latest bucket written to it every slot
// of its rule is still in it (so that no counter needs a new rule or a
// cell), no slot starts after the time the shard has seen, and no sweep
// is due. Otherwise it returns nil and the call takes the shard's lock.
func (sh *shard) known(k ident, slots []kvstore.Slot, js *[2 * pairs]int8) *slot {
	t := sh.tab.Load()
	if t == nil || len(slots) > len(js) {
		return nil
	}
	s, _ := t.lookup(k)
	if s == nil {
		return nil
	}
	if now := sh.now.Load(); s.more == 0 && s.rule != [pairs]uint8{} && now < sh.nextSweep.Load() {
		rs := *sh.rules.Load()
		// The latest bucket each pair may be moved on to.
		var hi [pairs]int64
		for j := range hi {
			hi[j] = s.pair[j].bucket
		}
		ok := true
		for i, x := range slots {
			j := pairIn(rs, &s.rule, x.Name, x.Length)
			if ok = j >= 0 && x.Bucket*int64(x.Length) <= now; !ok {
				break
			}
			js[i], hi[j] = int8(j), max(hi[j], x.Bucket)
		}
		for i := 0; ok && i < len(slots); i++ {
			ok = slots[i].Bucket >= hi[js[i]]-1
		}
		if ok {
			return s
		}
	}
	s.mu.Unlock()
	return nil
}

// write returns k's slot, locked, for a write to slots: without the
// shard's lock (i < 0, slots' pairs in js) when known allows it, else with the shard's lock
// held and the slot at index i, inserted when missing (ev counts an
// eviction that made room). Unless insert is set, a missing identity is
// not inserted: write returns nil, holding no lock.
func (sh *shard) write(k ident, slots []kvstore.Slot, ev *atomic.Uint64, insert bool, js *[2 * pairs]int8) (s *slot, i int) {
	if s = sh.known(k, slots, js); s != nil {
		return s, -1
	}
	sh.mu.Lock()
	if !insert {
		if s, i = sh.locked(k); s == nil {
			sh.mu.Unlock()
		}
		return s, i
	}
	at := int64(0)
	for _, x := range slots {
		at = max(at, x.Bucket*int64(x.Length))
	}
	return sh.insert(k, at, ev)
}

// done ends a write that write began: it unlocks the slot and, when the
// shard's lock is held, records slots as observed time (when observe is
// set) and unlocks the shard.
func (sh *shard) done(s *slot, i int, observe bool, slots []kvstore.Slot) {
	if i < 0 {
		s.mu.Unlock()
		return
	}
	sh.unlockSlot(s, i)
	if observe {
		sh.observe(slots)
	}
	sh.mu.Unlock()
}

// Load implements kvstore.Store. It never fails.
func (s *Store) Load(_ context.Context, id string, slots []kvstore.Slot, counts []int64) error {
	_, k := s.shard(id)
	s.load(k, slots, counts)
	return nil
}

func (s *Store) load(k ident, slots []kvstore.Slot, counts []int64) {
	sh := s.shardOf(k)
	var sl *slot
	if t := sh.tab.Load(); t != nil {
		if sl, _ = t.lookup(k); sl != nil && sl.more != 0 {
			sl.mu.Unlock() // its cells are read under the shard's lock
			sl = nil
		}
	}
	if sl == nil {
		// Not found without the shard's lock: a resize or a removal may
		// have hidden it. Under the lock it is where find says.
		sh.mu.Lock()
		defer sh.mu.Unlock()
		sl, _ = sh.locked(k)
	}
	for i, x := range slots {
		counts[i] = sh.count(sl, x, -1)
	}
	if sl != nil {
		sl.mu.Unlock()
	}
}

// Add implements kvstore.Store. It never fails. A count stops at
// math.MaxInt64. An Add that only takes counts back (no cost is positive)
// from an identity the store does not hold does nothing: the counts went
// with it, expired or evicted.
func (s *Store) Add(_ context.Context, id string, slots []kvstore.Slot, costs []int64) error {
	_, k := s.shard(id)
	s.add(k, slots, costs)
	return nil
}

func (s *Store) add(k ident, slots []kvstore.Slot, costs []int64) {
	sh := s.shardOf(k)
	// Taking back counts of an identity the store no longer holds (expired,
	// or evicted) must not bring it back with a credit, nor evict another
	// to make room for it.
	var js [2 * pairs]int8
	sl, i := sh.write(k, slots, &s.evicted, !takeBack(costs), &js)
	if sl == nil {
		return
	}
	for j, x := range slots {
		switch {
		case costs[j] > 0:
			// Saturated: a count wrapped negative reads as empty.
			if n := sh.counter(sl, x, hint(i < 0, &js, j)); *n > math.MaxInt64-costs[j] {
				*n = math.MaxInt64
			} else {
				*n += costs[j]
			}
		case costs[j] < 0:
			// Only a counter the identity holds is taken back from: a
			// new one (or a reused cell) would be a credit, or wipe a
			// count still read after a clock correction.
			if n := sh.held(sl, x, hint(i < 0, &js, j)); n != nil {
				*n += costs[j]
			}
		}
	}
	sh.done(sl, i, true, slots)
}

// held returns the counter of sl in s, or nil, j being sl's pair when
// known found it, else -1; s.mu must be held, and sh.mu too when s has
// cells.
func (sh *shard) held(s *slot, sl kvstore.Slot, j int) *int64 {
	if j < 0 {
		j = sh.pairOf(s, sl.Name, sl.Length)
	}
	if j >= 0 {
		if n := s.pair[j].held(sl.Bucket); n != nil {
			return n
		}
	}
	if cs := sh.cellsOf(s); cs != nil {
		for j := range cs.c {
			if c := &cs.c[j]; c.bucket == sl.Bucket && c.name == sl.Name && c.length == sl.Length {
				return &c.count
			}
		}
	}
	return nil
}

// takeBack reports whether an Add only takes counts back.
func takeBack(costs []int64) bool {
	for _, c := range costs {
		if c > 0 {
			return false
		}
	}
	return true
}

// AddIf implements kvstore.Conditional. It never fails. The limiter
// calls Update on this store, so AddIf always takes the shard's lock.
func (s *Store) AddIf(_ context.Context, id string, conds []kvstore.Cond, counts []int64) (bool, error) {
	_, k := s.shard(id)
	return s.addIf(k, conds, counts), nil
}

func (s *Store) addIf(k ident, conds []kvstore.Cond, counts []int64) bool {
	sh := s.shardOf(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	at := int64(0)
	for _, c := range conds {
		at = max(at, c.Bucket*int64(c.Length))
	}
	sl, i := sh.insert(k, at, &s.evicted)
	ok := true
	for j, c := range conds {
		counts[j] = sh.count(sl, c.Slot, -1)
		if counts[j] > c.Max {
			ok = false
		}
	}
	for j, c := range conds {
		if ok && c.Add != 0 {
			n := sh.counter(sl, c.Slot, -1)
			*n += c.Add
			counts[j] = *n
		}
	}
	sh.unlockSlot(sl, i)
	if ok {
		for _, c := range conds {
			sh.observeSlot(c.Slot)
		}
		sh.sweep()
	}
	return ok
}

// Update implements kvstore.Updater. It never fails.
func (s *Store) Update(_ context.Context, id string, slots []kvstore.Slot, counts, costs []int64, a kvstore.Admitter) (bool, error) {
	_, k := s.shard(id)
	return s.update(k, slots, counts, costs, a), nil
}

func (s *Store) update(k ident, slots []kvstore.Slot, counts, costs []int64, a kvstore.Admitter) bool {
	sh := s.shardOf(k)
	var js [2 * pairs]int8
	sl, i := sh.write(k, slots, &s.evicted, true, &js)
	if i < 0 {
		// known: every slot is in its pair, js.
		for j, x := range slots {
			counts[j] = 0
			if n := sl.pair[js[j]].held(x.Bucket); n != nil {
				counts[j] = *n
			}
		}
		ok := a.Admit(counts)
		for j, x := range slots {
			if ok && costs[j] != 0 {
				*sl.pair[js[j]].at(x.Bucket) += costs[j]
			}
		}
		sl.mu.Unlock()
		return ok
	}
	for j, x := range slots {
		counts[j] = sh.count(sl, x, -1)
	}
	ok := a.Admit(counts)
	for j, x := range slots {
		if ok && costs[j] != 0 {
			*sh.counter(sl, x, -1) += costs[j]
		}
	}
	sh.done(sl, i, ok, slots)
	return ok
}

// Immediate implements kvstore.Immediate: the store's calls never wait.
func (*Store) Immediate() {}

// UpdateRule implements kvstore.RuleUpdater. It never fails.
//
// The common check (a known identity with a pair that counts r, at or
// after the pair's bucket, in time the shard has seen, no sweep due) holds
// only its slot's lock; any other takes the shard's lock too.
func (s *Store) UpdateRule(_ context.Context, id string, r window.Rule, pos window.Pos, cost int64) (prev, cur int64, ok bool, err error) {
	_, k := s.shard(id)
	prev, cur, ok = s.updateRule(k, r, pos, cost)
	return prev, cur, ok, nil
}

func (s *Store) updateRule(k ident, r window.Rule, pos window.Pos, cost int64) (prev, cur int64, ok bool) {
	sh := s.shardOf(k)
	if t := sh.tab.Load(); t != nil {
		if sl, _ := t.lookup(k); sl != nil {
			now := sh.now.Load()
			if j := sh.pairOf(sl, r.Name, r.Period); j >= 0 && pos.Index >= sl.pair[j].bucket &&
				pos.Index*int64(r.Period) <= now && now < sh.nextSweep.Load() {
				p := &sl.pair[j]
				switch pos.Index - p.bucket {
				case 0:
					prev, cur = p.prev, p.cur
				case 1:
					prev = p.cur
				}
				ok = r.AdmitsAt(pos, prev, cur, cost)
				if ok && cost != 0 {
					if pos.Index != p.bucket {
						p.bucket, p.prev, p.cur = pos.Index, prev, 0
					}
					p.cur += cost
				}
				sl.mu.Unlock()
				return prev, cur, ok
			}
			sl.mu.Unlock()
		}
	}
	return sh.updateRule(k, r, pos, cost, &s.evicted)
}

// updateRule is UpdateRule under the shard's lock; ev counts evictions.
func (sh *shard) updateRule(k ident, r window.Rule, pos window.Pos, cost int64, ev *atomic.Uint64) (prev, cur int64, ok bool) {
	cs := kvstore.Slot{Name: r.Name, Bucket: pos.Index, Length: r.Period}
	sh.mu.Lock()
	sl, i := sh.insert(k, cs.Bucket*int64(cs.Length), ev)
	prev = sh.count(sl, kvstore.Slot{Name: r.Name, Bucket: pos.Index - 1, Length: r.Period}, -1)
	cur = sh.count(sl, cs, -1)
	ok = r.AdmitsAt(pos, prev, cur, cost)
	if ok && cost != 0 {
		*sh.counter(sl, cs, -1) += cost
	}
	sh.unlockSlot(sl, i)
	if ok {
		sh.observeSlot(cs)
		sh.sweep()
	}
	sh.mu.Unlock()
	return prev, cur, ok
}

// Len returns the number of identities held, for tests and metrics.
func (s *Store) Len() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += int(sh.n)
		sh.mu.Unlock()
	}
	return n
}

// observe records the slots' bucket starts as observed time and sweeps
// when one is due; sh.mu must be held.
func (sh *shard) observe(slots []kvstore.Slot) {
	for _, sl := range slots {
		sh.observeSlot(sl)
	}
	sh.sweep()
}

func (sh *shard) observeSlot(sl kvstore.Slot) { sh.observeAt(sl.Bucket * int64(sl.Length)) }

// observeAt records bucket start t as observed time; sh.mu must be held.
func (sh *shard) observeAt(t int64) {
	if t > sh.now.Load() {
		sh.now.Store(t)
	}
}

// sweep drops expired counters and empty identities, at most once per
// sweepEvery of observed time, so its cost is spread over many calls;
// sh.mu must be held.
func (sh *shard) sweep() {
	if sh.now.Load() >= sh.nextSweep.Load() {
		sh.sweepNow()
	}
}

// sweepNow is sweep's work, out of line so that sweep's test inlines.
func (sh *shard) sweepNow() {
	now := sh.now.Load()
	sh.nextSweep.Store(now + sweepEvery)
	t := sh.tab.Load()
	if t == nil {
		return
	}
	// A bucket can be read until the bucket after the next one begins
	// (kvstore.Slot.Expires), bucket starts in Unix nanoseconds as in
	// observeSlot.
	live := func(bucket int64, length time.Duration) bool {
		return (bucket+2)*int64(length) > now
	}
	for i := 0; i < len(t.tags); {
		if t.tags[i].Load() == 0 {
			i++
			continue
		}
		s := &t.slots[i]
		s.mu.Lock()
		rs := sh.ruleList()
		for j, r := range s.rule {
			if r == 0 {
				continue
			}
			switch p, length := &s.pair[j], rs[r-1].length; {
			case !live(p.bucket, length):
				sh.release(s, j)
			case !live(p.bucket-1, length):
				p.prev = 0
			}
		}
		if cs := sh.cellsOf(s); cs != nil {
			kept := cs.c[:0]
			for _, c := range cs.c {
				if live(c.bucket, c.length) {
					kept = append(kept, c)
				}
			}
			clear(cs.c[len(kept):])
			cs.c = kept
			if len(kept) == 0 {
				sh.dropCells(s)
			}
		}
		if !s.used() {
			s.state = state{}
			s.mu.Unlock()
			// remove moves a later slot into i, or none; either way i
			// is looked at again. A slot may move from the start of the
			// table to its end and be looked at twice: harmless.
			sh.remove(i)
			continue
		}
		s.mu.Unlock()
		i++
	}
	// Give back the table of identities that have gone.
	if n := len(t.tags); n > minSlots && int(sh.n) < n/8 {
		sh.resize(max(minSlots, 1<<bits.Len(uint(2*int(sh.n)))))
	}
}
