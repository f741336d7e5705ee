package workerskv

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/slidegate/slidegate/internal/jsasync"
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
	// FlushInterval is the least time between a write of one KV key and
	// the next, from the answer to one to the start of the next, by the
	// Worker's clock. Workers KV allows one write per second per key;
	// the 50 ms over a second absorb the delay between reading the clock
	// and making the write (a GC pause of the Wasm instance: 12 ms seen in
	// workerd).
	FlushInterval = 1050 * time.Millisecond
)

const (
	// staleBusy is when a flush or list marked in flight is presumed dead
	// (its request was cancelled) and another request takes over. A Worker
	// keeps a request's background work for at most 30 s after its
	// response.
	staleBusy = int64(30 * time.Second / time.Millisecond)
	// handoffAfter is how old the request running a counter's flushes (its
	// Owner) must be before a newer request that counts takes the flushes
	// over, so that under steady traffic they never outlive their request.
	handoffAfter = int64(20 * time.Second / time.Millisecond)
	// flushBudget is how long after its owner request started a flush may
	// still start a write or a wait: the 5 s left of the 30 s the Worker
	// grants are for the last write to finish. A flush that would run past
	// it stops and leaves its counts to the next request (an Add of the
	// counter, or the isolate's next sweep).
	flushBudget = int64(25 * time.Second / time.Millisecond)
	// sweepEvery is how often the isolate's expired cells are dropped, its
	// stopped flushes restarted, and the writes of its other counters
	// gathered in the request that sweeps. A request keeps its Go instance
	// (about 5 MB of the isolate's 128 MB) alive while it runs writes, and
	// each client's writes stayed with its own requests: one instance per
	// client counting about once a second.
	sweepEvery = int64(10 * time.Second / time.Millisecond)
	// maxAdopt bounds the counters one sweep takes on, so that the request
	// stays within Cloudflare's 1,000 KV operations per invocation even
	// when it writes each of them, and its own plan's (up to 8), once a
	// second for its whole flushBudget: (30+8)×24 writes, one more for each
	// counter followed into its next bucket (the last write of the bucket
	// before), and its lists.
	maxAdopt = 30
	// lingerPolls is how many times in a row the adopted writes of a
	// counter look for new counts, FlushInterval apart, and find none
	// before they end. While they linger, the client's requests leave the
	// writes to them instead of starting their own.
	lingerPolls = 2
	// maxListPages bounds one refresh: 1,000 keys a page is far more
	// isolates than one slot sees. A slot with more keys is summed from
	// the first pages, and the cut is logged.
	maxListPages = 10
	// maxPutFailures is how many failed writes in a row a flush tries
	// before it stops until the next Add of the counter or the next sweep.
	maxPutFailures = 3
	// sweepKey and localSweepKey are the cells that remember the last sweep
	// of the Store and of Local. Each has its own: Local sweeps first on a
	// request that has local rules, and a shared marker let it take every
	// sweep, so the Store's, which restarts stopped flushes, never came due.
	sweepKey      = "sweep|"
	localSweepKey = "sweep|local"
)

// Errors returned by New and the stores.
var (
	ErrKV      = errors.New("workerskv: Options.KV is required")
	ErrGlobals = errors.New("workerskv: Options.Globals is required")
	ErrLater   = errors.New("workerskv: Options.Later is required")
	ErrLength  = errors.New("workerskv: slots and counts differ in length")
	// ErrBinding: the Worker has no KV binding of the name given, or one
	// that is not a KV namespace (NewBinding: an R2 bucket under that
	// name).
	ErrBinding = errors.New("workerskv: no KV namespace bound")
	// ErrJS wraps every exception and rejection that comes from JavaScript.
	ErrJS = jsasync.ErrJS
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
	// The Store never waits on a timer in a request's path. Later may drop
	// a task due more than 30 s after the request's start (the Worker
	// cancels a request's background work 30 s after its response): the
	// Store schedules none, and hands longer work to newer requests.
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
	Logger Logger
}

// Logger is what a Store logs through; *slog.Logger is one.
type Logger interface {
	Warn(msg string, args ...any)
}

type discard struct{}

func (discard) Warn(string, ...any) {}

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
	log     Logger
	// token, held and holder are this request's hold on a holder cell
	// (hold), changed inside Globals.Update only.
	token  int64
	held   int
	holder string
}

var _ kvstore.Peeker = (*Store)(nil)

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
		token:   newToken(),
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = discard{}
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
	var rearm []string
	s.g.Update(func(c Cells) {
		rearm = s.sweep(c, ms)
		bound(c, ms, s.log)
		for i, sl := range slots {
			p := prefixes[i]
			own, _ := c.Get(p + s.iso)
			sum, ok := c.Get(sumKey(p))
			counts[i] = addCount(own.N, sum.N)
			// A list started a list interval or more after now is from
			// before a step back of the clock, no evidence of one in
			// flight (as for the other Busy checks). Less is allowed for:
			// a failed list's Busy (refresh) is ahead of its start by
			// listMs-staleBusy when that is positive.
			busy := sum.Busy != 0 && ms-sum.Busy < staleBusy && sum.Busy-ms < s.listMs
			coldList := !ok && now.Sub(window.Start(sl.Bucket, sl.Length)) >= time.Duration(s.listMs)*time.Millisecond && !s.evictedSum(c, p, sl)
			switch {
			case busy:
			case (sum.At == 0 && !coldList || sum.At != 0 && s.stale(sl, now, sum.At)) && !s.hold(c, ms):
				// Every holder taken: the sum is served as it is, and a
				// later request lists it.
			case sum.At == 0:
				sum.Busy, sum.Expires = ms, sl.Expires().UnixMilli()
				c.Set(sumKey(p), sum)
				if coldList {
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
	// After this request's own lists: adopted writes that are due go out at
	// once, and a Worker has six connections (KV calls among them) at a
	// time per request.
	defer s.adopt(rearm, ms)
	for _, i := range stale {
		p, sl := prefixes[i], slots[i]
		s.later(0, func(ctx context.Context) {
			err := s.refresh(ctx, p, sl)
			s.g.Update(s.release)
			if err != nil {
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
	// Every slot, not only the listed ones: while this request waited,
	// others of the isolate counted, and the limiter's Add follows this
	// read with no wait in between, which keeps the isolate exact.
	s.g.Update(func(c Cells) {
		for i, p := range prefixes {
			counts[i] = s.count(c, p)
		}
	})
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("workerskv: load: %w", err)
	}
	return nil
}

// evictedSum reports whether the missing sum of slot sl (key prefix p) was
// evicted (bound): the isolate has evicted such cells, and has counted the
// identity in the slot or in the bucket after it, when the client's first
// request in that bucket listed the slot's sum (or started its list). Such
// a sum is listed behind, as a stale one is. Listed in the request, as for
// a client new to the isolate, it made each client the isolate serves wait
// for KV again after each eviction, a store error whenever KV lists
// outlasted store_timeout.
func (s *Store) evictedSum(c Cells, p string, sl kvstore.Slot) bool {
	if !mayBeEvicted(c, sl.Expires().UnixMilli()) {
		return false
	}
	key := p + s.iso
	if cell, _ := c.Get(key); cell.N != 0 {
		return true
	}
	next, _, _, ok := nextKey(key)
	if !ok {
		return false
	}
	cell, _ := c.Get(next)
	return cell.N != 0
}

// Peek implements kvstore.Peeker: counts[i] is this isolate's total of
// slots[i] plus the other isolates' last listed sum, as Load returns them
// at once, with no list and no new cell: a peek at an identity the isolate
// has not seen (a made-up key refused by ip_limits) costs no KV operation
// and no memory.
func (s *Store) Peek(_ context.Context, id string, slots []kvstore.Slot, counts []int64) error {
	if len(counts) != len(slots) {
		return ErrLength
	}
	s.g.Update(func(c Cells) {
		for i, sl := range slots {
			counts[i] = s.count(c, SlotPrefix(id, sl))
		}
	})
	return nil
}

// count is the count of the slot with key prefix p as the isolate holds
// it: its own total plus the other isolates' last listed sum.
func (s *Store) count(c Cells, p string) int64 {
	own, _ := c.Get(p + s.iso)
	sum, _ := c.Get(sumKey(p))
	return addCount(own.N, sum.N)
}

// addCount returns a + b, b negative taken as zero, saturated at
// math.MaxInt64. Listed counts come from KV, where anything may have been
// written (a number past int64's range reads as math.MaxInt64): summed with
// wrap-around, such a count came out negative, which the window takes as
// zero.
func addCount(a, b int64) int64 {
	if b <= 0 {
		return a
	}
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// stale reports whether a sum of slot listed at (Unix ms) should be listed
// again at now. A closed bucket is listed once more after its last writes
// have had time to land (one flush and one list interval past its end), then
// every PrevInterval.
func (s *Store) stale(sl kvstore.Slot, now time.Time, at int64) bool {
	ms := now.UnixMilli()
	if at-ms >= s.listMs {
		// Listed a list interval or more after now: the clock stepped
		// back, and the sum was served as it was until the clock
		// caught up. A smaller step waits less than a list interval
		// more, and lists no more often.
		return true
	}
	if sl.Bucket < window.Index(now, sl.Length) {
		settled := window.Start(sl.Bucket+1, sl.Length).UnixMilli() + s.flushMs + s.listMs
		return ms-at >= s.prevMs || (at < settled && ms >= settled)
	}
	return ms-at >= s.listMs
}

// refresh lists the slot's keys and stores the sum of all but the one this
// isolate's counter writes: the other isolates' keys, and this isolate's
// keys of counters it evicted (Cell.Gen), which its counter does not hold.
// Which key that is is known only once the list has ended: a counter made
// while it was in flight (the client's second request, while its first
// waits for its list), or evicted and made again with a Gen, was counted
// twice, in the sum and as the isolate's own.
func (s *Store) refresh(ctx context.Context, prefix string, sl kvstore.Slot) error {
	start := s.now().UnixMilli()
	var sum int64
	var mine []Key           // this isolate's keys
	ownKey := prefix + s.iso // its counter's, and its Gen keys' after "."
	var err error
	cursor, cut := "", true
	for range maxListPages {
		var p Page
		if p, err = s.kv.List(ctx, prefix, cursor); err != nil {
			break // the KV's error names the prefix (KV)
		}
		for _, k := range p.Keys {
			if strings.HasPrefix(k.Name, ownKey) && (len(k.Name) == len(ownKey) || k.Name[len(ownKey)] == '.') {
				mine = append(mine, k)
			} else {
				sum = addCount(sum, k.N)
			}
		}
		if p.Done || p.Cursor == "" {
			cut = false
			break
		}
		cursor = p.Cursor
	}
	s.g.Update(func(c Cells) {
		cell, _ := c.Get(sumKey(prefix))
		cell.Busy = 0
		own := "" // none: an isolate that holds no counter of the slot sums every key
		if ctr, ok := c.Get(ownKey); ok {
			own = kvKey(ownKey, ctr)
		}
		for _, k := range mine {
			if k.Name != own {
				sum = addCount(sum, k.N)
			}
		}
		switch {
		case err == nil:
			cell.N, cell.At = sum, max(start, 1)
		case ctx.Err() == nil:
			// KV failed (not the request's store_timeout, after
			// which the next request lists in the background at
			// once): the slot counts as being listed for one list
			// interval more, so that the next list comes no sooner
			// than a refresh would. While KV refused every list (the
			// Free plan's 1,000 a day used up), each request listed
			// each slot again and logged the failure.
			cell.Busy = start + s.listMs - staleBusy
		}
		cell.Expires = sl.Expires().UnixMilli()
		c.Set(sumKey(prefix), cell)
	})
	if err == nil && cut {
		// The keys after the last page are not counted: the client is
		// counted short in this isolate, and should be known to be.
		s.log.Warn("workerskv: list cut short, later keys not counted", "prefix", prefix, "pages", maxListPages, "n", sum)
	}
	return err
}

// Add implements kvstore.Store: it adds to this isolate's totals at once,
// with no wait between reading and writing them, and schedules their write
// behind. The request that calls Add runs the writes of a counter when no
// other request does, or when the one that does started more than
// handoffAfter ago.
func (s *Store) Add(_ context.Context, id string, slots []kvstore.Slot, costs []int64) error {
	if len(costs) != len(slots) {
		return ErrLength
	}
	ms := s.now().UnixMilli()
	keys := make([]string, len(slots))
	for i, sl := range slots {
		keys[i] = SlotPrefix(id, sl) + s.iso
	}
	var adopted, start []string
	s.g.Update(func(c Cells) {
		adopted = s.sweep(c, ms)
		bound(c, ms, s.log)
		for i, sl := range slots {
			cell, ok := c.Get(keys[i])
			if !ok && costs[i] < 0 {
				continue // a take-back from a counter evicted since: no credit
			}
			if !ok {
				cell.Gen = newGen(c, sl.Expires().UnixMilli(), ms)
			}
			cell.N = plus(cell.N, costs[i])
			cell.Expires = max(cell.Expires, sl.Expires().UnixMilli())
			if canTakeOver(cell, ms) {
				cell.Owner = ms
				start = append(start, keys[i])
			}
			c.Set(keys[i], cell)
		}
	})
	s.adopt(adopted, ms)
	for _, key := range start {
		s.later(0, func(ctx context.Context) { s.flush(ctx, key, ms, 0, -1) })
	}
	return nil
}

// canTakeOver reports whether a request at ms should run the writes of a
// counter: it has counts to write, no write of it is in flight, and no
// request runs its writes or the one that does is old enough to hand off.
func canTakeOver(c Cell, ms int64) bool {
	return c.N != c.Flushed &&
		(c.Owner == 0 || ms-c.Owner >= handoffAfter || ms < c.Owner) &&
		(c.Busy == 0 || ms-c.Busy >= staleBusy || ms < c.Busy)
}

// adopt runs the writes of the counters keys, whose Owner the calling
// request at ms has just become by its sweep, in its background work; they
// linger (lingerPolls).
func (s *Store) adopt(keys []string, ms int64) {
	for _, key := range keys {
		s.later(0, func(ctx context.Context) { s.flush(ctx, key, ms, 0, 0) })
	}
}

// flush writes the isolate's total of one counter while it differs from
// the total last written, no sooner than FlushInterval after the key's last
// write, for as long as the request that started at owner runs the
// counter's writes and has time left (flushBudget). failures counts the
// failed writes in a row so far. idle counts the polls in a row that found
// nothing to write, of writes that linger (adopted by a sweep); -1: they
// end as soon as everything is written.
func (s *Store) flush(ctx context.Context, key string, owner int64, failures, idle int) {
	// Lingering writes follow their counter into its next bucket when that
	// starts (of buckets of flushBudget or longer: once per boundary its
	// budget reaches), so
	// that the client's first counts there find their writes run. They
	// went back to the client's own requests until the next sweep, one
	// instance alive per busy client for up to 10 s of every minute.
	var next string
	var begin, length int64
	follows := false
	if idle >= 0 { // a lingering write: not on every step of a client's own
		next, begin, length, follows = nextKey(key)
		follows = follows && length >= flushBudget
	}
	for {
		var total, wait, at int64
		var expires time.Time
		var gen int64
		put, followed, deferred := false, false, false
		s.g.Update(func(c Cells) {
			cell, ok := c.Get(key)
			if !ok || cell.Owner != owner { // swept, or handed off
				return
			}
			ms := s.now().UnixMilli()
			if follows && ms >= begin && ms+s.flushMs-owner <= flushBudget {
				followed = follow(c, next, begin+2*length, owner, ms)
			}
			wait = max(cell.At+s.flushMs-ms, 0)
			switch {
			case cell.N == cell.Flushed && idle >= 0 && idle < lingerPolls && ms+s.flushMs-owner <= flushBudget:
				idle++
				wait = s.flushMs
			case cell.N == cell.Flushed:
				cell.Owner, wait = 0, 0
			case failures >= maxPutFailures || ms+wait-owner > flushBudget:
				deferred = true
				cell.Owner, wait = 0, 0
			case wait == 0 && !s.hold(c, ms):
				// Every holder taken (KV answers slowly): the counts wait
				// for the counter's next request or the next sweep.
				cell.Owner = 0
			case wait == 0:
				total, put, expires, at, gen = cell.N, true, time.UnixMilli(cell.Expires), ms, cell.Gen
				cell.At, cell.Busy = ms, ms
			}
			if follows && wait > 0 && ms < begin && begin < ms+wait {
				wait = begin - ms // look again as the next bucket starts
			}
			c.Set(key, cell)
		})
		// Logged after the cell is set, not between its read and its
		// write: in the Worker a log line is a write to stderr, whose
		// callback from JS lets Go run the instance's other goroutines,
		// and an Add of this counter among them was written over.
		if deferred {
			s.log.Warn("workerskv: write deferred to a later request", "key", key, "failures", failures)
		}
		if followed {
			s.later(0, func(ctx context.Context) { s.flush(ctx, next, owner, 0, 0) })
		}
		if wait > 0 {
			s.later(time.Duration(wait)*time.Millisecond, func(ctx context.Context) { s.flush(ctx, key, owner, failures, idle) })
			return
		}
		if !put {
			return
		}
		failures = s.write(ctx, key, gen, total, expires, at, failures)
		if idle > 0 {
			idle = 0
		}
	}
}

// follow makes the request that started at owner run the writes of the
// counter key, of a bucket that has just started, as it runs those of the
// bucket before, creating it (expiring at expires) when the client has not
// counted there yet. It reports whether the caller is to start them: not
// when a request runs them already (this one, a newer sweep's, the
// client's own) or a write of the counter is in flight.
func follow(c Cells, key string, expires, owner, ms int64) bool {
	cell, ok := c.Get(key)
	switch {
	case !ok:
		cell.Expires, cell.Gen = expires, newGen(c, expires, ms)
	case cell.Owner != 0, cell.Busy != 0 && ms-cell.Busy < staleBusy && ms >= cell.Busy:
		return false
	}
	cell.Owner = owner
	c.Set(key, cell)
	return true
}

// write puts the total of the counter key made at gen (Cell.Gen) to its KV
// key (kvKey), started at (Unix ms), records it as written when the put
// succeeds, and returns the failed writes in a row.
func (s *Store) write(ctx context.Context, key string, gen, total int64, expires time.Time, at int64, failures int) int {
	kk := kvKey(key, Cell{Gen: gen})
	err := s.kv.Put(ctx, kk, strconv.FormatInt(total, 10), total, ttl(expires, time.UnixMilli(at)))
	if err != nil {
		failures++
		s.log.Warn("workerskv: write failed", "key", kk, "failures", failures, "err", err)
	} else {
		failures = 0
	}
	s.g.Update(func(c Cells) {
		s.release(c)
		cell, ok := c.Get(key)
		if !ok {
			return
		}
		if cell.Busy == at {
			// The next write starts FlushInterval after this one
			// answered, not after it started: a put that waited for a
			// connection, or answered late, may have reached KV just
			// now, and the next, started at once, followed it within a
			// second (429).
			cell.Busy, cell.At = 0, max(cell.At, s.now().UnixMilli())
		}
		// Only on the counter that made the put: the cell may be one made
		// anew since its eviction (bound ranks a counter before its write
		// starts, during a log line), which writes a KV key of its own, and
		// taken for written at this total it left its counts unwritten.
		if err == nil && cell.Gen == gen {
			cell.Flushed = total
		}
		c.Set(key, cell)
	})
	return failures
}

// sweep drops expired cells every sweepEvery (FlushInterval while more than
// maxAdopt counters are left to take on and the sweeps of the last
// sweepEvery run half those they took on still; sooner, as the counters of the
// oldest sweep of the last sweepEvery age), and at once when the clock went
// backwards. It returns the counters of this isolate whose writes it
// has made the calling request at ms run (adopt): first those a flush
// stopped before writing everything (after failed writes, or at the end of
// its request's time), then, up to maxAdopt in all, those whose writes
// another request runs, with counts to write or lingering (those an older
// sweep took on first; not those a sweep of the last sweepEvery did), or
// of a busy client written a moment ago. The request that ran them stops them
// at its next step (the counter's Owner is no longer its own), and its Go
// instance can end: the writes of the isolate's busy clients gather in
// the requests that swept last, one for each maxAdopt counters.
func (s *Store) sweep(c Cells, ms int64) []string {
	var stopped, aged, owned []string
	oldest := ms // the oldest sweep of the last sweepEvery that runs a counter
	// The counters the sweeps of the last sweepEvery took on, and those
	// they run still: busy clients' counters stay, a flood's are written
	// and let go.
	var took, held int64
	sweep(c, sweepKey, ms, func(key string, cell Cell) {
		switch {
		case !strings.HasPrefix(key, KeyPrefix):
			if strings.HasPrefix(key, "swept|") && ms-cell.At < sweepEvery {
				took += cell.N
			}
		case !adoptable(cell, ms):
		case cell.N != cell.Flushed && (cell.Owner == 0 || ms-cell.Owner > flushBudget):
			// A stopped flush, or one whose request is gone past its
			// flushBudget (its work cancelled, or a put that never
			// answered): no request runs its counts.
			stopped = append(stopped, key)
		case cell.Owner == 0 || !swept(c, cell.Owner):
			// Run by a client's own request, or written a moment ago
			// (adoptable), which its next request would run.
			owned = append(owned, key)
		case cell.Owner <= ms-sweepEvery || cell.Owner > ms:
			// Taken on by an older sweep (or one the clock has since
			// stepped back past): first, before its writes stop at
			// its flushBudget and go back to each client's own
			// requests.
			aged = append(aged, key)
		default:
			oldest = min(oldest, cell.Owner)
			held++
		}
		// Taken on by a sweep of the last sweepEvery, they are left
		// there: taken again, they were the same maxAdopt each time,
		// and the busy clients past them each kept the request that
		// counted last alive for its writes, a Go instance each.
	})
	owned = append(aged, owned...)
	if (len(stopped) > maxAdopt || len(stopped)+len(owned) > maxAdopt && 2*held >= took) && (s.held > 0 || s.freeHolder(c, ms) != "") {
		// The next request sweeps again a second from now, with KV
		// operations of its own, for the counters left behind: one
		// sweep every 10 s restarted 30 stopped flushes, and after an
		// outage of KV the counts of quiet clients expired before their
		// turn; it took on the writes of 30 busy counters, and 30 busy
		// clients of two rules held up to 34 Go instances. Not while
		// every holder is taken (KV answers slowly): this request could
		// write none of them, nor could the next, and each sweep reads
		// every cell. For counters not stopped, only while the sweeps of
		// the last sweepEvery run half those they took on still, as they
		// do busy clients': a stream of new keys counted twice each (a
		// flood, or a busy site's new visitors) kept more than maxAdopt
		// "written a moment ago" or waiting for their second write, which
		// the sweeps took on and let go 2 s later, and a sweep came every
		// second for as long as the stream lasted.
		c.Set(sweepKey, Cell{At: ms - sweepEvery + s.flushMs, Expires: math.MaxInt64})
	} else if last, _ := c.Get(sweepKey); oldest < last.At {
		// The next sweep comes as the counters of the oldest sweep of the
		// last sweepEvery become its to take (aged), not sweepEvery
		// after this one: past 200 busy counters, those a burst of
		// sweeps took on first waited for the next burst, 10 s after
		// its last sweep, and their writes stopped at flushBudget and
		// went back to each client's own requests (51 instances for
		// 100 busy clients of two rules).
		c.Set(sweepKey, Cell{At: oldest, Expires: math.MaxInt64})
	}
	adopted := append(stopped, owned...)
	adopted = adopted[:min(len(adopted), maxAdopt)]
	if len(adopted) > 0 {
		c.Set(sweptKey(ms), Cell{At: ms, N: int64(len(adopted)), Expires: ms + flushBudget})
	}
	for _, key := range adopted {
		cell, _ := c.Get(key)
		cell.Owner = ms
		c.Set(key, cell)
	}
	return adopted
}

// sweptKey names the cell that marks the request that started at ms as one
// whose sweep took on counters (Store.sweep), for as long as it may run
// their writes (flushBudget).
func sweptKey(ms int64) string { return "swept|" + strconv.FormatInt(ms, 10) }

// swept reports whether the request that started at owner took on counters
// by its sweep.
func swept(c Cells, owner int64) bool {
	_, ok := c.Get(sweptKey(owner))
	return ok
}

// adoptable reports whether the sweep of a request at ms takes over the
// writes of a counter: it has counts to write, or its writes linger in
// another request, or it has counted more than once and was written within
// FlushInterval before ms (a busy client between two writes, whose next
// request would run the next one and stay alive for it; a made-up key
// counted once is not taken on; a write after ms is from before a step
// back of the clock, and each sweep took such counters on, with nothing to
// write, until the clock caught up), and no write of it is in flight. A counter that has
// never counted (made by follow for a client's first counts in a bucket
// that has just started) stays where it is: at a bucket's end, taken with
// the counters of the bucket before, they went past maxAdopt.
func adoptable(c Cell, ms int64) bool {
	return (c.N != c.Flushed || c.Owner != 0 && c.N != 0 || c.N > 1 && ms-c.At < flushMs && ms >= c.At) && c.Owner != ms &&
		(c.Busy == 0 || ms-c.Busy >= staleBusy || ms < c.Busy)
}

// sweep drops expired cells every sweepEvery, as remembered in the cell
// marker, and at once when the clock went backwards, calling kept (when not
// nil) with each cell it keeps.
func sweep(c Cells, marker string, ms int64, kept func(string, Cell)) {
	last, _ := c.Get(marker)
	if ms-last.At < sweepEvery && ms >= last.At {
		return
	}
	c.Sweep(ms, kept)
	c.Set(marker, Cell{At: ms, Expires: math.MaxInt64})
}
