package window

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"time"
)

// Never is the RetryAfter of a request that no amount of waiting admits:
// its cost is larger than the rule's limit.
const Never = time.Duration(math.MaxInt64)

// MinPeriod is the shortest period a Rule may have.
const MinPeriod = time.Second

// Errors returned by Rule.Validate, wrapped with the rule's name and value.
var (
	ErrLimit  = errors.New("limit must be greater than 0")
	ErrPeriod = errors.New("period must be at least 1s")
	ErrName   = errors.New("name must not be empty")
)

// Rule admits at most Limit units of cost in any window of one Period,
// estimated from two epoch-aligned buckets of length Period.
//
// The zero Rule is invalid; call Validate before use. A Rule is a value and
// safe for concurrent use.
type Rule struct {
	Name   string        // names the rule in headers and errors ("minute")
	Limit  int64         // units of cost admitted per Period; > 0
	Period time.Duration // window length; >= MinPeriod
}

// Validate reports whether r can be used.
func (r Rule) Validate() error {
	switch {
	case r.Name == "":
		return fmt.Errorf("window: rule: %w", ErrName)
	case r.Limit <= 0:
		return fmt.Errorf("window: rule %q: %w, got %d", r.Name, ErrLimit, r.Limit)
	case r.Period < MinPeriod:
		return fmt.Errorf("window: rule %q: %w, got %s", r.Name, ErrPeriod, r.Period)
	}
	return nil
}

// Index returns the index of the bucket of length d that holds t. Buckets
// are aligned to the Unix epoch, so every node agrees on their boundaries
// without coordination. d must be positive.
func Index(t time.Time, d time.Duration) int64 {
	i, _ := split(t.UnixNano(), int64(d))
	return i
}

// Start returns the instant bucket i of length d begins.
func Start(i int64, d time.Duration) time.Time {
	return time.Unix(0, i*int64(d))
}

// split returns floor(n/d) and n - floor(n/d)*d, which lies in [0, d).
func split(n, d int64) (int64, int64) {
	q, m := n/d, n%d
	if m < 0 {
		q--
		m += d
	}
	return q, m
}

// Decision is the answer to one request against one rule, or the deciding
// answer of several rules (see Combine). It is a value: copying is cheap.
type Decision struct {
	Allowed bool
	Rule    string        // name of the rule that decided
	Limit   int64         // the rule's limit
	Period  time.Duration // the rule's period
	// Used is the estimate after the decision: it includes the request's
	// cost only when the request was admitted.
	Used int64
	// Remaining is Limit - Used clamped to [0, Limit]: the cost that would
	// still be admitted now.
	Remaining int64
	// ResetAfter is how long until the estimate is back to zero (the full
	// Limit available) if nothing else arrives.
	ResetAfter time.Duration
	// NextAfter is how long until Remaining next rises (the estimate falls
	// below min(Used, Limit)) if nothing else arrives: when more quota is
	// made available, the reset of draft-ietf-httpapi-ratelimit-headers.
	// A sliding window gives quota back a little at a time, so ResetAfter
	// is a client's longest wait and NextAfter its shortest. Zero when Used
	// is zero. For a denial it is at most RetryAfter (the draft's §6 wants
	// no Retry-After earlier): a denial of cost 0 (Used over Limit) has
	// RetryAfter, when the estimate is back to Limit. (Package limiter's
	// CountDenied makes it, for a rule left short of the request's cost,
	// the wait until that cost fits.)
	NextAfter time.Duration
	// RetryAfter is zero when Allowed. Otherwise it is the earliest time
	// after which the same request would be admitted if nothing else
	// arrived: at now+RetryAfter it is admitted, a nanosecond earlier it is
	// not. Never when the cost exceeds Limit, or when the wait does not fit
	// in a Duration (only periods over 2^62 ns, 146 years, can need that).
	RetryAfter time.Duration
}

// Pos is an instant's place among a rule's buckets: the bucket's index and
// the time elapsed since the bucket began, in [0, Period). A caller that
// needs the index and an estimate computes it once and uses the *At
// methods, saving a division per call.
type Pos struct {
	Index   int64
	Elapsed time.Duration
}

// At returns now's place among r's buckets. r.Period must be positive.
func (r Rule) At(now time.Time) Pos {
	i, e := split(now.UnixNano(), int64(r.Period))
	return Pos{Index: i, Elapsed: time.Duration(e)}
}

// Weighted returns floor(prev × overlap) at now, where overlap is the share
// of the previous bucket still inside the window that ends at now.
func (r Rule) Weighted(now time.Time, prev int64) int64 { return r.WeightedAt(r.At(now), prev) }

// WeightedAt is Weighted at a position returned by At.
func (r Rule) WeightedAt(pos Pos, prev int64) int64 {
	return weighted(prev, int64(r.Period-pos.Elapsed), int64(r.Period))
}

// Estimate returns floor(prev × overlap) + cur at now, negative counts
// taken as zero, saturated at math.MaxInt64.
func (r Rule) Estimate(now time.Time, prev, cur int64) int64 {
	return r.EstimateAt(r.At(now), prev, cur)
}

// EstimateAt is Estimate at a position returned by At.
func (r Rule) EstimateAt(pos Pos, prev, cur int64) int64 {
	est, _ := estimate(max(prev, 0), max(cur, 0), int64(pos.Elapsed), int64(r.Period))
	return est
}

// AdmitsAt reports whether a request of the given cost is admitted at pos
// on these counts: EstimateAt(pos, prev, cur) + cost <= Limit. It is
// Decide's verdict without the rest of the Decision, for the store that
// decides under its lock. A negative cost counts as zero.
func (r Rule) AdmitsAt(pos Pos, prev, cur, cost int64) bool {
	return r.EstimateAt(pos, prev, cur) <= r.Limit-max(cost, 0)
}

// Decide decides a request of the given cost at now, where prev and cur are
// the counts of the previous and the current bucket (Index(now, r.Period)
// and the one before). A request is admitted iff estimate + cost <= Limit.
// Negative counts and a negative cost count as zero. Decide does not record
// anything: the caller adds cost to cur when the decision is Allowed.
func (r Rule) Decide(now time.Time, prev, cur, cost int64) (d Decision) {
	r.DecideInto(&d, now, prev, cur, cost)
	return d
}

// DecideInto is Decide writing its decision into *d, every field of it.
// It is for callers that keep decisions in memory (an array of them, a
// result struct): a Decision returned is copied into them once more.
// (When it was nine words, Go returned it in registers on amd64, and the
// caller stored them one word at a time and then copied the struct with
// 16-byte loads that straddle two of those stores, which the CPU cannot
// forward from its store buffer: stalls that cost about as much as the
// decision itself, BenchmarkDecide: value against into. With NextAfter it
// is ten, more than amd64 returns in registers.)
func (r Rule) DecideInto(d *Decision, now time.Time, prev, cur, cost int64) {
	_, e := split(now.UnixNano(), int64(r.Period))
	r.DecideAtInto(d, Pos{Elapsed: time.Duration(e)}, prev, cur, cost)
}

// DecideAtInto is DecideInto at a position returned by At, for a caller
// that has already placed now among r's buckets (to pick the counts to
// read): it saves the division.
func (r Rule) DecideAtInto(d *Decision, pos Pos, prev, cur, cost int64) {
	p, e := int64(r.Period), int64(pos.Elapsed)
	prev, cur, cost = max(prev, 0), max(cur, 0), max(cost, 0)
	est, exact := estimate(prev, cur, e, p)
	allowed, used, retry := false, est, time.Duration(0)
	switch {
	case cost > r.Limit:
		retry = Never
	case exact && est <= r.Limit-cost: // cannot overflow: 0 <= cost <= Limit
		allowed = true
		used += cost
		cur += cost
	default:
		retry = wait(prev, cur, e, p, r.Limit-cost)
	}
	// ResetAfter is wait(prev, cur, e, p, 0) written out: with the bound
	// 0, span(n, 0, p) is (p-1)/n, and the call would cost more than it.
	reset := time.Duration(0)
	switch {
	case cur > 0:
		next, in := p-e, p-(p-1)/cur
		reset = Never
		if next <= int64(Never)-in {
			reset = time.Duration(next + in)
		}
	case prev > 0:
		if t := p - (p-1)/prev; t > e {
			reset = time.Duration(t - e)
		}
	}
	d.Allowed, d.Rule, d.Limit, d.Period = allowed, r.Name, r.Limit, r.Period
	d.Used, d.Remaining = used, max(min(r.Limit-used, r.Limit), 0)
	d.ResetAfter, d.RetryAfter = reset, retry
	d.NextAfter = wait(prev, cur, e, p, r.NextBound(used))
	if !allowed {
		d.NextAfter = min(d.NextAfter, retry)
	}
}

// NextBound is the bound of Wait that gives a Decision's NextAfter on the
// counts whose estimate is used: one below the estimate, or below Limit
// when the estimate is over it (Remaining stays 0 until then); 0 when used
// is 0, whose Wait is then 0. A denial's NextAfter is no later than its
// RetryAfter (draft-10 §6), which is sooner for a cost of 0.
func (r Rule) NextBound(used int64) int64 { return max(min(used, r.Limit)-1, 0) }

// estimate returns floor(prev × (p-e) / p) + cur for non-negative counts,
// or math.MaxInt64 and false when the sum does not fit in an int64.
func estimate(prev, cur, e, p int64) (int64, bool) {
	w := weighted(prev, p-e, p)
	if cur > math.MaxInt64-w {
		return math.MaxInt64, false
	}
	return w + cur, true
}

// Wait returns how long after now the estimate of the given counts falls to
// at most bound if nothing else arrives; Never when bound is negative or
// the wait does not fit in a Duration. Negative counts count as zero.
// Decide's RetryAfter is Wait with the bound Limit - cost, its ResetAfter
// Wait with the bound 0 (computed in place), and its NextAfter Wait with
// the bound NextBound(Used), or RetryAfter if that is sooner.
func (r Rule) Wait(now time.Time, prev, cur, bound int64) time.Duration {
	p := int64(r.Period)
	_, e := split(now.UnixNano(), p)
	return wait(max(prev, 0), max(cur, 0), e, p, bound)
}

// weighted returns floor(n × x / p) for 0 <= x <= p without overflow.
func weighted(n, x, p int64) int64 {
	if n <= 0 || x <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(n), uint64(x))
	q, _ := bits.Div64(hi, lo, uint64(p)) // hi < p because x <= p
	return int64(q)
}

// span returns the largest x in [0, p] with floor(n × x / p) <= room:
// how much of the previous bucket may still overlap the window for its
// weighted count to stay within room.
func span(n, room, p int64) int64 {
	if n <= room {
		return p
	}
	// n×x < (room+1)×p  ⟺  x <= ((room+1)×p - 1) / n
	hi, lo := bits.Mul64(uint64(room+1), uint64(p))
	lo, borrow := bits.Sub64(lo, 1, 0)
	hi -= borrow
	q, _ := bits.Div64(hi, lo, uint64(n)) // hi < n because room+1 <= n
	return int64(q)
}

// wait returns the time after elapsed e (in [0, p)) of the current bucket at
// which floor(prev × overlap) + cur first drops to at most bound, knowing
// that at the next boundary prev becomes cur and cur becomes 0.
func wait(prev, cur, e, p, bound int64) time.Duration {
	if bound < 0 {
		return Never
	}
	if room := bound - cur; room >= 0 {
		if t := p - span(prev, room, p); t > e {
			return time.Duration(t - e)
		}
		return 0
	}
	// Not within this bucket: in the next one, cur is the previous bucket.
	// The sum is up to two periods; it saturates rather than wrap.
	next, in := p-e, p-span(cur, bound, p)
	if next > int64(Never)-in {
		return Never
	}
	return time.Duration(next + in)
}

// Combine returns the deciding decision of several rules that judged the
// same request: when any denied, the denial with the longest RetryAfter
// (the request is admitted only once every rule admits it); otherwise the
// admission with the least Remaining (the rule closest to its limit). Ties
// go to the earlier rule. Combine of no decisions is an allowed zero
// Decision.
func Combine(ds []Decision) Decision {
	if len(ds) == 0 {
		return Decision{Allowed: true}
	}
	best := ds[0]
	for _, d := range ds[1:] {
		switch {
		case best.Allowed && !d.Allowed:
			best = d
		case !best.Allowed && !d.Allowed:
			if d.RetryAfter > best.RetryAfter {
				best = d
			}
		case best.Allowed && d.Allowed:
			if d.Remaining < best.Remaining {
				best = d
			}
		}
	}
	return best
}
