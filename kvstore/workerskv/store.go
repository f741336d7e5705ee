package workerskv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/slidegate/slidegate/kvstore"
	"github.com/slidegate/slidegate/window"
)

// Defaults and limits of the Store.
const (
	// DefaultListInterval is how long a listed sum of the other isolates'
	// counts of a current bucket is served before a background refresh.
	DefaultListInterval = 2 * time.Second
	// DefaultPrevInterval is the same for a previous (closed) bucket, whose
	// sum changes only while the last writes propagate.
	DefaultPrevInterval = 30 * time.Second
	// FlushInterval is the least time between two writes of one KV key by
	// the Worker's clock. Workers KV allows one write per second per key;
	// the 50 ms over a second absorb the delay between reading the clock
	// and making the write (a GC pause of the Wasm instance: 12 ms seen in
	// workerd).
	FlushInterval = 1050 * time.Millisecond
)

const (
	// staleBusy is when a flush or list marked in flight is presumed dead
	// (its request was cancelled) and another request takes over. A Worker
	// keeps a request's background work for at most 30 s.
	staleBusy = int64(30 * time.Second / time.Millisecond)
	// sweepEvery is how often the isolate's expired cells are dropped.
	sweepEvery = int64(10 * time.Second / time.Millisecond)
	// maxListPages bounds one refresh: 1,000 keys a page is far more
	// isolates than one slot sees.
	maxListPages = 10
	// maxPutFailures is how many failed writes in a row a flush tries
	// before it gives up until the next Add.
	maxPutFailures = 3
	// sweepKey is the cell that remembers the last sweep.
	sweepKey = "sweep|"
)

// Errors returned by New and the stores.
var (
	ErrKV      = errors.New("workerskv: Options.KV is required")
	ErrGlobals = errors.New("workerskv: Options.Globals is required")
	ErrLater   = errors.New("workerskv: Options.Later is required")
	ErrLength  = errors.New("workerskv: slots and counts differ in length")
	// ErrBinding: the Worker has no KV binding of the name given.
	ErrBinding = errors.New("workerskv: no such KV binding")
	// ErrJS wraps every exception and rejection that comes from JavaScript.
	ErrJS = errors.New("workerskv: javascript")
)

// Options configure a Store.
type Options struct {
	// KV is the namespace the counts are written to and listed from.
	// Required.
	KV KV
	// Globals holds the isolate's counts and cached sums. Required.
	Globals Globals
	// Later runs task in the background no earlier than d from now, keeping
	// the request alive until it ends (waitUntil in the Worker). Required.
	// The Store never waits on a timer in a request's path.
	Later func(d time.Duration, task func(ctx context.Context))
	// Now returns the current time. Nil means time.Now.
	Now func() time.Time
	// ListInterval is how long the other isolates' sum of a current bucket
	// is cached. Zero means DefaultListInterval.
	ListInterval time.Duration
	// PrevInterval is how long the sum of a previous bucket is cached. Zero
	// means DefaultPrevInterval.
	PrevInterval time.Duration
	// Logger receives background write and list failures. Nil discards them.
	Logger *slog.Logger
}

// Store is the Workers KV counter store (see the package doc). It is safe
// for concurrent use; many Stores may share one Globals, as the per-request
// Go instances of a Worker isolate do.
type Store struct {
	kv      KV
	g       Globals
	iso     string
	later   func(time.Duration, func(context.Context))
	now     func() time.Time
	listMs  int64
	prevMs  int64
	flushMs int64
	log     *slog.Logger
}

var _ kvstore.Store = (*Store)(nil)

// New returns a Store, or an error naming the missing option.
func New(o Options) (*Store, error) {
	switch {
	case o.KV == nil:
		return nil, ErrKV
	case o.Globals == nil:
		return nil, ErrGlobals
	case o.Later == nil:
		return nil, ErrLater
	}
	s := &Store{
		kv: o.KV, g: o.Globals, iso: o.Globals.ID(), later: o.Later, now: o.Now, log: o.Logger,
		listMs:  orDefault(o.ListInterval, DefaultListInterval).Milliseconds(),
		prevMs:  orDefault(o.PrevInterval, DefaultPrevInterval).Milliseconds(),
		flushMs: FlushInterval.Milliseconds(),
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

func sumKey(prefix string) string { return "sum|" + prefix }

// Load implements kvstore.Store: counts[i] is this isolate's exact total of
// slots[i] plus the other isolates' last listed sum. A slot this isolate has
// never listed is listed before Load returns when its bucket is old enough
// for others to have written to it; otherwise, and when a listed sum is
// older than its interval, the list runs in the background.
func (s *Store) Load(ctx context.Context, id string, slots []kvstore.Slot, counts []int64) error {
	if len(counts) != len(slots) {
		return ErrLength
	}
	now := s.now()
	ms := now.UnixMilli()
	prefixes := make([]string, len(slots))
	for i, sl := range slots {
		prefixes[i] = SlotPrefix(id, sl)
	}
	var cold, stale []int
	s.g.Update(func(c Cells) {
		sweep(c, ms)
		for i, sl := range slots {
			p := prefixes[i]
			own, _ := c.Get(p + s.iso)
			sum, ok := c.Get(sumKey(p))
			counts[i] = own.N + max(sum.N, 0)
			busy := sum.Busy != 0 && ms-sum.Busy < staleBusy
			switch {
			case busy:
			case sum.At == 0:
				sum.Busy, sum.Expires = ms, sl.Expires().UnixMilli()
				c.Set(sumKey(p), sum)
				if !ok && now.Sub(window.Start(sl.Bucket, sl.Length)) >= time.Duration(s.listMs)*time.Millisecond {
					cold = append(cold, i)
				} else {
					stale = append(stale, i)
				}
			case s.stale(sl, now, sum.At):
				sum.Busy = ms
				c.Set(sumKey(p), sum)
				stale = append(stale, i)
			}
		}
	})
	for _, i := range stale {
		p, sl := prefixes[i], slots[i]
		s.later(0, func(ctx context.Context) {
			if err := s.refresh(ctx, p, sl); err != nil {
				s.log.Warn("workerskv: background list failed", "prefix", p, "err", err)
			}
		})
	}
	if len(cold) == 0 {
		return nil
	}
	errs := make([]error, len(cold))
	var wg sync.WaitGroup
	for k, i := range cold {
		wg.Go(func() { errs[k] = s.refresh(ctx, prefixes[i], slots[i]) })
	}
	wg.Wait()
	s.g.Update(func(c Cells) {
		for _, i := range cold {
			own, _ := c.Get(prefixes[i] + s.iso)
			sum, _ := c.Get(sumKey(prefixes[i]))
			counts[i] = own.N + max(sum.N, 0)
		}
	})
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("workerskv: load: %w", err)
	}
	return nil
}

// stale reports whether a sum of slot listed at (Unix ms) should be listed
// again at now. A closed bucket is listed once more after its last writes
// have had time to land (one flush and one list interval past its end), then
// every PrevInterval.
func (s *Store) stale(sl kvstore.Slot, now time.Time, at int64) bool {
	ms := now.UnixMilli()
	if sl.Bucket < window.Index(now, sl.Length) {
		settled := window.Start(sl.Bucket+1, sl.Length).UnixMilli() + s.flushMs + s.listMs
		return ms-at >= s.prevMs || (at < settled && ms >= settled)
	}
	return ms-at >= s.listMs
}

// refresh lists the slot's keys and stores the other isolates' sum.
func (s *Store) refresh(ctx context.Context, prefix string, sl kvstore.Slot) error {
	start := s.now().UnixMilli()
	own := prefix + s.iso
	var sum int64
	var err error
	cursor := ""
	for range maxListPages {
		var p Page
		if p, err = s.kv.List(ctx, prefix, cursor); err != nil {
			err = fmt.Errorf("workerskv: list %q: %w", prefix, err)
			break
		}
		for _, k := range p.Keys {
			if k.Name != own {
				sum += max(k.N, 0)
			}
		}
		if p.Done || p.Cursor == "" {
			break
		}
		cursor = p.Cursor
	}
	s.g.Update(func(c Cells) {
		cell, _ := c.Get(sumKey(prefix))
		cell.Busy = 0
		if err == nil {
			cell.N, cell.At = sum, max(start, 1)
		}
		cell.Expires = sl.Expires().UnixMilli()
		c.Set(sumKey(prefix), cell)
	})
	return err
}

// Add implements kvstore.Store: it adds to this isolate's totals at once,
// with no wait between reading and writing them, and schedules their write
// behind.
func (s *Store) Add(_ context.Context, id string, slots []kvstore.Slot, costs []int64) error {
	if len(costs) != len(slots) {
		return ErrLength
	}
	now := s.now()
	ms := now.UnixMilli()
	keys := make([]string, len(slots))
	for i, sl := range slots {
		keys[i] = SlotPrefix(id, sl) + s.iso
	}
	var start [][2]int64 // slot index, wait in ms
	s.g.Update(func(c Cells) {
		sweep(c, ms)
		for i, sl := range slots {
			cell, _ := c.Get(keys[i])
			cell.N += costs[i]
			cell.Expires = max(cell.Expires, sl.Expires().UnixMilli())
			if cell.N != cell.Flushed && (cell.Busy == 0 || ms-cell.Busy >= staleBusy) {
				cell.Busy = ms
				start = append(start, [2]int64{int64(i), max(cell.At+s.flushMs-ms, 0)})
			}
			c.Set(keys[i], cell)
		}
	})
	for _, st := range start {
		key, sl := keys[st[0]], slots[st[0]]
		s.later(time.Duration(st[1])*time.Millisecond, func(ctx context.Context) { s.flush(ctx, key, sl, 0) })
	}
	return nil
}

// flush writes the isolate's total of one slot if it changed, no sooner
// than FlushInterval after the key's last write, and goes on until the
// total written is the total counted.
func (s *Store) flush(ctx context.Context, key string, sl kvstore.Slot, failures int) {
	now := s.now()
	ms := now.UnixMilli()
	var total, wait int64
	put := false
	s.g.Update(func(c Cells) {
		cell, ok := c.Get(key)
		switch {
		case !ok: // swept: the slot expired
			return
		case cell.N == cell.Flushed:
			cell.Busy = 0
		case ms < cell.At+s.flushMs:
			wait, cell.Busy = cell.At+s.flushMs-ms, ms
		default:
			total, put = cell.N, true
			cell.At, cell.Busy = ms, ms
		}
		c.Set(key, cell)
	})
	if !put && wait == 0 {
		return
	}
	if put {
		err := s.kv.Put(ctx, key, strconv.FormatInt(total, 10), total, ttl(sl, now))
		if err != nil {
			failures++
			s.log.Warn("workerskv: write failed", "key", key, "failures", failures, "err", err)
		} else {
			failures = 0
		}
		s.g.Update(func(c Cells) {
			cell, ok := c.Get(key)
			if !ok {
				return
			}
			if err == nil {
				cell.Flushed = total
			}
			if cell.N == cell.Flushed || failures >= maxPutFailures {
				cell.Busy = 0
			} else {
				ms := s.now().UnixMilli()
				wait, cell.Busy = max(cell.At+s.flushMs-ms, 0), ms
				put = false
			}
			c.Set(key, cell)
		})
		if put {
			return
		}
	}
	s.later(time.Duration(wait)*time.Millisecond, func(ctx context.Context) { s.flush(ctx, key, sl, failures) })
}

// sweep drops expired cells every sweepEvery, and at once when the clock
// went backwards.
func sweep(c Cells, ms int64) {
	last, _ := c.Get(sweepKey)
	if ms-last.At < sweepEvery && ms >= last.At {
		return
	}
	c.Sweep(ms)
	c.Set(sweepKey, Cell{At: ms, Expires: math.MaxInt64})
}
