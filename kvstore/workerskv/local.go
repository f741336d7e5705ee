package workerskv

import (
	"context"
	"net/url"
	"strconv"
	"time"

	"github.com/slidegate/slidegate/kvstore"
)

// Local is the local-scope counter store of a Worker: exact, atomic counters
// in isolate globals that never reach KV (limiter.Options.Local). The zero
// value is not usable; call NewLocal. It is safe for concurrent use.
type Local struct {
	g   Globals
	now func() time.Time
}

var _ kvstore.Updater = (*Local)(nil)

// NewLocal returns a Local over g. now dates the sweeps of expired counters;
// nil means time.Now.
func NewLocal(g Globals, now func() time.Time) *Local {
	if now == nil {
		now = time.Now
	}
	return &Local{g: g, now: now}
}

// localKey names a local counter. The rule name is escaped and the identity
// comes last, so that no two slots share a key.
func localKey(id string, s kvstore.Slot) string {
	b := make([]byte, 0, 48+len(s.Name)+len(id))
	b = append(b, "l|"...)
	b = append(b, url.QueryEscape(s.Name)...)
	b = append(b, '|')
	b = strconv.AppendInt(b, s.Length.Milliseconds(), 10)
	b = append(b, '|')
	b = strconv.AppendInt(b, s.Bucket, 10)
	b = append(b, '|')
	b = append(b, id...)
	return string(b)
}

// Load implements kvstore.Store. It never fails but for mismatched lengths.
func (l *Local) Load(_ context.Context, id string, slots []kvstore.Slot, counts []int64) error {
	if len(counts) != len(slots) {
		return ErrLength
	}
	l.g.Update(func(c Cells) {
		for i, sl := range slots {
			cell, _ := c.Get(localKey(id, sl))
			counts[i] = cell.N
		}
	})
	return nil
}

// Add implements kvstore.Store.
func (l *Local) Add(_ context.Context, id string, slots []kvstore.Slot, costs []int64) error {
	if len(costs) != len(slots) {
		return ErrLength
	}
	ms := l.now().UnixMilli()
	l.g.Update(func(c Cells) {
		sweep(c, localSweepKey, ms, nil)
		bound(c, ms, nil)
		for i, sl := range slots {
			add(c, localKey(id, sl), sl, costs[i])
		}
	})
	return nil
}

// AddIf implements kvstore.Conditional: the check and the adds run in one
// Globals.Update, so they are atomic within the isolate.
func (l *Local) AddIf(_ context.Context, id string, conds []kvstore.Cond, counts []int64) (bool, error) {
	if len(counts) != len(conds) {
		return false, ErrLength
	}
	ms := l.now().UnixMilli()
	ok := true
	l.g.Update(func(c Cells) {
		sweep(c, localSweepKey, ms, nil)
		bound(c, ms, nil)
		for i, cd := range conds {
			cell, _ := c.Get(localKey(id, cd.Slot))
			counts[i] = cell.N
			ok = ok && cell.N <= cd.Max
		}
		if !ok {
			return
		}
		for i, cd := range conds {
			if cd.Add != 0 {
				add(c, localKey(id, cd.Slot), cd.Slot, cd.Add)
			}
			cell, _ := c.Get(localKey(id, cd.Slot))
			counts[i] = cell.N
		}
	})
	return ok, nil
}

// Update implements kvstore.Updater: the counts are read, a decides and the
// costs are added in one Globals.Update, with no JS call in between that
// could let another request of the isolate run.
func (l *Local) Update(_ context.Context, id string, slots []kvstore.Slot, counts, costs []int64, a kvstore.Admitter) (bool, error) {
	if len(counts) != len(slots) || len(costs) != len(slots) {
		return false, ErrLength
	}
	ms := l.now().UnixMilli()
	ok := false
	l.g.Update(func(c Cells) {
		sweep(c, localSweepKey, ms, nil)
		bound(c, ms, nil)
		keys := make([]string, len(slots))
		for i, sl := range slots {
			keys[i] = localKey(id, sl)
			cell, _ := c.Get(keys[i])
			counts[i] = cell.N
		}
		if ok = a.Admit(counts); !ok {
			return
		}
		for i, sl := range slots {
			if costs[i] != 0 {
				add(c, keys[i], sl, costs[i])
			}
		}
	})
	return ok, nil
}

// add adds n to the counter key of sl. A take-back (n < 0) from a counter
// the isolate no longer holds (evicted since it counted) does nothing: it
// would make a credit.
func add(c Cells, key string, sl kvstore.Slot, n int64) {
	cell, ok := c.Get(key)
	if !ok && n < 0 {
		return
	}
	cell.N = plus(cell.N, n)
	cell.Expires = max(cell.Expires, sl.Expires().UnixMilli())
	c.Set(key, cell)
}

// plus adds n to the count a: a positive n stops at math.MaxInt64
// (addCount), as the memory store's counts do; a take-back subtracts. The
// limiter caps a punitive count by the count it read, but two requests of
// an isolate may read before either adds: wrapped, a count read as empty.
func plus(a, n int64) int64 {
	if n > 0 {
		return addCount(a, n)
	}
	return a + n
}
