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
// reads no clock; bucket starts are its time. It keeps the id string an
// identity was first given with, not a copy.
type Store struct {
	shards  [shardCount]shard // first, so that shards start on a cache line (New)
	seed    maphash.Seed
	evicted atomic.Uint64 // identities dropped to make room (NewLimited)
}

// shard is one hash table of identities: open addressing with linear
// probing, one cache line per identity (a slot) and a word of the hash per
// slot in tags, so that a probe reads only the slot it is after.
//
// Two kinds of lock keep it exact. A slot's own lock guards its identity
// and counters: the common check (UpdateRule on a known identity, no new
// time to record) finds the slot without the shard's lock and holds only
// the slot's, so that concurrent checks write no shared line but their
// slots. The shard's lock serializes everything that changes the table
// (inserts, removals, resizes, the rules, observed time); a change to a
// slot also takes the slot's lock. A slot found without the shard's lock
// counts only once its lock is held and it still holds the identity;
// anything else takes the shard's lock and looks again.
type shard struct {
	mu        sync.Mutex
	tab       atomic.Pointer[table] // nil until the first insert
	n         int32                 // slots in use
	limit     int32                 // most slots in use; 0: no bound
	now       atomic.Int64          // latest bucket start seen, Unix nanoseconds
	nextSweep atomic.Int64
	rules     []*ruleKey // the rules of the slots' pairs; 64 bytes in all
}

// table is a shard's slots. A resize makes a new one and empties the old
// one's slots, so that a check still probing the old one finds nothing
// and takes the shard's lock.
type table struct {
	tags  []atomic.Uint32 // by slot: 0 when free, else tag(hash)
	slots []slot          // len(tags), a power of two, from newSlots
}

// cacheLine is the size of a slot and the boundary newSlots puts every
// slot on.
const cacheLine = 64

// mallocHeader is the word Go's allocator (since Go 1.22; the runtime's
// mallocHeaderSize) puts in front of a heap object that holds pointers
// and is larger than 512 bytes on 64-bit platforms, up to 32 KiB less the
// header: its size class then has room for the object and the header, and
// the object starts mallocHeader bytes past the start of its block. Every
// size class above 512 bytes is a multiple of cacheLine, as is the
// 512-byte class (a table of 8 slots, no header) and the pages of larger
// objects (no header either); smaller classes are not all, but no table
// is that small.
const mallocHeader = 8

// padded is A (an array of slots, or a Store) behind a pad that makes up
// for the malloc header: allocated on its own, the header and the pad fill
// the first cache line of its block and A starts on the next. The pad is
// bytes, so the collector sees A's pointer words where A's type has them.
type padded[A any] struct {
	_ [cacheLine - mallocHeader]byte
	a A
}

// newSlots returns n zeroed slots, n a power of two from minSlots, whose
// first starts on a cache line, so that each slot is one line: an array
// of 16 to 256 slots (1 to 16 KiB) gets a malloc header and would start 8
// bytes into a line, every slot then straddling two. padded costs them
// nothing: with the pad they fit the same size class as without it.
// TestSlotsAligned checks every size up to 2^17 slots.
func newSlots(n int) []slot {
	switch n {
	case 16:
		return new(padded[[16]slot]).a[:]
	case 32:
		return new(padded[[32]slot]).a[:]
	case 64:
		return new(padded[[64]slot]).a[:]
	case 128:
		return new(padded[[128]slot]).a[:]
	case 256:
		return new(padded[[256]slot]).a[:]
	}
	return make([]slot, n)
}

// maxRules bounds a shard's rules; an identity's rule beyond it is kept in
// the identity's cells instead of its pair.
const maxRules = 64

// ruleKey is one rule a shard's pairs count for. name and length never
// change, so a check reads them under its slot's lock alone; refs, the
// pairs that count for it, changes under the shard's lock.
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
// previous one written by a lagging clock, are cells behind more. A slot
// with neither a pair nor cells is free. A slot is cacheLine bytes, and
// newSlots starts every table on a cache line, so that a slot is one line
// and not parts of two.
//
// id is the string the identity was first given as, not a copy: callers
// that pass the same string each time (the HTTP layer's configured keys, a
// benchmark's keys) then compare by pointer, without reading the bytes.
// An identity sliced out of a larger string would pin that string as long
// as the identity lives; the HTTP layer's identities are strings of their
// own.
type slot struct {
	mu   sync.Mutex
	id   string
	rule *ruleKey // the pair's rule; nil: no pair
	// The pair: the counts of buckets bucket-1 (prev) and bucket (cur).
	bucket    int64
	prev, cur int64
	more      *cells // nil when the identity has no other counter
}

// used reports whether s holds an identity; s.mu must be held.
func (s *slot) used() bool { return s.rule != nil || s.more != nil }

// moveTo moves s's identity and counters to d and empties s; both locks
// must be held (or d be unreachable).
func (s *slot) moveTo(d *slot) {
	d.id, d.rule, d.bucket, d.prev, d.cur, d.more = s.id, s.rule, s.bucket, s.prev, s.cur, s.more
	s.clear()
}

func (s *slot) clear() {
	s.id, s.rule, s.bucket, s.prev, s.cur, s.more = "", nil, 0, 0, 0, nil
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
// Store costs little to create (a limiter given no store makes one; the
// Worker, which gives it both of its stores, links none). A Store (16 KiB,
// with pointers) gets a malloc header: padded puts its shards on cache
// lines, each shard one line, in the same size class.
func New() *Store {
	p := new(padded[Store])
	p.a.seed = maphash.MakeSeed()
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

// shard returns the shard of id and id's hash: hashed once, the low bits
// pick the shard and the bits above them the slot and the tag.
func (s *Store) shard(id string) (*shard, uint64) {
	h := maphash.String(s.seed, id)
	return &s.shards[h&(shardCount-1)], h
}

// tag is the word of h kept in tags: the hash bits above the shard's,
// whose low bits are the home slot, and the top bit set so that it is
// never 0, which marks a free slot.
func tag(h uint64) uint32 { return uint32(h>>shardBits) | 1<<31 }

// lookup returns id's slot, locked, and its index when t holds it; nil
// otherwise. It needs no shard lock: a slot counts only once it is locked
// and holds id. Under the shard's lock, where no slot changes identity,
// nil means that t does not hold id.
func (t *table) lookup(id string, h uint64) (*slot, int) {
	g, mask := tag(h), len(t.tags)-1
	for i, n := int(g)&mask, 0; n < len(t.tags); i, n = (i+1)&mask, n+1 {
		switch t.tags[i].Load() {
		case 0:
			return nil, -1
		case g:
			s := &t.slots[i]
			s.mu.Lock()
			if s.id == id && s.used() {
				return s, i
			}
			s.mu.Unlock()
		}
	}
	return nil, -1
}

// locked returns id's slot, locked, and its index, or nil; sh.mu must be
// held.
func (sh *shard) locked(id string, h uint64) (*slot, int) {
	if t := sh.tab.Load(); t != nil {
		return t.lookup(id, h)
	}
	return nil, -1
}

// insert returns the index of id's slot, locked, adding an empty one when
// there is none; sh.mu must be held. The caller gives it a counter before
// it unlocks it (an empty slot is free). at is the latest bucket start
// the write touches: a full shard first drops what that time has expired,
// then evicts an identity, counted in ev.
func (sh *shard) insert(id string, h uint64, at int64, ev *atomic.Uint64) (*slot, int) {
	if s, i := sh.locked(id, h); s != nil {
		return s, i
	}
	if sh.limit > 0 && sh.n >= sh.limit {
		sh.observeAt(at)
		sh.sweep()
		if sh.n >= sh.limit {
			sh.evict(h)
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
	g := tag(h)
	i := t.free(g)
	s := &t.slots[i]
	s.mu.Lock()
	s.id = id
	t.tags[i].Store(g)
	sh.n++
	return s, i
}

// evict drops one identity of a full shard: of the first evictSample in
// use from h's home slot on, the one that counts least per unit of time
// (each counter's count over its rule's period, summed: a minute's quota
// used up weighs more than a busy day's share of it), the oldest pair on
// a tie; sh.mu must be held.
func (sh *shard) evict(h uint64) {
	t := sh.tab.Load()
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
		if s.rule != nil {
			// Summed as floats: the int64 sum of saturated counts wraps.
			w, at = (float64(s.prev)+float64(s.cur))/float64(s.rule.length), s.bucket*int64(s.rule.length)
		}
		if s.more != nil {
			for _, c := range s.more.c {
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
	if s.rule != nil {
		sh.release(s)
	}
	s.more, s.id = nil, ""
	s.mu.Unlock()
	sh.remove(best)
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

// pairOf reports whether slot s's pair counts rule (name, length).
func pairOf(s *slot, name string, length time.Duration) bool {
	return s.rule != nil && s.rule.is(name, length)
}

// count returns the count of sl in s (0 when s is nil); s.mu must be held.
func count(s *slot, sl kvstore.Slot) int64 {
	if s == nil {
		return 0
	}
	if n := held(s, sl); n != nil {
		return *n
	}
	return 0
}

// counter returns the counter of sl in s, making it when it is missing;
// sh.mu and s.mu must be held. Moving the pair on to a later bucket drops
// the counts that bucket can no longer read, so rolling buckets over
// allocates nothing.
func (sh *shard) counter(s *slot, sl kvstore.Slot) *int64 {
	if s.rule == nil && !s.more.has(sl.Name, sl.Length) {
		if k := sh.intern(sl.Name, sl.Length); k != nil {
			s.rule, s.bucket, s.prev, s.cur = k, sl.Bucket, 0, 0
			return &s.cur
		}
	}
	if pairOf(s, sl.Name, sl.Length) {
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

// intern returns the shard's key of rule (name, length), adding it, and
// counts one more pair of it; nil when the shard has maxRules rules.
func (sh *shard) intern(name string, length time.Duration) *ruleKey {
	free := -1
	for i, k := range sh.rules {
		if k == nil {
			if free < 0 {
				free = i
			}
			continue
		}
		if k.is(name, length) {
			k.refs++
			return k
		}
	}
	k := &ruleKey{name: name, length: length, refs: 1}
	switch {
	case free >= 0:
		sh.rules[free] = k
	case len(sh.rules) < maxRules:
		sh.rules = append(sh.rules, k)
	default:
		return nil
	}
	return k
}

// release drops slot s's pair; sh.mu and s.mu must be held.
func (sh *shard) release(s *slot) {
	if s.rule.refs--; s.rule.refs == 0 {
		for i, k := range sh.rules {
			if k == s.rule {
				sh.rules[i] = nil // keep no name alive
			}
		}
	}
	s.rule, s.bucket, s.prev, s.cur = nil, 0, 0, 0
}

// unlockSlot unlocks slot i, returned by insert, freeing it when it holds
// no counter (an identity whose first request changed nothing); sh.mu must
// be held.
func (sh *shard) unlockSlot(s *slot, i int) {
	used := s.used()
	if !used {
		s.id = "" // keep no id alive
	}
	s.mu.Unlock()
	if !used {
		sh.remove(i)
	}
}

// known returns id's slot, locked, when a call on slots may read and
// count in it without the shard's lock: the slot holds id and has its pair
// (so that no counter needs a new rule), no slot starts after the time the
// shard has seen, and no sweep is due. Otherwise it returns nil and the
// call takes the shard's lock.
func (sh *shard) known(id string, h uint64, slots []kvstore.Slot) *slot {
	t := sh.tab.Load()
	if t == nil {
		return nil
	}
	s, _ := t.lookup(id, h)
	if s == nil {
		return nil
	}
	now := sh.now.Load()
	ok := s.rule != nil && now < sh.nextSweep.Load()
	for _, x := range slots {
		ok = ok && x.Bucket*int64(x.Length) <= now
	}
	if !ok {
		s.mu.Unlock()
		return nil
	}
	return s
}

// write returns id's slot, locked, for a write to slots: without the
// shard's lock (i < 0) when known allows it, else with the shard's lock
// held and the slot at index i, inserted when missing (ev counts an
// eviction that made room). Unless insert is set, a missing identity is
// not inserted: write returns nil, holding no lock.
func (sh *shard) write(id string, h uint64, slots []kvstore.Slot, ev *atomic.Uint64, insert bool) (s *slot, i int) {
	if s = sh.known(id, h, slots); s != nil {
		return s, -1
	}
	sh.mu.Lock()
	if !insert {
		if s, i = sh.locked(id, h); s == nil {
			sh.mu.Unlock()
		}
		return s, i
	}
	at := int64(0)
	for _, x := range slots {
		at = max(at, x.Bucket*int64(x.Length))
	}
	return sh.insert(id, h, at, ev)
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
	sh, h := s.shard(id)
	var sl *slot
	if t := sh.tab.Load(); t != nil {
		sl, _ = t.lookup(id, h)
	}
	if sl == nil {
		// Not found without the shard's lock: a resize or a removal may
		// have hidden it. Under the lock it is where find says; its own
		// lock then keeps it there.
		sh.mu.Lock()
		sl, _ = sh.locked(id, h)
		sh.mu.Unlock()
	}
	for k, x := range slots {
		counts[k] = count(sl, x)
	}
	if sl != nil {
		sl.mu.Unlock()
	}
	return nil
}

// Add implements kvstore.Store. It never fails. A count stops at
// math.MaxInt64. An Add that only takes counts back (no cost is positive)
// from an identity the store does not hold does nothing: the counts went
// with it, expired or evicted.
func (s *Store) Add(_ context.Context, id string, slots []kvstore.Slot, costs []int64) error {
	sh, h := s.shard(id)
	// Taking back counts of an identity the store no longer holds (expired,
	// or evicted) must not bring it back with a credit, nor evict another
	// to make room for it.
	sl, i := sh.write(id, h, slots, &s.evicted, !takeBack(costs))
	if sl == nil {
		return nil
	}
	for k, x := range slots {
		switch {
		case costs[k] > 0:
			// Saturated: a count wrapped negative reads as empty.
			if n := sh.counter(sl, x); *n > math.MaxInt64-costs[k] {
				*n = math.MaxInt64
			} else {
				*n += costs[k]
			}
		case costs[k] < 0:
			// Only a counter the identity holds is taken back from: a
			// new one (or a reused cell) would be a credit, or wipe a
			// count still read after a clock correction.
			if n := held(sl, x); n != nil {
				*n += costs[k]
			}
		}
	}
	sh.done(sl, i, true, slots)
	return nil
}

// held returns the counter of sl in s, or nil; s.mu must be held.
func held(s *slot, sl kvstore.Slot) *int64 {
	if pairOf(s, sl.Name, sl.Length) {
		switch sl.Bucket {
		case s.bucket:
			return &s.cur
		case s.bucket - 1:
			return &s.prev
		}
	}
	if s.more != nil {
		for j := range s.more.c {
			if c := &s.more.c[j]; c.bucket == sl.Bucket && c.name == sl.Name && c.length == sl.Length {
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
	sh, h := s.shard(id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	at := int64(0)
	for _, c := range conds {
		at = max(at, c.Bucket*int64(c.Length))
	}
	sl, i := sh.insert(id, h, at, &s.evicted)
	ok := true
	for k, c := range conds {
		counts[k] = count(sl, c.Slot)
		if counts[k] > c.Max {
			ok = false
		}
	}
	for k, c := range conds {
		if ok && c.Add != 0 {
			n := sh.counter(sl, c.Slot)
			*n += c.Add
			counts[k] = *n
		}
	}
	sh.unlockSlot(sl, i)
	if ok {
		for _, c := range conds {
			sh.observeSlot(c.Slot)
		}
		sh.sweep()
	}
	return ok, nil
}

// Update implements kvstore.Updater. It never fails.
func (s *Store) Update(_ context.Context, id string, slots []kvstore.Slot, counts, costs []int64, a kvstore.Admitter) (bool, error) {
	sh, h := s.shard(id)
	sl, i := sh.write(id, h, slots, &s.evicted, true)
	for k, x := range slots {
		counts[k] = count(sl, x)
	}
	ok := a.Admit(counts)
	for k, x := range slots {
		if ok && costs[k] != 0 {
			*sh.counter(sl, x) += costs[k]
		}
	}
	sh.done(sl, i, ok, slots)
	return ok, nil
}

// Immediate implements kvstore.Immediate: the store's calls never wait.
func (*Store) Immediate() {}

// UpdateRule implements kvstore.RuleUpdater. It never fails.
//
// The common check (a known identity whose pair counts r, at or after the
// pair's bucket, in time the shard has seen, no sweep due) holds only its
// slot's lock; any other takes the shard's lock too.
func (s *Store) UpdateRule(_ context.Context, id string, r window.Rule, pos window.Pos, cost int64) (prev, cur int64, ok bool, err error) {
	sh, h := s.shard(id)
	if t := sh.tab.Load(); t != nil {
		if sl, _ := t.lookup(id, h); sl != nil {
			now := sh.now.Load()
			if pairOf(sl, r.Name, r.Period) && pos.Index >= sl.bucket &&
				pos.Index*int64(r.Period) <= now && now < sh.nextSweep.Load() {
				switch pos.Index - sl.bucket {
				case 0:
					prev, cur = sl.prev, sl.cur
				case 1:
					prev = sl.cur
				}
				ok = r.AdmitsAt(pos, prev, cur, cost)
				if ok && cost != 0 {
					if pos.Index != sl.bucket {
						sl.bucket, sl.prev, sl.cur = pos.Index, prev, 0
					}
					sl.cur += cost
				}
				sl.mu.Unlock()
				return prev, cur, ok, nil
			}
			sl.mu.Unlock()
		}
	}
	return sh.updateRule(id, h, r, pos, cost, &s.evicted)
}

// updateRule is UpdateRule under the shard's lock; ev counts evictions.
func (sh *shard) updateRule(id string, h uint64, r window.Rule, pos window.Pos, cost int64, ev *atomic.Uint64) (prev, cur int64, ok bool, err error) {
	cs := kvstore.Slot{Name: r.Name, Bucket: pos.Index, Length: r.Period}
	sh.mu.Lock()
	sl, i := sh.insert(id, h, cs.Bucket*int64(cs.Length), ev)
	prev = count(sl, kvstore.Slot{Name: r.Name, Bucket: pos.Index - 1, Length: r.Period})
	cur = count(sl, cs)
	ok = r.AdmitsAt(pos, prev, cur, cost)
	if ok && cost != 0 {
		*sh.counter(sl, cs) += cost
	}
	sh.unlockSlot(sl, i)
	if ok {
		sh.observeSlot(cs)
		sh.sweep()
	}
	sh.mu.Unlock()
	return prev, cur, ok, nil
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
		if s.rule != nil {
			switch {
			case !live(s.bucket, s.rule.length):
				sh.release(s)
			case !live(s.bucket-1, s.rule.length):
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
		if !s.used() {
			s.id = ""
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
