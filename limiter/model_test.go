package limiter

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slidegate/slidegate/kvstore"
	"github.com/slidegate/slidegate/kvstore/memstore"
	"github.com/slidegate/slidegate/window"
)

// The model test runs modelSeeds seeds of modelOps operations each; raise
// them for a longer search, e.g.
//
//	go test ./limiter -run TestModel -args -model.seeds=2000 -model.ops=1000
var (
	modelSeeds = flag.Int("model.seeds", 60, "seeds TestModel runs")
	modelOps   = flag.Int("model.ops", 300, "operations per seed in TestModel")
	modelSeed  = flag.Int64("model.seed", -1, "run TestModel on this seed only")
)

// model is the reference the limiter is compared with: per store (shared,
// local), identity, rule and epoch-aligned bucket, the count of admitted
// cost. A rule's estimate at t is floor(prev × overlap) + cur; a request
// is admitted iff estimate + cost <= limit for every rule of the check; a
// denied request is counted by no rule unless CountDenied. Decisions are
// made at the newest time the limiter has seen, and the waits count from
// the caller's now.
type model struct {
	counts      [2]map[mkey]int64 // by scope: 0 shared, 1 local
	latest      int64             // the newest time recorded, Unix nanos
	countDenied bool
}

type mkey struct {
	id, rule string
	bucket   int64
}

// modelSlack is the limiter's documented grain of time: the newest time
// is recorded when it falls in a later millisecond, and a check within
// the newest millisecond is decided at its own time (in the same buckets).
const modelSlack = int64(time.Millisecond)

func scopeOf(r Rule) int {
	if r.Local {
		return 1
	}
	return 0
}

func newModel(countDenied bool) *model {
	return &model{counts: [2]map[mkey]int64{{}, {}}, countDenied: countDenied}
}

// clock returns the time a check at now is decided at.
func (m *model) clock(now time.Time) time.Time {
	n := now.UnixNano()
	if n < m.latest {
		return time.Unix(0, m.latest)
	}
	if n/modelSlack > m.latest/modelSlack {
		m.latest = n
	}
	return now
}

// place returns t's bucket of period p and the time elapsed in it.
func place(t time.Time, p time.Duration) (int64, int64) {
	n := t.UnixNano()
	i, e := n/int64(p), n%int64(p)
	if e < 0 {
		i, e = i-1, e+int64(p)
	}
	return i, e
}

func (m *model) pair(id string, r Rule, t time.Time) (prev, cur int64) {
	i, _ := place(t, r.Period)
	c := m.counts[scopeOf(r)]
	return c[mkey{id, r.Name, i - 1}], c[mkey{id, r.Name, i}]
}

func (m *model) add(id string, r Rule, t time.Time, cost int64) {
	i, _ := place(t, r.Period)
	m.counts[scopeOf(r)][mkey{id, r.Name, i}] += cost
}

// estimate is floor(prev × (p - e) / p) + cur with negative counts as zero.
// The counts here are small: the product fits in an int64.
func estimate(r Rule, t time.Time, prev, cur int64) int64 {
	_, e := place(t, r.Period)
	p := int64(r.Period)
	return max(prev, 0)*(p-e)/p + max(cur, 0)
}

// estimateAfter is the estimate d after t if nothing else arrives: at a
// boundary the current bucket becomes the previous one.
func estimateAfter(r Rule, t time.Time, d time.Duration, prev, cur int64) int64 {
	i, _ := place(t, r.Period)
	later := t.Add(d)
	j, _ := place(later, r.Period)
	switch j - i {
	case 0:
		return estimate(r, later, prev, cur)
	case 1:
		return estimate(r, later, cur, 0)
	}
	return 0
}

// waitFor is the least d >= 0 at which the estimate is at most bound,
// found by bisection (the estimate never rises while nothing arrives; two
// periods on it is zero); window.Never for a negative bound.
func waitFor(r Rule, t time.Time, prev, cur, bound int64) time.Duration {
	if bound < 0 {
		return window.Never
	}
	if estimateAfter(r, t, 0, prev, cur) <= bound {
		return 0
	}
	lo, hi := time.Duration(0), 2*r.Period // lo fails, hi holds
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if estimateAfter(r, t, mid, prev, cur) <= bound {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

func clampRemaining(r Rule, used int64) int64 { return min(max(r.Limit-used, 0), r.Limit) }

// nextFor is the model's NextAfter: how long after t Remaining first
// rises above remaining (its value at t on these counts) if nothing else
// arrives; 0 when it is the whole limit already.
func nextFor(r Rule, t time.Time, prev, cur, remaining int64) time.Duration {
	if remaining >= r.Limit {
		return 0
	}
	lo, hi := time.Duration(0), 2*r.Period // lo fails, hi holds
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if clampRemaining(r, estimateAfter(r, t, mid, prev, cur)) > remaining {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// decide is one rule's decision of a request of cost at t, counted (when
// admitted) in the figures.
func decide(r Rule, t time.Time, prev, cur, cost int64) window.Decision {
	est := estimate(r, t, prev, cur)
	d := window.Decision{Rule: r.Name, Limit: r.Limit, Period: r.Period}
	d.Allowed = cost <= r.Limit && est+cost <= r.Limit
	d.Used = est
	switch {
	case d.Allowed:
		d.Used += cost
	case cost > r.Limit:
		d.RetryAfter = window.Never
	default:
		d.RetryAfter = waitFor(r, t, prev, cur, r.Limit-cost)
	}
	d.Remaining = clampRemaining(r, d.Used)
	counted := cur
	if d.Allowed {
		counted += cost
	}
	d.ResetAfter = waitFor(r, t, prev, counted, 0)
	d.NextAfter = nextFor(r, t, prev, counted, d.Remaining)
	if !d.Allowed {
		// No Retry-After earlier than t (draft-10 §6): a denial of cost
		// 0 is admitted before Remaining rises.
		d.NextAfter = min(d.NextAfter, d.RetryAfter)
	}
	return d
}

// combine: any denial wins, the longest RetryAfter first; among
// admissions the least Remaining; ties to the earlier rule.
func combine(ds []window.Decision) window.Decision {
	best := -1
	for i, d := range ds {
		if !d.Allowed && (best < 0 || d.RetryAfter > ds[best].RetryAfter) {
			best = i
		}
	}
	if best < 0 {
		for i, d := range ds {
			if best < 0 || d.Remaining < ds[best].Remaining {
				best = i
			}
		}
	}
	return ds[best]
}

// check is the model's Check (write) or PeekInto (!write): the result
// and whether it counted the cost.
func (m *model) check(now time.Time, id string, rules []Rule, cost int64, write bool) (Result, bool) {
	at := m.clock(now)
	var res Result
	res.N, res.At = len(rules), at
	var prev, cur [MaxRules]int64
	allowed := true
	for i, r := range rules {
		// Negative counts (a refund after the store lost the counts it
		// takes back from) count as zero, as package window documents.
		prev[i], cur[i] = m.pair(id, r, at)
		prev[i], cur[i] = max(prev[i], 0), max(cur[i], 0)
		res.Rules[i] = decide(r, at, prev[i], cur[i], cost)
		allowed = allowed && res.Rules[i].Allowed
	}
	counted := write && (allowed || m.countDenied)
	if counted {
		for _, r := range rules {
			m.add(id, r, at, cost)
		}
	}
	for i, r := range rules {
		d := &res.Rules[i]
		switch {
		case counted && !allowed:
			// CountDenied: every figure counts the request, and a rule
			// admits only if a retry of the same cost fits.
			c := cur[i] + cost
			d.Used = estimate(r, at, prev[i], c)
			d.Remaining = clampRemaining(r, d.Used)
			d.ResetAfter = waitFor(r, at, prev[i], c, 0)
			d.RetryAfter = waitFor(r, at, prev[i], c, r.Limit-cost)
			d.Allowed = d.RetryAfter == 0
			d.NextAfter = nextFor(r, at, prev[i], c, d.Remaining)
			if !d.Allowed {
				d.NextAfter = min(d.NextAfter, d.RetryAfter)
			}
		case !counted && d.Allowed:
			// Not counted: the state without the request.
			d.Used -= cost
			d.Remaining = clampRemaining(r, d.Used)
			d.ResetAfter = waitFor(r, at, prev[i], cur[i], 0)
			d.NextAfter = nextFor(r, at, prev[i], cur[i], d.Remaining)
		}
		if m.countDenied && d.Remaining < cost && cost <= r.Limit {
			// A request refused is counted: t is when this cost fits
			// again on the counts left, not when one unit is back.
			left := cur[i]
			if counted {
				left += cost
			}
			d.NextAfter = waitFor(r, at, prev[i], left, r.Limit-cost)
		}
	}
	res.Decision = combine(res.All())
	if step := at.Sub(now); step > 0 {
		for i := range res.N + 1 {
			d := &res.Decision
			if i < res.N {
				d = &res.Rules[i]
			}
			for _, w := range []*time.Duration{&d.RetryAfter, &d.ResetAfter, &d.NextAfter} {
				if *w > 0 {
					*w = min(*w, window.Never-step) + step
				}
			}
		}
	}
	return res, counted && cost > 0
}

func (m *model) refund(at time.Time, id string, rules []Rule, cost int64) {
	if cost <= 0 {
		return
	}
	for _, r := range rules {
		m.add(id, r, at, -cost)
	}
}

// forget drops id's counts in one scope: the store evicted it.
func (m *model) forget(scope int, id string) {
	for k := range m.counts[scope] {
		if k.id == id {
			delete(m.counts[scope], k)
		}
	}
}

// source draws the test's choices: from a seeded generator, or from fuzz
// bytes (zeros once they run out).
type source interface {
	intn(n int) int
	int64n(n int64) int64
}

type rngSource struct{ *rand.Rand }

func (s rngSource) intn(n int) int       { return s.IntN(n) }
func (s rngSource) int64n(n int64) int64 { return s.Int64N(n) }
func (s *byteSource) intn(n int) int     { return int(s.int64n(int64(n))) }
func (s *byteSource) exhausted() bool    { return len(s.b) == 0 }
func (s *byteSource) take(k int) (v uint64) {
	for range k {
		v <<= 8
		if len(s.b) > 0 {
			v |= uint64(s.b[0])
			s.b = s.b[1:]
		}
	}
	return v
}

type byteSource struct{ b []byte }

func (s *byteSource) int64n(n int64) int64 {
	k := 1
	for n > 1<<(8*k) && k < 8 {
		k++
	}
	return int64(s.take(k) % uint64(n))
}

// modelConfig is one set-up of the limiter and its traffic.
type modelConfig struct {
	shared, local int  // store shapes: see wrap
	evict         bool // shared store: NewLimited(1), every identity in one shard
	denyCache     bool
	denySize      int
	countDenied   bool
	pool          []Rule
	sets          [][]Rule // the first disjoint are pairwise disjoint, as ip_limits and a plan are
	disjoint      int      // any set after them shares counters with them (genConfig)
	ids           int
	start         time.Time
}

// Store shapes: the memory store itself (one-rule path and Admitter),
// through an Admitter only, through AddIf only (DynamoDB's shape), plain
// (Workers KV's shape; shared only).
var shapes = []string{"memstore", "updater", "conditional", "plain"}

func wrap(shape int, s *memstore.Store) kvstore.Store {
	switch shape {
	case 1:
		return updater{s}
	case 2:
		return conditional{s}
	case 3:
		return plain{s}
	}
	return s
}

func (c modelConfig) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "shared %s, local %s, evict %t, deny cache %t (size %d), count denied %t, %d ids, start %s; sets",
		shapes[c.shared], shapes[c.local], c.evict, c.denyCache, c.denySize, c.countDenied, c.ids, c.start.Format(time.RFC3339Nano))
	for _, s := range c.sets {
		b.WriteString(" [")
		for i, r := range s {
			if i > 0 {
				b.WriteByte(' ')
			}
			scope := ""
			if r.Local {
				scope = " local"
			}
			fmt.Fprintf(&b, "%s %d/%s%s", r.Name, r.Limit, r.Period, scope)
		}
		b.WriteByte(']')
	}
	return b.String()
}

var modelPeriods = []time.Duration{time.Second, 2 * time.Second, 10 * time.Second, time.Minute, 7 * time.Minute, time.Hour}

func genConfig(src source) modelConfig {
	c := modelConfig{
		shared:      src.intn(4),
		local:       src.intn(3),
		evict:       src.intn(4) == 0,
		denyCache:   src.intn(3) != 0,
		countDenied: src.intn(3) == 0,
		ids:         2 + src.intn(3),
		start:       t0.Add(time.Duration(src.int64n(int64(2 * time.Hour)))),
	}
	if src.intn(3) == 0 {
		c.denySize = 1 // one identity per shard: denials are dropped at random
	}
	if c.evict {
		// Eviction loses counts the deny cache remembers denials on; the
		// two are not run together (see TestModel's doc).
		c.denyCache = false
	}
	n := 1 + src.intn(MaxRules)
	for i := range n {
		r := rule(fmt.Sprint("r", i), 1+int64(src.intn(6)), modelPeriods[src.intn(len(modelPeriods))])
		r.Local = src.intn(3) == 0
		c.pool = append(c.pool, r)
	}
	for rest := c.pool; len(rest) > 0; {
		k := min(1+src.intn(MaxRules), len(rest))
		c.sets = append(c.sets, rest[:k])
		rest = rest[k:]
	}
	c.disjoint = len(c.sets)
	if src.intn(2) == 0 {
		// A set that shares counters with another: its rules of the same
		// name and period with other limits, as two plans' "minute"
		// rules are (a check API request may name a plan other than its
		// key's), and maybe a rule of a third set.
		b := src.intn(len(c.sets))
		var o []Rule
		for _, r := range c.sets[b] {
			if src.intn(3) != 0 {
				r.Limit = 1 + int64(src.intn(6))
				o = append(o, r)
			}
		}
		if x := src.intn(len(c.sets)); x != b && len(o) < MaxRules && src.intn(2) == 0 {
			o = append(o, c.sets[x][0])
		}
		if len(o) > 0 {
			c.sets = append(c.sets, o)
		}
	}
	return c
}

type opKind int

const (
	opCheck opKind = iota
	opDecide
	opPeek
	opRefund
)

func (k opKind) String() string { return [...]string{"check", "decide", "peek", "refund"}[k] }

type modelOp struct {
	kind    opKind
	id, set int
	cost    int64
	dt      time.Duration // the caller's clock moves by dt first
	pick    int           // refund: which counted check, modulo those pending
}

func genOps(src source, c modelConfig, n int) []modelOp {
	ops := make([]modelOp, 0, n)
	now := c.start
	bs, _ := src.(*byteSource)
	for len(ops) < n && (bs == nil || !bs.exhausted()) {
		var o modelOp
		p := c.pool[src.intn(len(c.pool))].Period
		switch src.intn(12) {
		case 0, 1:
		case 2, 3:
			o.dt = time.Duration(src.int64n(int64(time.Second)))
		case 4:
			o.dt = time.Duration(src.int64n(int64(p)))
		case 5: // to a boundary, give or take two milliseconds
			i, _ := place(now, p)
			o.dt = window.Start(i+1, p).Sub(now)
			switch src.intn(3) {
			case 0: // on it, or a nanosecond before
				o.dt -= time.Duration(src.intn(2))
			default:
				o.dt += time.Duration(src.int64n(int64(4*time.Millisecond))) - 2*time.Millisecond
			}
		case 6: // the clock steps back
			o.dt = -time.Duration(src.int64n(int64(3 * time.Second)))
		case 7: // within the limiter's slack, either way
			o.dt = time.Duration(src.int64n(int64(2*time.Millisecond))) - time.Millisecond
		case 8:
			o.dt = p + time.Duration(src.int64n(int64(p)))
		default:
			o.dt = time.Duration(src.int64n(int64(300 * time.Millisecond)))
		}
		now = now.Add(o.dt)
		o.id, o.set = src.intn(c.ids), src.intn(len(c.sets))
		set := c.sets[o.set]
		o.cost = int64(src.intn(int(set[src.intn(len(set))].Limit) + 2))
		retry := len(ops) > 0 && src.intn(3) == 0 // a client retrying
		if retry {
			last := ops[len(ops)-1]
			o.id, o.set, o.cost = last.id, last.set, last.cost
		}
		switch k := src.intn(10); {
		case k < 6 || retry:
			o.kind = opCheck
		case k < 7:
			o.kind = opDecide
		case k < 8:
			o.kind = opPeek
		default:
			o.kind = opRefund
			o.pick = src.intn(1 << 16)
		}
		ops = append(ops, o)
	}
	return ops
}

type pending struct {
	at      time.Time
	id, set int
	cost    int64
}

// collidingIDs returns n identities that share one shard of s, a
// NewLimited(1) store: each new one evicts the one there. It finds them by
// eviction, in buckets a day before the test's times, and leaves nothing a
// rule of the pool reads. Candidate j is written in bucket 2j and the first
// identity again in 2j+1, so that when candidate j+1 arrives a candidate
// left in another shard has expired and only the first can be evicted.
func collidingIDs(t testing.TB, s *memstore.Store, n int) []string {
	base := window.Index(t0.Add(-24*time.Hour), time.Second)
	add := func(id string, b int64) {
		sl := kvstore.Slot{Name: "probe", Bucket: base + b, Length: time.Second}
		if err := s.Add(ctx, id, []kvstore.Slot{sl}, []int64{1}); err != nil {
			t.Fatal(err)
		}
	}
	ids := []string{"k:0"}
	add(ids[0], 1)
	for j := int64(1); len(ids) < n; j++ {
		if j > 20000 {
			t.Fatal("no colliding identities found")
		}
		id, before := fmt.Sprint("k:", j), s.Evicted()
		add(id, 2*j)
		if s.Evicted() > before {
			ids = append(ids, id)
		}
		add(ids[0], 2*j+1) // evicts id when it shares the shard
	}
	return ids
}

// modelRun runs ops on a fresh limiter and the model side by side.
// modelTally counts what TestModel's runs went through, so that a
// generator that stopped reaching a case shows.
var modelTally struct {
	ops, denied, cacheable, cached, back, evicted, refunds atomic.Int64
}

type modelRun struct {
	t       testing.TB
	c       modelConfig
	l       *Limiter
	stores  [2]*memstore.Store // shared, local
	m       *model
	ids     []string
	now     time.Time
	maxSeen time.Time
	evicted uint64
	pending []pending
	log     []string
}

func (c modelConfig) run(t testing.TB, ops []modelOp) (log []string, err error) {
	// maxSeen starts at no time, as the limiter does: the first operations
	// may come before c.start (a step back), and comparing the stores in
	// the buckets of c.start missed an identity evicted in earlier ones
	// (found by FuzzModel).
	r := &modelRun{t: t, c: c, m: newModel(c.countDenied), now: c.start}
	r.stores[1] = memstore.NewLimited(1 << 20) // the limited path, never full here
	if c.evict {
		r.stores[0] = memstore.NewLimited(1)
		r.ids = collidingIDs(t, r.stores[0], c.ids)
		r.evicted = r.stores[0].Evicted()
	} else {
		r.stores[0] = memstore.New()
		for i := range c.ids {
			r.ids = append(r.ids, fmt.Sprint("k:", i))
		}
	}
	r.l = New(Options{
		Store:            wrap(c.shared, r.stores[0]),
		Local:            wrap(c.local, r.stores[1]).(kvstore.Conditional),
		CountDenied:      c.countDenied,
		DisableDenyCache: !c.denyCache,
		DenyCacheSize:    c.denySize,
	})
	for k, o := range ops {
		if err := r.step(o); err != nil {
			return r.log, fmt.Errorf("op %d: %w", k, err)
		}
	}
	return r.log, nil
}

func (r *modelRun) step(o modelOp) error {
	r.now = r.now.Add(o.dt)
	if r.now.After(r.maxSeen) && o.kind != opRefund { // Refund takes no now
		r.maxSeen = r.now
	}
	id, rules := r.ids[o.id], r.c.sets[o.set]
	line := fmt.Sprintf("%-6s %s set %d cost %d at %s (%+v)", o.kind, id, o.set, o.cost, r.now.Format("15:04:05.000000000"), o.dt)
	r.log = append(r.log, line)
	var got, want Result
	var counted bool
	var err error
	switch o.kind {
	case opCheck:
		want, counted = r.m.check(r.now, id, rules, o.cost, true)
		got, err = r.l.Check(ctx, r.now, id, rules, o.cost)
	case opDecide:
		want, counted = r.m.check(r.now, id, rules, o.cost, true)
		got.Decision, err = r.l.Decide(ctx, r.now, id, rules, o.cost)
		got.N, got.At, got.Rules = want.N, want.At, want.Rules // Decide returns the deciding rule only
	case opPeek:
		want, _ = r.m.check(r.now, id, rules, o.cost, false)
		err = r.l.PeekInto(ctx, r.now, id, rules, o.cost, &got)
	case opRefund:
		if len(r.pending) == 0 {
			r.log[len(r.log)-1] += ": nothing to refund"
			return r.compareStores()
		}
		i := o.pick % len(r.pending)
		p := r.pending[i]
		r.pending = slices.Delete(r.pending, i, i+1)
		r.log[len(r.log)-1] = fmt.Sprintf("refund %s set %d cost %d of %s (%+v)", r.ids[p.id], p.set, p.cost, p.at.Format("15:04:05.000000000"), o.dt)
		modelTally.refunds.Add(1)
		r.m.refund(p.at, r.ids[p.id], r.c.sets[p.set], p.cost)
		if err := r.l.Refund(ctx, p.at, r.ids[p.id], r.c.sets[p.set], p.cost); err != nil {
			return fmt.Errorf("refund: %w", err)
		}
		return r.compareStores()
	}
	if err != nil {
		return fmt.Errorf("%s: %w", o.kind, err)
	}
	r.log[len(r.log)-1] += fmt.Sprintf(": allowed %t by %s", want.Allowed, want.Rule)
	if r.c.evict && o.kind != opPeek && o.cost > 0 && slices.ContainsFunc(rules, func(rl Rule) bool { return !rl.Local }) {
		// The shard holds one identity: this write evicted (or, once
		// their counters expired, dropped) any other, and a refund of
		// theirs would now do nothing. Only this identity's are kept.
		r.pending = slices.DeleteFunc(r.pending, func(p pending) bool { return p.id != o.id })
	}
	if counted {
		r.pending = append(r.pending, pending{want.At, o.id, o.set, o.cost})
	}
	modelTally.ops.Add(1)
	if !want.Allowed {
		modelTally.denied.Add(1)
	}
	if got.Cached {
		modelTally.cached.Add(1)
	}
	if !want.Allowed && r.c.denyCache {
		modelTally.cacheable.Add(1)
	}
	if want.At.After(r.now) {
		modelTally.back.Add(1)
	}
	if err := compareResults(got, want, r.c.denyCache); err != nil {
		return fmt.Errorf("%s %s cost %d at %s: %w", o.kind, id, o.cost, r.now.Format("15:04:05.000000000"), err)
	}
	return r.compareStores()
}

func compareResults(got, want Result, cache bool) error {
	var errs []error
	if got.Cached && (!cache || got.Allowed) {
		errs = append(errs, fmt.Errorf("cached %t with the deny cache %t, allowed %t", got.Cached, cache, got.Allowed))
	}
	if got.N != want.N || !got.At.Equal(want.At) {
		errs = append(errs, fmt.Errorf("N %d at %v, want %d at %v", got.N, got.At, want.N, want.At))
	}
	if got.Decision != want.Decision {
		errs = append(errs, fmt.Errorf("decision (cached %t)\n\tgot  %+v\n\twant %+v", got.Cached, got.Decision, want.Decision))
	}
	for i := range min(got.N, want.N) {
		if got.Rules[i] != want.Rules[i] {
			errs = append(errs, fmt.Errorf("rule %d (cached %t)\n\tgot  %+v\n\twant %+v", i, got.Cached, got.Rules[i], want.Rules[i]))
		}
	}
	return errors.Join(errs...)
}

// compareStores checks that every count a rule can still read (the
// buckets of the newest time seen and the one before) is the model's. A
// shared identity the store evicted (its counts all gone) is forgotten by
// the model too, at most as many as Evicted counts.
func (r *modelRun) compareStores() error {
	at := r.maxSeen
	diff := func(scope int, id string) (bool, bool, string) {
		differs, storeEmpty := false, true
		var out string
		for _, rl := range r.c.pool {
			if scopeOf(rl) != scope {
				continue
			}
			i := window.Index(at, rl.Period)
			slots := []kvstore.Slot{{Name: rl.Name, Bucket: i - 1, Length: rl.Period}, {Name: rl.Name, Bucket: i, Length: rl.Period}}
			counts := make([]int64, 2)
			if err := r.stores[scope].Load(ctx, id, slots, counts); err != nil {
				r.t.Fatal(err)
			}
			mp, mc := r.m.pair(id, rl, at)
			storeEmpty = storeEmpty && counts[0] == 0 && counts[1] == 0
			if counts[0] != mp || counts[1] != mc {
				differs = true
				out += fmt.Sprintf(" %s: store %v, model [%d %d];", rl.Name, counts, mp, mc)
			}
		}
		return differs, storeEmpty, out
	}
	evicted := uint64(0)
	if r.c.evict {
		now := r.stores[0].Evicted()
		evicted, r.evicted = now-r.evicted, now
	}
	for scope := range 2 {
		for _, id := range r.ids {
			differs, empty, out := diff(scope, id)
			if !differs {
				continue
			}
			if scope == 0 && empty && evicted > 0 {
				evicted--
				modelTally.evicted.Add(1)
				r.m.forget(0, id)
				r.log[len(r.log)-1] += fmt.Sprintf(" [%s evicted]", id)
				continue
			}
			return fmt.Errorf("%s %s counts at %s:%s", [...]string{"shared", "local"}[scope], id, at.Format("15:04:05.000000000"), out)
		}
	}
	return nil
}

// shrink drops operations while the run still fails, for a short log.
func shrink(t testing.TB, c modelConfig, ops []modelOp) []modelOp {
	fails := func(ops []modelOp) bool { _, err := c.run(t, ops); return err != nil }
	for chunk := len(ops) / 2; chunk >= 1; chunk /= 2 {
		for i := 0; i+chunk <= len(ops); {
			try := slices.Concat(ops[:i], ops[i+chunk:])
			if len(try) > 0 && fails(try) {
				ops = try
				continue
			}
			i += chunk
		}
	}
	// A dropped operation's time step goes with it; that keeps the
	// remaining ones valid.
	return ops
}

// modelCheck runs one configuration and sequence and reports a mismatch
// with a shrunk operation log.
func modelCheck(t testing.TB, label string, c modelConfig, ops []modelOp) {
	t.Helper()
	if _, err := c.run(t, ops); err != nil {
		small := shrink(t, c, ops)
		log, serr := c.run(t, small)
		if serr == nil { // the failure depends on the stores' hash seeds
			small = ops
			log, serr = c.run(t, ops)
		}
		t.Fatalf("%s: %v\nshrunk: %v\nconfig: %v\nminimal log (%d of %d operations):\n\t%s", label, err, serr, c, len(small), len(ops), strings.Join(log, "\n\t"))
	}
}

// TestModel drives random sequences of checks, decides, peeks and refunds
// (several identities, disjoint rule sets of shared and local rules with
// small limits and periods of 1 s to 1 h, costs 0 to limit+1, a clock
// that crosses boundaries and steps back) through every set-up of the
// limiter on the memory store, and compares each Result, field by field
// and rule by rule, and after each operation every count a rule can read,
// with the model above.
//
// Besides disjoint rule sets (ip_limits and a plan), a configuration may
// have a set that shares counters with them under other limits (two
// plans' "minute" rules, when a check API request names a plan other than
// its key's). Eviction (every identity in one shard of a
// NewLimited(1) store, so that each new one evicts the last) runs without
// the deny cache, which may remember a denial on counts evicted since:
// stricter than the store, by design.
func TestModel(t *testing.T) {
	seeds, ops := *modelSeeds, *modelOps
	first := int64(0)
	if *modelSeed >= 0 {
		first, seeds = *modelSeed, 1
	}
	total := 0
	before := modelTally.ops.Load()
	for seed := first; seed < first+int64(seeds); seed++ {
		src := rngSource{rand.New(rand.NewPCG(uint64(seed), 0x51de))}
		c := genConfig(src)
		seq := genOps(src, c, ops)
		modelCheck(t, fmt.Sprintf("seed %d (rerun: -run TestModel -args -model.seed=%d)", seed, seed), c, seq)
		total += len(seq)
	}
	t.Logf("%d seeds, %d operations: %d checks, decides and peeks, %d denied (%d with the deny cache on), %d from the deny cache, %d decided after a backward step, %d refunds, %d evictions",
		seeds, total, modelTally.ops.Load()-before, modelTally.denied.Load(), modelTally.cacheable.Load(), modelTally.cached.Load(), modelTally.back.Load(), modelTally.refunds.Load(), modelTally.evicted.Load())
	if seeds >= 40 && (modelTally.cached.Load() == 0 || modelTally.evicted.Load() == 0 || modelTally.back.Load() == 0) {
		t.Errorf("the traffic reached no deny cache answer, eviction or backward step")
	}
}

// FuzzModel is TestModel with the configuration and operations read from
// the fuzzer's bytes: go test ./limiter -run '^$' -fuzz FuzzModel.
func FuzzModel(f *testing.F) {
	for seed := range uint64(8) {
		b := binary.LittleEndian.AppendUint64(nil, seed*0x9e3779b97f4a7c15)
		b = append(b, make([]byte, 200)...)
		rand.New(rand.NewPCG(seed, 1)).Shuffle(len(b), func(i, j int) { b[i], b[j] = b[j], b[i] })
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		src := &byteSource{b: data}
		c := genConfig(src)
		if ops := genOps(src, c, 500); len(ops) > 0 {
			modelCheck(t, "fuzz input", c, ops)
		}
	})
}

// TestDenyCacheOverlappingSets: one identity checked under two plans whose
// "minute" rules share a counter with other limits (a check API request
// naming a plan other than its key's). A denial remembered under one plan
// goes when the other plan's requests reach the store, or a refund under
// it takes cost back: answered from the cache, it gave too short a wait
// (found by the parity test: Retry-After 24 where the store said 42).
func TestDenyCacheOverlappingSets(t *testing.T) {
	free, pro := rule("minute", 3, time.Minute), rule("minute", 10, time.Minute)
	cached, store := New(Options{}), New(Options{DisableDenyCache: true})
	both := func(at time.Time, r Rule) (got, want Result) {
		t.Helper()
		return check(t, cached, at, "k", 1, r), check(t, store, at, "k", 1, r)
	}
	for range 5 {
		both(t0, pro)
	}
	if got, _ := both(t0, free); got.Allowed || got.Cached {
		t.Fatalf("setup: free check allowed %t, cached %t; want a denial from the store", got.Allowed, got.Cached)
	}
	for range 5 {
		both(t0, pro)
	}
	got, want := both(t0.Add(30*time.Second), free)
	if got.Decision != want.Decision {
		t.Errorf("after the other plan's requests:\n\tgot  %+v (cached %t)\n\twant %+v", got.Decision, got.Cached, want.Decision)
	}
	// A refund under pro takes back cost the free denial was decided on:
	// the free check is admitted again.
	later := t0.Add(2 * time.Hour) // buckets of their own
	var at [2]time.Time
	for range 3 {
		got, want := both(later, pro)
		at = [2]time.Time{got.At, want.At}
	}
	if got, _ := both(later, free); got.Allowed {
		t.Fatal("setup: the free check was admitted on 3 of 3")
	}
	for i, l := range []*Limiter{cached, store} {
		if err := l.Refund(ctx, at[i], "k", []Rule{pro}, 1); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := both(later, free); got.Decision != want.Decision || !want.Allowed {
		t.Errorf("after a refund under the other plan:\n\tgot  %+v (cached %t)\n\twant %+v", got.Decision, got.Cached, want.Decision)
	}
}

// TestCachedDenialCountsNothing: a denial the deny cache answers reports
// the rules that admitted the request as the store's answer does, without
// the request, which was not counted (found by TestModel: they reported
// its cost as used).
func TestCachedDenialCountsNothing(t *testing.T) {
	short, long := rule("short", 1, 10*time.Second), rule("long", 5, time.Hour)
	l := New(Options{})
	check(t, l, t0, "k", 1, short, long)
	stored := check(t, l, t0, "k", 1, short, long) // denied by short, remembered
	cached := check(t, l, t0, "k", 1, short, long)
	if stored.Allowed || stored.Cached || !cached.Cached {
		t.Fatalf("setup: allowed %t, cached %t then %t", stored.Allowed, stored.Cached, cached.Cached)
	}
	if got, want := cached.Rules[1], stored.Rules[1]; got != want || got.Used != 1 || got.Remaining != 4 {
		t.Errorf("long from the deny cache: %+v; want the store's %+v (1 used, 4 remaining)", got, want)
	}
}

// TestClockBackwardsWithinAMillisecond: a step back of less than a
// millisecond across a boundary does not reopen the bucket before it
// (found by TestModel: the limiter recorded its newest time only once the
// clock had moved a millisecond past it, so a check 100 µs before the
// boundary, after one 150 µs past it, was decided in the earlier bucket:
// a limit of 1 per 2 s admitted two requests within 250 µs).
func TestClockBackwardsWithinAMillisecond(t *testing.T) {
	r := rule("burst", 1, 2*time.Second)
	boundary := window.Start(window.Index(t0, r.Period)+1, r.Period)
	for _, cache := range []bool{false, true} {
		l := New(Options{DisableDenyCache: !cache})
		check(t, l, boundary.Add(-600*time.Microsecond), "k", 0, r)
		if res := check(t, l, boundary.Add(150*time.Microsecond), "k", 1, r); !res.Allowed {
			t.Fatalf("setup: the first request was denied: %+v", res.Decision)
		}
		res := check(t, l, boundary.Add(-100*time.Microsecond), "k", 1, r)
		if res.Allowed || !res.At.Equal(boundary.Add(150*time.Microsecond)) {
			t.Errorf("deny cache %t: 250 µs back: allowed %t at %v; want a denial at the newest time seen, %v",
				cache, res.Allowed, res.At.Format(time.StampNano), boundary.Add(150*time.Microsecond).Format(time.StampNano))
		}
	}
}

// TestEightRulesInOneScope: a check may have MaxRules rules, all in one
// scope (found by FuzzModel: from five rules of one scope on, the general
// path wrote past its per-slot costs and panicked).
func TestEightRulesInOneScope(t *testing.T) {
	for _, local := range []bool{false, true} {
		rules := make([]Rule, MaxRules)
		for i := range rules {
			rules[i] = rule(fmt.Sprint("r", i), 2, time.Duration(i+1)*time.Minute)
			rules[i].Local = local
		}
		l := New(Options{})
		for i, want := range []bool{true, true, false} {
			if res := check(t, l, t0, "k", 1, rules...); res.Allowed != want || res.N != MaxRules {
				t.Errorf("local %t, check %d: allowed %t of %d rules, want %t of %d", local, i, res.Allowed, res.N, want, MaxRules)
			}
		}
	}
}
