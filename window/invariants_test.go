package window_test

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/slidegate/slidegate/window"
)

// The invariants below are checked against refEstimate, a big-integer
// model of the estimate written from the formula, not from window.go:
//
//	e        = unixNanos mod period   (in [0, period))
//	estimate = floor(prev × (period - e) / period) + cur
//
// with negative counts and costs taken as zero.

func refEstimate(r window.Rule, now time.Time, prev, cur int64) *big.Int {
	p := big.NewInt(int64(r.Period))
	e := new(big.Int).Mod(big.NewInt(now.UnixNano()), p) // Euclidean: in [0, p)
	w := new(big.Int).Mul(big.NewInt(max(prev, 0)), new(big.Int).Sub(p, e))
	w.Quo(w, p) // non-negative, so truncation is floor
	return w.Add(w, big.NewInt(max(cur, 0)))
}

// saturate returns x, or math.MaxInt64 when x does not fit.
func saturate(x *big.Int) int64 {
	if !x.IsInt64() {
		return math.MaxInt64
	}
	return x.Int64()
}

// roll returns the counts a store shows at later, given the counts prev
// and cur it showed at now and that nothing arrived in between: when the
// bucket index advances by one, cur becomes prev; by two or more, both are
// empty.
func roll(r window.Rule, now, later time.Time, prev, cur int64) (int64, int64) {
	prev, cur = max(prev, 0), max(cur, 0)
	switch window.Index(later, r.Period) - window.Index(now, r.Period) {
	case 0:
		return prev, cur
	case 1:
		return cur, 0
	}
	return 0, 0
}

// reachable reports whether now+d is still an instant whose Unix
// nanoseconds fit in an int64 (the buckets are numbered from those).
func reachable(now time.Time, d time.Duration) bool {
	return d >= 0 && now.UnixNano() <= math.MaxInt64-int64(d)
}

// estimateAt is the model's estimate at later of the counts prev, cur seen
// at now, with nothing arriving in between.
func estimateAt(r window.Rule, now, later time.Time, prev, cur int64) *big.Int {
	p, c := roll(r, now, later, prev, cur)
	return refEstimate(r, later, p, c)
}

// remainingAt is the model's Remaining at later of the counts prev, cur
// seen at now: Limit - estimate, clamped to [0, Limit].
func remainingAt(r window.Rule, now, later time.Time, prev, cur int64) int64 {
	left := new(big.Int).Sub(big.NewInt(r.Limit), estimateAt(r, now, later, prev, cur))
	if left.Sign() <= 0 {
		return 0
	}
	return left.Int64() // at most Limit: the estimate is not negative
}

// decideAt decides at later on the counts prev, cur seen at now, with
// nothing arriving in between.
func decideAt(r window.Rule, now, later time.Time, prev, cur, cost int64) window.Decision {
	p, c := roll(r, now, later, prev, cur)
	return r.Decide(later, p, c, cost)
}

// bounded reports whether every wait of r fits in a Duration: it is at
// most two periods.
func bounded(r window.Rule) bool { return r.Period <= math.MaxInt64/2 }

// checkDecide checks the invariants of r.Decide(now, prev, cur, cost) for a
// valid rule (Limit > 0, Period >= MinPeriod) and any counts and cost.
func checkDecide(t testing.TB, r window.Rule, now time.Time, prev, cur, cost int64) {
	t.Helper()
	d := r.Decide(now, prev, cur, cost)
	c := max(cost, 0)
	est := refEstimate(r, now, prev, cur)
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%+v.Decide(%d ns, prev %d, cur %d, cost %d) = %+v: "+format,
			append([]any{r, now.UnixNano(), prev, cur, cost, d}, args...)...)
	}

	admit := new(big.Int).Add(est, big.NewInt(c)).Cmp(big.NewInt(r.Limit)) <= 0
	if d.Allowed != admit {
		fail("Allowed = %v, want %v (estimate %v)", d.Allowed, admit, est)
	}
	if d.Rule != r.Name || d.Limit != r.Limit || d.Period != r.Period {
		fail("rule fields not copied")
	}
	wantUsed := saturate(est)
	if d.Allowed {
		wantUsed += c
	}
	if d.Used != wantUsed {
		fail("Used = %d, want %d", d.Used, wantUsed)
	}
	if d.Remaining < 0 || d.Remaining > r.Limit {
		fail("Remaining outside [0, %d]", r.Limit)
	}
	if got, want := d.Remaining, max(r.Limit-d.Used, 0); got != want {
		fail("Remaining = %d, want %d", got, want)
	}

	switch {
	case d.Allowed:
		if d.RetryAfter != 0 {
			fail("RetryAfter = %v on an admitted request", d.RetryAfter)
		}
	case c > r.Limit:
		if d.RetryAfter != window.Never {
			fail("RetryAfter = %v, want Never for a cost above the limit", d.RetryAfter)
		}
	default:
		if d.RetryAfter <= 0 {
			fail("denied with RetryAfter %v", d.RetryAfter)
		}
		if bounded(r) && d.RetryAfter == window.Never {
			fail("RetryAfter = Never for a cost within the limit")
		}
		if got, want := d.RetryAfter, r.Wait(now, prev, cur, r.Limit-c); got != want {
			fail("RetryAfter = %v, Wait(Limit - cost) = %v", got, want)
		}
	}

	after := max(cur, 0) // cur as the caller records it
	if d.Allowed {
		after += c
	}
	if d.ResetAfter < 0 {
		fail("negative ResetAfter")
	}
	if c <= r.Limit && d.ResetAfter < d.RetryAfter {
		fail("ResetAfter < RetryAfter")
	}
	if got, want := d.ResetAfter, r.Wait(now, prev, after, 0); got != want {
		fail("ResetAfter = %v, Wait(0) = %v", got, want)
	}

	// NextAfter is when Remaining first rises: exact, zero when nothing is
	// used, and for a denial never after RetryAfter (draft-10 §6: a
	// Retry-After no earlier than the RateLimit reset it goes with), which
	// a denial of cost 0 (over the limit) has for it.
	if d.NextAfter < 0 || d.NextAfter > d.ResetAfter {
		fail("NextAfter %v outside [0, ResetAfter]", d.NextAfter)
	}
	if !d.Allowed && d.NextAfter > d.RetryAfter {
		fail("NextAfter %v after RetryAfter %v", d.NextAfter, d.RetryAfter)
	}
	if d.Used == 0 && d.NextAfter != 0 {
		fail("NextAfter %v with nothing used", d.NextAfter)
	}
	if !d.Allowed && c == 0 && d.NextAfter != d.RetryAfter {
		fail("NextAfter %v of a denial of cost 0, want RetryAfter", d.NextAfter)
	}
	if na := d.NextAfter; d.Used > 0 && (d.Allowed || c > 0) && na != window.Never && reachable(now, na) {
		at := now.Add(na)
		if got := remainingAt(r, now, at, prev, after); got <= d.Remaining {
			fail("remaining %d at now+NextAfter, want more than %d", got, d.Remaining)
		}
		if na > 0 && remainingAt(r, now, at.Add(-1), prev, after) != d.Remaining {
			fail("remaining rose already 1 ns before now+NextAfter")
		}
	}
	// RetryAfter is exact: at now+RetryAfter the same request is admitted;
	// 1 ns and 1 ms earlier it is not.
	if ra := d.RetryAfter; !d.Allowed && ra != window.Never && reachable(now, ra) {
		at := now.Add(ra)
		if !decideAt(r, now, at, prev, cur, cost).Allowed {
			fail("denied at now+RetryAfter")
		}
		if decideAt(r, now, at.Add(-1), prev, cur, cost).Allowed {
			fail("admitted 1 ns before now+RetryAfter")
		}
		if ra >= time.Millisecond && decideAt(r, now, at.Add(-time.Millisecond), prev, cur, cost).Allowed {
			fail("admitted 1 ms before now+RetryAfter")
		}
	}
	// ResetAfter is exact: the estimate is 0 then and not 1 ns earlier.
	if ra := d.ResetAfter; ra != window.Never && reachable(now, ra) {
		at := now.Add(ra)
		if est := estimateAt(r, now, at, prev, after); est.Sign() != 0 {
			fail("estimate %v at now+ResetAfter", est)
		}
		if ra > 0 && estimateAt(r, now, at.Add(-1), prev, after).Sign() == 0 {
			fail("estimate already 0 1 ns before now+ResetAfter")
		}
	}
}

// checkWait checks r.Wait(now, prev, cur, bound) against the model: the
// estimate is at most bound at now+Wait and above it 1 ns earlier.
func checkWait(t testing.TB, r window.Rule, now time.Time, prev, cur, bound int64) {
	t.Helper()
	w := r.Wait(now, prev, cur, bound)
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%+v.Wait(%d ns, prev %d, cur %d, bound %d) = %v: "+format,
			append([]any{r, now.UnixNano(), prev, cur, bound, w}, args...)...)
	}
	if bound < 0 {
		if w != window.Never {
			fail("want Never for a negative bound")
		}
		return
	}
	if w < 0 {
		fail("negative wait")
	}
	if bounded(r) && w == window.Never {
		fail("Never for a non-negative bound")
	}
	if w == window.Never || !reachable(now, w) {
		return
	}
	b := big.NewInt(bound)
	at := now.Add(w)
	if est := estimateAt(r, now, at, prev, cur); est.Cmp(b) > 0 {
		fail("estimate %v at now+Wait", est)
	}
	if w > 0 {
		if est := estimateAt(r, now, at.Add(-1), prev, cur); est.Cmp(b) <= 0 {
			fail("estimate %v already within bound 1 ns before now+Wait", est)
		}
	}
}

// gen draws random cases, weighted towards the edges: bucket boundaries,
// counts around the limit, costs around the limit, and now and then huge
// values.
type gen struct{ *rand.Rand }

func (g gen) rule() window.Rule {
	var limit int64
	switch g.IntN(8) {
	case 0:
		limit = 1 + g.Int64N(3)
	case 1:
		limit = math.MaxInt64 - g.Int64N(3)
	case 2, 3:
		limit = 1 + g.Int64N(1_000_000_000)
	default:
		limit = 1 + g.Int64N(1000)
	}
	var period time.Duration
	switch g.IntN(8) {
	case 0:
		period = time.Second
	case 1:
		period = time.Minute
	case 2:
		period = time.Hour
	case 3:
		period = 24 * time.Hour
	case 4:
		period = window.MinPeriod + time.Duration(g.Int64N(math.MaxInt64/2-int64(window.MinPeriod)))
	default:
		period = window.MinPeriod + time.Duration(g.Int64N(int64(48*time.Hour)))
	}
	return window.Rule{Name: "r", Limit: limit, Period: period}
}

// count draws a counter value for a rule of the given limit.
func (g gen) count(limit int64) int64 {
	switch g.IntN(10) {
	case 0:
		return 0
	case 1:
		return g.Int64()
	case 2:
		return limit - 2 + g.Int64N(5) // around the limit, maybe negative
	}
	return g.Int64N(min(limit, math.MaxInt64/2) * 2)
}

// cost draws a request cost for a rule of the given limit.
func (g gen) cost(limit int64) int64 {
	switch g.IntN(10) {
	case 0:
		return 0
	case 1:
		return limit + 1 + g.Int64N(3) // above the limit, or wrapped negative
	case 2:
		return limit
	case 3:
		return -g.Int64N(5)
	}
	return 1 + g.Int64N(min(limit, 10))
}

// now draws an instant between 1900 and 2190, half the time on or next to
// a bucket boundary of r.
func (g gen) now(r window.Rule) time.Time {
	now := time.Unix(0, -2_208_988_800_000_000_000+g.Int64N(9_200_000_000_000_000))
	if g.IntN(2) == 0 {
		start := window.Start(window.Index(now, r.Period), r.Period)
		now = start.Add([]time.Duration{0, 1, -1, r.Period - 1}[g.IntN(4)])
	}
	return now
}

// properties is how many random cases each property test draws.
func properties() int {
	if testing.Short() {
		return 2000
	}
	return 20000
}

func TestDecideProperties(t *testing.T) {
	g := gen{rand.New(rand.NewPCG(2026, 1122))}
	for range properties() {
		r := g.rule()
		checkDecide(t, r, g.now(r), g.count(r.Limit), g.count(r.Limit), g.cost(r.Limit))
	}
}

func TestWaitProperties(t *testing.T) {
	g := gen{rand.New(rand.NewPCG(2026, 1123))}
	for range properties() {
		r := g.rule()
		checkWait(t, r, g.now(r), g.count(r.Limit), g.count(r.Limit), g.cost(r.Limit)-1)
	}
}

// TestEstimateFalls: with nothing arriving, the estimate never rises as
// time goes on, across roll-overs too, and Estimate equals the model.
func TestEstimateFalls(t *testing.T) {
	g := gen{rand.New(rand.NewPCG(2026, 1124))}
	for range properties() / 10 {
		r := g.rule()
		now := g.now(r)
		prev, cur := g.count(r.Limit), g.count(r.Limit)
		last := int64(math.MaxInt64)
		for at := now; reachable(now, at.Sub(now)) && at.Sub(now) <= 3*min(r.Period, math.MaxInt64/4); {
			p, c := roll(r, now, at, prev, cur)
			est := r.Estimate(at, p, c)
			if want := saturate(refEstimate(r, at, p, c)); est != want {
				t.Fatalf("%+v.Estimate(%v, %d, %d) = %d, want %d", r, at, p, c, est, want)
			}
			if est > last {
				t.Fatalf("%+v: estimate of prev %d, cur %d rose from %d to %d at %v after %v",
					r, prev, cur, last, est, at, at.Sub(now))
			}
			last = est
			at = at.Add(1 + time.Duration(g.Int64N(int64(r.Period/4))))
		}
	}
}
