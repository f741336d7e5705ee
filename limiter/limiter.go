package limiter

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slidegate/slidegate/kvstore"
	"github.com/slidegate/slidegate/window"
)

// MaxRules is the most rules one Check may apply.
const MaxRules = 8

// maxAttempts bounds the conditional writes of one decision. A write fails
// only when another writer changed a counter the decision relied on; the
// store then returns the true counts, and the decision is made again on
// them. Once a previous bucket has grown under a write (share), the room
// left is split between two clauses, and of many writers racing for it
// about half may fail each round while room is left: the attempts go on
// while the counts move (another writer succeeded), up to this bound,
// which the request's store deadline usually reaches first. With 4, a
// burst of 200 on one key left some with ErrContention (a store error:
// admitted uncounted under on_store_error "allow") while room was left.
const maxAttempts = 64

// clockSlack is the grain of the newest time the limiter records: a time
// is recorded when it falls in a later millisecond than the recorded one,
// which keeps the hot path from writing one shared word on every call. A
// check within the recorded millisecond, at or after the recorded time,
// is decided at its own time: in the buckets of the newest time seen, for
// any period of whole milliseconds (a step back of less than clockSlack
// across a boundary reopens no bucket).
const clockSlack = int64(time.Millisecond)

// maxHold bounds the step back of the clock that the limiter holds at the
// newest time seen; a longer step corrects a clock that had run ahead, and
// the limiter follows it. A hold freezes every check at one instant for as
// long as the step (a limit per second admits nothing new meanwhile). Real
// steps back are mostly under a second (ntpd steps offsets over 128 ms), so
// a few seconds would do; a minute keeps every step the tests and the
// reference model take (up to 31 s) held.
const maxHold = time.Minute

var (
	ErrRules      = errors.New("limiter: a check needs between 1 and 8 rules")
	ErrCost       = errors.New("limiter: cost must not be negative")
	ErrRule       = errors.New("limiter: rule needs a positive limit and period")
	ErrContention = errors.New("limiter: counters kept changing under the conditional write")
	// ErrUncounted comes with a valid denial: with CountDenied, a request
	// the counters denied whose cost a store then failed to count. The
	// request is denied all the same; the punitive count is missing from
	// the failed scope's rules (local or shared), whose decisions report
	// the state without it, while a scope counted before stays counted.
	ErrUncounted = errors.New("limiter: the denied request's cost was not counted")
	// ErrLocalCounted: the shared store failed after the rules of local
	// scope admitted the request and counted its cost. A local rule holds
	// in a store outage too, so the count stays: a caller that then
	// refuses the request (on_store_error deny) takes it back with Refund
	// of the local rules.
	ErrLocalCounted = errors.New("limiter: the shared store failed; the local rules counted the request")
	// ErrSharedUnread comes with a valid denial: the rules of local scope
	// denied the request, and the shared store failed as the shared rules
	// were read for the answer. Their decisions in the Result are zero
	// (Limit 0), and the Decision is the local rules' alone: its
	// RetryAfter is when they admit the request, which the shared rules
	// may not yet do. With CountDenied the cost is counted in the local
	// rules only.
	ErrSharedUnread = errors.New("limiter: the local rules denied; the shared rules could not be read")
	// ErrNoStore: an Options store was left nil in a js build, which has
	// no memory store to put there (Options.Store).
	ErrNoStore = errors.New("limiter: no store: js builds have no memory store; set Options.Store and Options.Local")
)

// Rule is a window.Rule with a scope.
type Rule struct {
	window.Rule
	// Local rules are counted in this process (or Worker isolate) only and
	// never stored: a cheap per-second flood layer in front of the shared
	// per-key limits.
	Local bool
}

// Options configure a Limiter. The zero value is a limiter on a fresh
// memory store with the deny cache on (in js builds, on no store: see
// Store).
type Options struct {
	// Store keeps the shared counters. Nil means memstore.New(), except
	// in js builds (the Worker), which leave the memory store out of
	// their bundle: there nil is a store whose every call fails with
	// ErrNoStore.
	Store kvstore.Store
	// Local keeps the counters of Local rules. Nil means memstore.New(),
	// as for Store.
	Local kvstore.Conditional
	// CountDenied records the cost of denied requests too, so that a client
	// that keeps trying stays blocked (punitive limiting). It turns the deny
	// cache off: every denied request must reach the store to be counted.
	// A rule left with less than the request's cost then has NextAfter the
	// wait until that cost fits again (a denial's RetryAfter), not until
	// one unit is back: a request sent then would be refused and counted.
	CountDenied bool
	// DisableDenyCache makes every check reach the store. By default an
	// identity that shared rules found blocked is answered from memory
	// until its RetryAfter. An identity may be checked with several rule
	// sets, overlapping or not (a plan, and another plan named in a check
	// API request): a set's remembered denial is dropped when a request
	// of another set that shares one of its counters (a rule of the same
	// name and period) goes to the store, and when a Refund takes cost
	// back (a check that read the store before the refund does not
	// remember its denial). One race remains: a request of another set
	// sharing a counter, counted while a check of the identity is in
	// flight (its counts read, its denial not yet remembered), leaves the
	// remembered wait short by what it added.
	DisableDenyCache bool
	// DenyCacheSize bounds the identities the deny cache holds. Zero means
	// 65536.
	DenyCacheSize int
	// Latest returns the newest time that other limiters counting on the
	// same stores have seen, as Latest of this one does: the Worker's
	// limiter serves one request, and the requests of its isolate keep
	// their newest time in the isolate (workerskv.Clock). A check counted
	// at an older time, in a bucket such a check has left while this one
	// awaited its store, is taken back and checked again at that time, as
	// the checks of one limiter are (see overtaken). Nil means this
	// limiter's own checks only.
	Latest func() time.Time
}

// Limiter decides requests against rules, counting admitted cost in a
// kvstore. It is safe for concurrent use.
type Limiter struct {
	shared      stores
	local       stores
	countDenied bool
	deny        *denyCache // nil when off
	latest      atomic.Int64
	others      func() time.Time // Options.Latest
	pool        sync.Pool
}

// stores is one store seen through each interface it implements, asserted
// once instead of on every call.
type stores struct {
	// Not comparable, so that the Worker's bundle carries no equality
	// function for it (docs/edge.md, "Size").
	_ [0]func()

	kvstore.Store
	cond kvstore.Conditional // nil when the store cannot admit atomically
	up   kvstore.Updater     // nil when the store cannot decide under its lock
	ru   kvstore.RuleUpdater // nil when the store cannot decide a rule itself
	peek kvstore.Peeker      // nil when the store reads only through Load
	read kvstore.Reader      // nil when Load is the store's own reading
}

func newStores(s kvstore.Store) stores {
	st := stores{Store: s}
	st.cond, _ = s.(kvstore.Conditional)
	st.up, _ = s.(kvstore.Updater)
	st.ru, _ = s.(kvstore.RuleUpdater)
	st.peek, _ = s.(kvstore.Peeker)
	st.read, _ = s.(kvstore.Reader)
	return st
}

// Result is the answer to one Check.
type Result struct {
	// Decision is the deciding rule's decision (window.Combine of Rules).
	window.Decision
	// Rules holds one decision per rule, in the order the rules were given;
	// N of them are set.
	Rules [MaxRules]window.Decision
	N     int
	// Cached reports that the deny cache answered without the store.
	Cached bool
	// At is the time the rules were decided at: the check's now, or the
	// newest time the limiter had seen when the clock went backwards.
	// RetryAfter, ResetAfter and NextAfter count from now all the same.
	// Refund takes it to find the buckets the check counted in.
	At time.Time
}

// All returns the per-rule decisions.
func (r *Result) All() []window.Decision { return r.Rules[:r.N] }

// scratch holds the per-call buffers handed to stores; pooled so that a
// check allocates nothing.
type scratch struct {
	idx    [MaxRules]int
	slots  [2 * MaxRules]kvstore.Slot
	counts [2 * MaxRules]int64
	conds  [2 * MaxRules]kvstore.Cond
	costs  [2 * MaxRules]int64 // by slot: 0 for a previous bucket
	// prev and cur are the counts each rule was decided on, before this
	// request's cost; pos is now's place among each rule's buckets.
	prev, cur [MaxRules]int64
	pos       [MaxRules]window.Pos

	// The request Admit decides, while a kvstore.Updater holds its lock.
	now   time.Time
	rules []Rule
	cost  int64
	n     int
	// peek is set for PeekInto: a kvstore.Peeker is read with Peek.
	peek bool
}

// Admit implements kvstore.Admitter over the slots group laid out.
func (sc *scratch) Admit(counts []int64) bool {
	for k, i := range sc.idx[:sc.n] {
		if !sc.rules[i].AdmitsAt(sc.pos[i], counts[2*k], counts[2*k+1], sc.cost) {
			return false
		}
	}
	return true
}

// New returns a Limiter.
func New(o Options) *Limiter {
	l := &Limiter{countDenied: o.CountDenied, others: o.Latest}
	var shared, local kvstore.Store = o.Store, o.Local
	if o.Store == nil {
		shared = memory()
	}
	if o.Local == nil {
		local = memory()
	}
	l.shared, l.local = newStores(shared), newStores(local)
	if !o.DisableDenyCache && !o.CountDenied {
		l.deny = newDenyCache(o.DenyCacheSize)
	}
	l.pool.New = func() any { return new(scratch) }
	return l
}

// Seen records t as a time seen, as a check at t would: a later check
// before it is decided at it. A process whose limiter lives for one request
// (the Worker's: the shim starts a fresh Go instance per request) passes
// on, this way, the newest time an earlier limiter saw (Latest).
func (l *Limiter) Seen(t time.Time) {
	if t.IsZero() {
		return
	}
	n := t.UnixNano()
	for last := l.latest.Load(); n > last && !l.latest.CompareAndSwap(last, n); last = l.latest.Load() {
	}
}

// Latest returns the newest time the limiter has seen, or the zero Time.
func (l *Limiter) Latest() time.Time {
	if n := l.latest.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// Check decides a request of the given cost by identity id at now against
// rules, and counts its cost if it is admitted. Local rules are decided
// first; a request denied by any rule is counted by none (unless
// CountDenied). A cost of zero reads the state without counting.
//
// A non-nil error means a store failed or the arguments are invalid; a
// denial is a Result with Allowed false, never an error. The exceptions
// come with a denial all the same: ErrUncounted (CountDenied: its cost was
// not counted in every rule) and ErrSharedUnread (the local rules denied,
// the shared ones could not be read). After ErrLocalCounted the local
// rules' count of the request stands, for the caller to take back
// (Refund) if it refuses the request.
func (l *Limiter) Check(ctx context.Context, now time.Time, id string, rules []Rule, cost int64) (Result, error) {
	var res Result
	err := l.CheckInto(ctx, now, id, rules, cost, &res)
	return res, err
}

// CheckInto is Check writing into *res, for callers that keep a Result
// around: a Result is some 760 bytes, and copying it is a measurable share
// of a check.
func (l *Limiter) CheckInto(ctx context.Context, now time.Time, id string, rules []Rule, cost int64, res *Result) error {
	if st := l.single(rules, cost); st != nil {
		cached, at, err := l.one(ctx, st, now, id, rules, cost, &res.Decision)
		res.Rules[0], res.N, res.Cached, res.At = res.Decision, 1, cached, at
		if err != nil {
			res.N = 0
		}
		return err
	}
	return l.check(ctx, now, id, rules, cost, true, res)
}

// Decide is Check for a caller that needs only the deciding rule's
// decision (Result.Decision), as a caller of a client-side limiter's
// Allow or Take does: the verdict, the deciding rule's limit, remaining,
// ResetAfter and RetryAfter. It counts exactly as Check does, without the
// Result (some 760 bytes, a decision per rule) that Check has to zero and
// copy.
func (l *Limiter) Decide(ctx context.Context, now time.Time, id string, rules []Rule, cost int64) (window.Decision, error) {
	var d window.Decision
	err := l.DecideInto(ctx, now, id, rules, cost, &d)
	return d, err
}

// DecideInto is Decide writing the decision into *d: a Decision and an
// error are more words than Go returns in registers, so a Decision
// returned is copied through memory once more.
func (l *Limiter) DecideInto(ctx context.Context, now time.Time, id string, rules []Rule, cost int64, d *window.Decision) error {
	if st := l.single(rules, cost); st != nil {
		_, _, err := l.one(ctx, st, now, id, rules, cost, d)
		return err
	}
	var res Result
	err := l.check(ctx, now, id, rules, cost, true, &res)
	*d = res.Decision
	return err
}

// single returns the store of a check that may take one: one valid rule
// and a positive cost, the rule's store deciding a rule under its lock (a
// kvstore.RuleUpdater), CountDenied off. Nil means the general path. The
// HTTP layer's per-IP check (one local rule) and a one-rule plan take it.
// In js builds (oneRule false) no store takes it, and it is always nil.
func (l *Limiter) single(rules []Rule, cost int64) *stores {
	if !oneRule || len(rules) != 1 || cost <= 0 || l.countDenied {
		return nil
	}
	r := &rules[0]
	st := &l.shared
	if r.Local {
		st = &l.local
	}
	if st.ru == nil || r.Limit <= 0 || r.Period <= 0 {
		return nil
	}
	return st
}

// PeekInto decides a request of this cost as CheckInto would, without
// counting anything; every rule reports the state without the request. A
// store that is a kvstore.Peeker is read from memory alone, with no call
// to its backend. A
// caller that denied a request on other rules uses it to learn when these
// rules would admit it too.
func (l *Limiter) PeekInto(ctx context.Context, now time.Time, id string, rules []Rule, cost int64, res *Result) error {
	return l.check(ctx, now, id, rules, cost, false, res)
}

// Remembered answers a request of this cost by id under rules at now from
// the deny cache alone, as CheckInto would, and reports whether it did: it
// calls no store and counts nothing. False means the cache holds no denial
// of the request (or is off), and res means nothing then. A caller that
// counts the request on other rules first (the HTTP layer's ip_limits)
// asks it, so that a request already known to be refused is not counted
// there and taken back again: on DynamoDB, two writes per request of a
// blocked client that the deny cache exists to spare.
func (l *Limiter) Remembered(now time.Time, id string, rules []Rule, cost int64, res *Result) bool {
	if l.deny == nil || !l.deny.any() || cost < 0 || validRules(rules) != nil {
		return false
	}
	at, _ := l.clock(now)
	d, ok := l.deny.answer(id, at, rules, cost, res.Rules[:len(rules)])
	if ok {
		res.Decision, res.N, res.Cached, res.At = d, len(rules), true, at
		res.since(now)
	}
	return ok
}

// Refund takes back a cost that CheckInto counted: the cost of an admitted
// request (or, with CountDenied, of any request) that the caller then
// decided not to serve on other rules, so that a request refused is
// counted by no rule. at is the Result.At of that check, and id, rules and
// cost are the ones it was given. A denial of id under these rules that the
// deny cache remembers is dropped: a concurrent request may have been
// denied on the count taken back. A store error leaves the count in place
// (too high, never too low) and is returned.
func (l *Limiter) Refund(ctx context.Context, at time.Time, id string, rules []Rule, cost int64) error {
	if cost <= 0 {
		return nil
	}
	if err := validRules(rules); err != nil {
		return err
	}
	sc := l.pool.Get().(*scratch)
	defer l.pool.Put(sc)
	// The shared store first: it may fail, the local one (in memory) does
	// not, so a failure leaves the whole count. Taken back first, the
	// local count was gone when the shared refund failed, and a check
	// overtaken at a boundary (check), which keeps its admission when
	// its refund fails, was admitted uncounted by its local rules.
	for _, local := range [2]bool{false, true} {
		if err := l.addCur(ctx, at, id, rules, local, -cost, sc); err != nil {
			return fmt.Errorf("limiter: refund: %w", err)
		}
	}
	if l.deny != nil {
		l.deny.forget(id, rules)
	}
	return nil
}

// check is CheckInto, counting only when write is set.
func (l *Limiter) check(ctx context.Context, now time.Time, id string, rules []Rule, cost int64, write bool, res *Result) error {
	res.Decision, res.N, res.Cached = window.Decision{}, 0, false
	if err := validRules(rules); err != nil {
		return err
	}
	if cost < 0 {
		return ErrCost
	}
	hasLocal, hasShared := false, false
	for _, r := range rules {
		hasLocal = hasLocal || r.Local
		hasShared = hasShared || !r.Local
	}
	// Decide at the limiter's time; the waits count from the caller's.
	caller := now
	now, _ = l.clock(now)
	res.N, res.At = len(rules), now
	if l.deny != nil && l.deny.any() {
		if d, ok := l.deny.answer(id, now, rules, cost, res.Rules[:len(rules)]); ok {
			res.Decision, res.Cached = d, true
			res.since(caller)
			return nil
		}
	}
	var gen uint64
	if l.deny != nil {
		gen = l.deny.generation(id)
	}

	sc := l.pool.Get().(*scratch)
	defer l.pool.Put(sc)
	sc.peek = !write

	allowed := true
	var err error
	if hasLocal {
		allowed, err = l.group(ctx, l.local, now, id, rules, true, cost, write, sc, res)
		if err != nil {
			return err
		}
	}
	if hasShared {
		var ok bool
		ok, err = l.group(ctx, l.shared, now, id, rules, false, cost, write && allowed, sc, res)
		if err != nil {
			if hasLocal && write {
				// The local rules decided, in memory: what they decided
				// holds in an outage. They were taken back, so that under
				// on_store_error allow a plan's local flood guard let
				// every request through, counting none.
				return l.sharedFailed(ctx, now, caller, id, rules, cost, allowed, sc, res, err)
			}
			return err
		}
		if allowed && !ok && hasLocal {
			allowed = false
			if write && !l.countDenied {
				l.undo(ctx, now, id, rules, true, cost, sc)
			}
		}
		allowed = allowed && ok
	}
	if allowed && write && cost > 0 && l.overtaken(caller, now, rules) && l.Refund(ctx, now, id, rules, cost) == nil {
		return l.check(ctx, caller, id, rules, cost, write, res)
	}
	switch {
	case !allowed && write && l.countDenied:
		// A failed count leaves the denial as the counters decided it:
		// the request is refused either way, and the error says what is
		// missing (turned into a store error, it would be let through
		// under on_store_error allow).
		err = l.punish(ctx, now, id, rules, cost, sc, res, false)
	case !allowed || !write:
		uncount(now, rules, cost, sc, res)
	}
	res.Decision = window.Combine(res.All())
	if !res.Allowed && l.deny != nil && !localDenied(rules, res) {
		l.deny.remember(id, now, rules, sc.prev[:], sc.cur[:], gen)
	}
	res.since(caller)
	return err
}

// sharedFailed ends a counting check whose shared rules failed with err
// after its local rules decided (allowed: they admitted and counted the
// request): ErrLocalCounted, or a denial by the local rules alone
// (ErrSharedUnread).
func (l *Limiter) sharedFailed(ctx context.Context, now, caller time.Time, id string, rules []Rule, cost int64, allowed bool, sc *scratch, res *Result, err error) error {
	if allowed {
		res.since(caller)
		return fmt.Errorf("%w: %w", ErrLocalCounted, err)
	}
	for i, r := range rules {
		if !r.Local {
			res.Rules[i] = window.Decision{}
		}
	}
	if l.countDenied {
		// The local store is in memory and does not fail.
		_ = l.punish(ctx, now, id, rules, cost, sc, res, true)
	} else {
		uncount(now, rules, cost, sc, res)
	}
	var local [MaxRules]window.Decision
	n := 0
	for i, r := range rules {
		if r.Local {
			local[n] = res.Rules[i]
			n++
		}
	}
	res.Decision = window.Combine(local[:n])
	res.since(caller)
	return fmt.Errorf("%w: %w", ErrSharedUnread, err)
}

// validRules reports whether rules can be decided: 1 to MaxRules of them,
// each with a positive limit and period.
func validRules(rules []Rule) error {
	if len(rules) == 0 || len(rules) > MaxRules {
		return ErrRules
	}
	for _, r := range rules {
		if r.Limit <= 0 || r.Period <= 0 {
			return fmt.Errorf("%w: %q has limit %d, period %s", ErrRule, r.Name, r.Limit, r.Period)
		}
	}
	return nil
}

// localDenied reports whether a local rule denied. Such a denial is not
// remembered: re-deciding it costs what the deny cache would (the counts
// are in memory), and its counts may hold a concurrent request's cost that
// is about to be taken back (a request the local rules counted and a
// shared rule then denied), which the cache would keep until RetryAfter.
func localDenied(rules []Rule, res *Result) bool {
	for i, r := range rules {
		if r.Local && !res.Rules[i].Allowed {
			return true
		}
	}
	return false
}

// since makes the decisions count from the caller's now when the limiter
// decided at a later time (res.At; the clock went backwards): a client
// told to wait must wait out the step as well.
func (r *Result) since(now time.Time) {
	step := r.At.Sub(now)
	if step <= 0 {
		return
	}
	later(&r.Decision, step)
	for i := range r.N {
		later(&r.Rules[i], step)
	}
}

// later adds step, when positive, to d's waits; zero stays zero, and
// Never stays Never.
func later(d *window.Decision, step time.Duration) {
	if step <= 0 {
		return
	}
	for _, w := range [3]*time.Duration{&d.RetryAfter, &d.ResetAfter, &d.NextAfter} {
		if *w > 0 {
			*w = min(*w, window.Never-step) + step
		}
	}
}

// one decides the most common request, one rule on st, for which single
// returned st; it is tested before check's frame is set up. It needs no
// scratch: the store returns the two counts, and a single decision is its
// own combination. It reports whether the deny cache answered. The
// decision goes to *d: on amd64 a Decision and an error are more words
// than Go returns in registers, and a result returned in memory is copied
// again.
func (l *Limiter) one(ctx context.Context, st *stores, now time.Time, id string, rules []Rule, cost int64, d *window.Decision) (cached bool, at time.Time, err error) {
	at, back := l.clock(now)
	if l.deny != nil && l.deny.any() {
		var out [1]window.Decision
		if *d, cached = l.deny.answer(id, at, rules, cost, out[:]); cached {
			if back {
				later(d, at.Sub(now))
			}
			return true, at, nil
		}
	}
	r := &rules[0]
	var gen uint64
	if l.deny != nil && !r.Local {
		gen = l.deny.generation(id)
	}
	pos := r.At(at)
	prev, cur, ok, err := st.ru.UpdateRule(ctx, id, r.Rule, pos, cost)
	if err != nil {
		*d = window.Decision{}
		return false, at, fmt.Errorf("limiter: update: %w", err)
	}
	if ok && l.overtaken(now, at, rules) && l.Refund(ctx, at, id, rules, cost) == nil {
		return l.one(ctx, st, now, id, rules, cost, d)
	}
	// Decide's verdict is the store's: both are AdmitsAt on these counts.
	r.DecideAtInto(d, pos, prev, cur, cost)
	if !d.Allowed && l.deny != nil && !r.Local {
		l.deny.remember(id, at, rules, []int64{prev}, []int64{cur}, gen)
	}
	if back {
		later(d, at.Sub(now))
	}
	return false, at, nil
}

// group decides the rules of one scope against a store. When admit is false
// (an earlier group denied) it only reads and reports.
func (l *Limiter) group(ctx context.Context, st stores, now time.Time, id string,
	rules []Rule, local bool, cost int64, admit bool, sc *scratch, res *Result) (bool, error) {
	n := 0
	for i, r := range rules {
		if r.Local != local {
			continue
		}
		pos := r.At(now)
		sc.pos[i] = pos
		sc.idx[n] = i
		sc.slots[2*n] = kvstore.Slot{Name: r.Name, Bucket: pos.Index - 1, Length: r.Period}
		sc.slots[2*n+1] = kvstore.Slot{Name: r.Name, Bucket: pos.Index, Length: r.Period}
		sc.costs[2*n], sc.costs[2*n+1] = 0, cost
		n++
	}
	sc.now, sc.rules, sc.cost, sc.n = now, rules, cost, n
	defer func() { sc.rules = nil }()
	slots, counts := sc.slots[:2*n], sc.counts[:2*n]
	ok, err := l.admit(ctx, st, id, admit && cost > 0, sc, slots, counts)
	if err != nil {
		return false, err
	}
	for k, i := range sc.idx[:n] {
		// counts are as decided on: before this request's cost.
		sc.prev[i], sc.cur[i] = counts[2*k], counts[2*k+1]
		d := &res.Rules[i]
		rules[i].DecideInto(d, now, sc.prev[i], sc.cur[i], cost)
		if l.countDenied && d.Remaining < cost && d.RetryAfter != window.Never {
			// A refused request is counted (CountDenied): a rule left
			// short of cost has t when cost fits again. When one unit
			// was back, a client pacing itself by r and t sent a request
			// that was refused and, counted, pushed the next unit
			// further out, for ever. A denial's wait is its RetryAfter
			// (punish decides it again on the counts with the request);
			// an admission's is that wait on the counts with it.
			d.NextAfter = d.RetryAfter
			if d.Allowed {
				d.NextAfter = rules[i].Wait(now, sc.prev[i], sc.cur[i]+cost, rules[i].Limit-cost)
			}
		}
	}
	return ok, nil
}

// admit decides the request laid out in sc and, when write is set, counts
// it, by the best means the store offers. It leaves in counts the values the
// decision was made on.
func (l *Limiter) admit(ctx context.Context, st stores, id string, write bool, sc *scratch, slots []kvstore.Slot, counts []int64) (bool, error) {
	if write && st.up != nil {
		ok, err := st.up.Update(ctx, id, slots, counts, sc.costs[:len(slots)], sc)
		if err != nil {
			return false, fmt.Errorf("limiter: update: %w", err)
		}
		return ok, nil
	}
	load := st.Load
	switch {
	case sc.peek && st.peek != nil:
		load = st.peek.Peek
	case sc.peek:
	case sc.cost == 0 && st.read != nil:
		// A check of cost 0 asks for the state: a cache's lower bounds
		// (DynamoDB's) told a key an instance had not served that its
		// whole quota was left.
		load = st.read.Read
	}
	if err := load(ctx, id, slots, counts); err != nil {
		return false, fmt.Errorf("limiter: load %d counters: %w", len(slots), err)
	}
	// A denial on loaded counts makes no write. It is final on a store's
	// own counts; a cache's (DynamoDB's) may be below the stored ones or
	// above them (another instance took a count back), and a counting
	// check it denies reads the store below.
	ok := sc.Admit(counts)
	if !ok && write && st.read != nil && l.deny != nil {
		// A store whose Load is a cache (DynamoDB's: the counts this
		// instance last saw) makes no write for such a denial, so its
		// wait missed what other instances added since: a Retry-After
		// too early, met by a second 429. And a cached count above the
		// table's (another instance took one back) refused a request
		// the table had room for. The table is read once: the deny
		// cache then answers the identity until the exact wait
		// (without it, with CountDenied, every denied request would
		// read). A failed read leaves the denial on the cached counts,
		// which it leaves as they were.
		if st.read.Read(ctx, id, slots, counts) == nil {
			ok = sc.Admit(counts)
		}
	}
	if !write || !ok {
		return ok, nil
	}
	if st.cond == nil {
		// No atomic admission: record behind the decision. The current
		// slots are compacted to the front of sc.slots, over the layout
		// slots aliases; slot 2k+1 is read before index k is written, and
		// only counts is used afterwards.
		for k := range sc.n {
			sc.slots[k], sc.costs[k] = slots[2*k+1], sc.cost
		}
		if err := st.Add(ctx, id, sc.slots[:sc.n], sc.costs[:sc.n]); err != nil {
			return false, fmt.Errorf("limiter: add: %w", err)
		}
		return true, nil
	}
	// share: a write failed because a previous bucket had grown since it
	// was read (another writer's clock is behind, just after the
	// boundary); from then on that bucket's clause gets a share of the
	// room too.
	share := false
	var read, readCur [MaxRules]int64
	for attempt := range maxAttempts {
		for k, i := range sc.idx[:sc.n] {
			read[k], readCur[k] = counts[2*k], counts[2*k+1]
			sc.conds[2*k], sc.conds[2*k+1] = conds(&sc.rules[i], sc.pos[i], slots[2*k], slots[2*k+1], counts[2*k], counts[2*k+1], sc.cost, share)
		}
		applied, err := st.cond.AddIf(ctx, id, sc.conds[:len(slots)], counts)
		if err != nil {
			return false, fmt.Errorf("limiter: conditional add: %w", err)
		}
		if applied {
			for k := range sc.n {
				counts[2*k+1] -= sc.cost
			}
			return true, nil
		}
		// counts now hold the true values: decide again.
		if !sc.Admit(counts) {
			return false, nil
		}
		moved := false
		for k := range sc.n {
			// Growth between two answers of the store: the first counts
			// may be a cache's (DynamoDB's), stale by whatever was added
			// since, which says nothing of lagging writers; taken for
			// one, it halved the room of every check of a busy key, each
			// then paying log2(room) round trips.
			share = share || attempt > 0 && counts[2*k] > read[k]
			moved = moved || counts[2*k] != read[k] || counts[2*k+1] != readCur[k]
		}
		if !moved {
			// Refused on the counts it was built on: no other writer to
			// wait for, and no attempt would do better.
			break
		}
	}
	return false, ErrContention
}

// conds returns the clauses that admit cost at pos on r's previous and
// current buckets, whose counts were read as prev and cur (r admits the
// request on them). The room left, Limit - cost - (Weighted(prev) + cur),
// goes to the current bucket, which concurrent admissions fill; with
// share, half of it goes to the previous one. Both counts may grow by
// their share before the add, and the request still fits:
// Weighted(prev + a) is at most Weighted(prev) + a. Without share, a
// writer still counting in the previous bucket (its clock a little
// behind, just after the boundary) failed every clause that held that
// bucket to prev exactly, and turned checks far from the limit into
// contention errors.
func conds(r *Rule, pos window.Pos, ps, cs kvstore.Slot, prev, cur, cost int64, share bool) (kvstore.Cond, kvstore.Cond) {
	w := r.WeightedAt(pos, prev)
	a := int64(0)
	if share {
		a = max((r.Limit-cost-w-max(cur, 0))/2, 0)
	}
	pmax := prev + a
	if prev > math.MaxInt64-a {
		pmax = math.MaxInt64
	}
	return kvstore.Cond{Slot: ps, Max: pmax}, kvstore.Cond{Slot: cs, Max: r.Limit - w - cost - a, Add: cost}
}

// undo takes back the cost a group added, after a later group denied.
func (l *Limiter) undo(ctx context.Context, now time.Time, id string, rules []Rule, local bool, cost int64, sc *scratch) {
	// The local store is in memory and cannot fail.
	_ = l.addCur(ctx, now, id, rules, local, -cost, sc)
}

// addCur adds cost (negative: takes it back) to the current buckets at now
// of the rules of one scope, in that scope's store.
func (l *Limiter) addCur(ctx context.Context, now time.Time, id string, rules []Rule, local bool, cost int64, sc *scratch) error {
	return l.add(ctx, id, local, l.curSlots(now, rules, local, cost, sc), sc)
}

// add adds sc.costs[:n] to sc.slots[:n] in one scope's store.
func (l *Limiter) add(ctx context.Context, id string, local bool, n int, sc *scratch) error {
	if n == 0 {
		return nil
	}
	store := l.shared.Store
	if local {
		store = l.local.Store
	}
	return store.Add(ctx, id, sc.slots[:n], sc.costs[:n])
}

// punish counts a denied request's cost in every rule (CountDenied) and
// re-decides the rules on the counts that include it: a denied rule's
// estimate and waits now count the request, and a rule that admitted it
// (it counted the cost already as admitted) must also have room for the
// retry, or it denies too, with the wait for that room. So the deciding
// RetryAfter is the moment every rule admits the retry. When a scope's add
// fails (ErrUncounted), its rules report the state without the cost, and
// the rules of a scope counted before it are re-decided all the same.
// localOnly counts and re-decides the local rules alone (the shared store
// has failed: sharedFailed).
func (l *Limiter) punish(ctx context.Context, now time.Time, id string, rules []Rule, cost int64, sc *scratch, res *Result, localOnly bool) error {
	var uncounted error
	var counted [2]bool // by scope: local, shared
	for k, local := range [2]bool{true, false} {
		if !local && localOnly {
			break
		}
		if local && res.localKept(rules) {
			counted[k] = true // the local group's add was kept
			continue
		}
		// A counter stops at math.MaxInt64: wrapped, it read as empty,
		// and a client counted 9,224 times the largest limit was admitted.
		n := l.curSlots(now, rules, local, cost, sc)
		for j, i := range sc.idx[:n] {
			sc.costs[j] = saturated(sc.cur[i], cost) - sc.cur[i]
		}
		if err := l.add(ctx, id, local, n, sc); err != nil {
			uncounted = fmt.Errorf("%w: %w", ErrUncounted, err)
			break
		}
		counted[k] = true
	}
	for i, r := range rules {
		if !counted[0] && r.Local || !counted[1] && !r.Local {
			unadmit(&res.Rules[i], now, r.Rule, cost, sc.prev[i], sc.cur[i])
			continue
		}
		d, cur := &res.Rules[i], saturated(sc.cur[i], cost)
		if d.Allowed {
			// Used, Remaining, ResetAfter and NextAfter already count
			// the cost.
			d.RetryAfter = r.Wait(now, sc.prev[i], cur, r.Limit-cost)
			d.Allowed = d.RetryAfter == 0
			continue
		}
		d.Used = r.Estimate(now, sc.prev[i], cur)
		d.Remaining = min(max(r.Limit-d.Used, 0), r.Limit)
		d.RetryAfter = r.Wait(now, sc.prev[i], cur, r.Limit-cost)
		d.ResetAfter = r.Wait(now, sc.prev[i], cur, 0)
		d.NextAfter = d.RetryAfter // when cost fits: see group
		if d.NextAfter == window.Never {
			d.NextAfter = r.Wait(now, sc.prev[i], cur, r.NextBound(d.Used))
		}
	}
	return uncounted
}

// saturated returns count + cost for a cost >= 0, or math.MaxInt64 when
// the sum does not fit.
func saturated(count, cost int64) int64 {
	if count > math.MaxInt64-cost {
		return math.MaxInt64
	}
	return count + cost
}

// uncount fixes the decisions of the rules that admitted a request another
// rule denied: the request was not counted, so their Used, Remaining,
// ResetAfter and NextAfter are those of the state without it.
func uncount(now time.Time, rules []Rule, cost int64, sc *scratch, res *Result) {
	for i, r := range rules {
		unadmit(&res.Rules[i], now, r.Rule, cost, sc.prev[i], sc.cur[i])
	}
}

// unadmit fixes d, a rule's decision on counts prev and cur, when the
// request was not counted after all: if the rule admitted it, Used,
// Remaining, ResetAfter and NextAfter become those of the state without it.
func unadmit(d *window.Decision, now time.Time, r window.Rule, cost, prev, cur int64) {
	if d.Allowed {
		d.Used -= cost
		d.Remaining = min(max(r.Limit-d.Used, 0), r.Limit)
		d.ResetAfter = r.Wait(now, prev, cur, 0)
		d.NextAfter = r.Wait(now, prev, cur, r.NextBound(d.Used))
	}
}

// localKept reports whether every local rule admitted, in which case the
// local group counted the cost already.
func (r *Result) localKept(rules []Rule) bool {
	for i, rule := range rules {
		if rule.Local && !r.Rules[i].Allowed {
			return false
		}
	}
	return true
}

// curSlots fills sc.slots and sc.costs with the current-bucket slots of the
// rules of one scope and returns how many.
func (l *Limiter) curSlots(now time.Time, rules []Rule, local bool, cost int64, sc *scratch) int {
	n := 0
	for i, r := range rules {
		if r.Local != local {
			continue
		}
		sc.idx[n] = i
		sc.slots[n] = kvstore.Slot{Name: r.Name, Bucket: window.Index(now, r.Period), Length: r.Period}
		sc.costs[n] = cost
		n++
	}
	return n
}

// clock returns now, or the newest time seen and true when the clock has
// gone backwards by at most maxHold: a step back must not reopen buckets
// that were already counted past. A longer step is a correction of a clock
// that had run ahead, which the limiter follows.
func (l *Limiter) clock(now time.Time) (time.Time, bool) {
	n := now.UnixNano()
	for {
		last := l.latest.Load()
		switch {
		case n < last && last-n <= int64(maxHold):
			return time.Unix(0, last), true
		case n < last:
			// One reading an hour ahead would otherwise decide every
			// check at that hour until the clock caught up: refusing
			// nearly every client for the hour, with a Retry-After of
			// an hour.
			if l.latest.CompareAndSwap(last, n) {
				if l.deny != nil {
					l.deny.corrected(last)
				}
				return now, false
			}
		case n/clockSlack == last/clockSlack:
			// Recording only a time more than clockSlack past the
			// recorded one left a hole: after checks at 0.6 ms before a
			// boundary (recorded) and 0.15 ms past it (not), one at
			// 0.1 ms before it was decided, and counted, in the bucket
			// already left. Within the recorded millisecond a check is
			// decided at its own time.
			return now, false
		default:
			if l.latest.CompareAndSwap(last, n) {
				return now, false
			}
		}
	}
}
