package workerskv

import (
	"crypto/rand"
	"encoding/hex"
	"sync"
)

// Cell is one isolate-global record: a counter of this isolate, or the
// cached sum of a slot's KV keys but the one this isolate's counter writes
// (the other isolates' counters, and this one's evicted ones). It holds numbers
// only, so that it can live in JS globals across requests. Times are Unix
// milliseconds.
type Cell struct {
	// N is the isolate's total of a counter, or the listed sum of the
	// slot's keys but the one the isolate's counter writes (Store.refresh).
	N int64
	// Flushed is the total of the counter's last successful KV write.
	Flushed int64
	// At is when the counter's last write answered (started, while it is
	// awaited), or when the sum was listed; 0 means never.
	At int64
	// Busy is when the write or list in flight started; 0 means none. A
	// Busy older than staleBusy is taken over: its request died. A list
	// that KV failed (not one cut off by the request's deadline) leaves
	// its sum a Busy one list interval short of stale, so that the slot
	// is not listed again before that interval.
	Busy int64
	// Expires is when the cell becomes useless and may be swept.
	Expires int64
	// Owner is when the request that runs the counter's flushes started;
	// 0 means none. The flushes run in that request's background work,
	// which the Worker cancels 30 s after its response, so Owner is never
	// refreshed: a newer request takes the flushes over (see handoffAfter).
	Owner int64
	// Gen is, for a counter made after the isolate evicted a counter whose
	// write had started, or a listed sum, that expires no earlier than it
	// (evictKey: the evicted one may have been of its slot), when it was
	// made; 0 for any other cell. Such a counter writes a KV
	// key of its own (kvKey), so that it does not overwrite the counts the
	// evicted one wrote: every isolate's list, this one's included, goes on
	// counting those.
	Gen int64
}

// Globals is state that lives as long as the isolate (JS globalThis in the
// Worker) and is shared by every request it serves.
type Globals interface {
	// ID returns the isolate's random id, the same for its whole life.
	ID() string
	// Update runs fn with exclusive access to the cells. fn must not wait on
	// anything: in the Worker, exclusivity holds because JS runs one piece of
	// code at a time and fn never yields to the event loop.
	Update(fn func(c Cells))
}

// Cells is the isolate's map of cells, valid inside Globals.Update only.
type Cells interface {
	Get(key string) (Cell, bool)
	Set(key string, c Cell)
	// Sweep deletes the cells whose Expires is at or before now (Unix ms)
	// and, when kept is not nil, calls it with each cell it keeps. kept must
	// not call Set.
	Sweep(now int64, kept func(key string, c Cell))
	// Len returns the number of cells.
	Len() int
	// Delete deletes the cell of key, if any.
	Delete(key string)
}

// MemGlobals is Globals in Go memory: the isolate of a host program or a
// test. The zero value is not usable; call NewMemGlobals. It is safe for
// concurrent use.
type MemGlobals struct {
	id string
	mu sync.Mutex
	m  memCells
}

type memCells map[string]Cell

// NewMemGlobals returns empty globals with the given isolate id, or a random
// one when id is empty.
func NewMemGlobals(id string) *MemGlobals {
	if id == "" {
		id = newIsolateID()
	}
	return &MemGlobals{id: id, m: memCells{}}
}

// ID implements Globals.
func (g *MemGlobals) ID() string { return g.id }

// Update implements Globals.
func (g *MemGlobals) Update(fn func(c Cells)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	fn(g.m)
}

// Len returns the number of cells held.
func (g *MemGlobals) Len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.m)
}

func (m memCells) Get(key string) (Cell, bool) { c, ok := m[key]; return c, ok }
func (m memCells) Set(key string, c Cell)      { m[key] = c }
func (m memCells) Len() int                    { return len(m) }
func (m memCells) Delete(key string)           { delete(m, key) }
func (m memCells) Sweep(now int64, kept func(string, Cell)) {
	for k, c := range m {
		switch {
		case c.Expires <= now:
			delete(m, k)
		case kept != nil:
			kept(k, c)
		}
	}
}

// newIsolateID returns 16 random hex digits: enough that two isolates of one
// slot never share a KV key.
func newIsolateID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}
