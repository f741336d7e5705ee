package window_test

import (
	"errors"
	"testing"
	"time"

	"github.com/slidegate/slidegate/window"
)

// t0 is the start of the minute bucket 11:59 UTC; the boundary burst
// straddles its end at 12:00:00.
var t0 = time.Date(2026, 11, 22, 11, 59, 0, 0, time.UTC)

var perMinute = window.Rule{Name: "minute", Limit: 100, Period: time.Minute}

// counts is a store-like map of bucket index to recorded cost, driven the
// way the limiter drives a store: load the previous and current bucket,
// decide, record the cost only when admitted.
type counts map[int64]int64

func (c counts) take(r window.Rule, now time.Time, cost int64) window.Decision {
	i := window.Index(now, r.Period)
	d := r.Decide(now, c[i-1], c[i], cost)
	if d.Allowed {
		c[i] += cost
	}
	return d
}

func (c counts) estimate(r window.Rule, now time.Time) int64 {
	i := window.Index(now, r.Period)
	return r.Estimate(now, c[i-1], c[i])
}

// takeN sends n requests of cost 1 at now and returns how many were admitted.
func (c counts) takeN(r window.Rule, now time.Time, n int) int {
	admitted := 0
	for range n {
		if c.take(r, now, 1).Allowed {
			admitted++
		}
	}
	return admitted
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		r    window.Rule
		want error
	}{
		{"ok", perMinute, nil},
		{"one second", window.Rule{Name: "s", Limit: 1, Period: time.Second}, nil},
		{"no name", window.Rule{Limit: 1, Period: time.Second}, window.ErrName},
		{"zero limit", window.Rule{Name: "s", Limit: 0, Period: time.Second}, window.ErrLimit},
		{"negative limit", window.Rule{Name: "s", Limit: -1, Period: time.Second}, window.ErrLimit},
		{"short period", window.Rule{Name: "s", Limit: 1, Period: time.Second - 1}, window.ErrPeriod},
		{"negative period", window.Rule{Name: "s", Limit: 1, Period: -time.Minute}, window.ErrPeriod},
		{"zero rule", window.Rule{}, window.ErrName},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.r.Validate()
			if got, want := err, tt.want; !errors.Is(got, want) || (want == nil) != (got == nil) {
				t.Fatalf("Validate() = %v, want %v", got, want)
			}
		})
	}
}

func TestIndexStart(t *testing.T) {
	// 1900-01-01 is 2208988800 s before the Unix epoch (the NTP offset).
	const ntp = 2208988800
	tests := []struct {
		name      string
		t         time.Time
		d         time.Duration
		wantIndex int64
		wantStart time.Time
	}{
		{"bucket start", t0, time.Minute, t0.Unix() / 60, t0},
		{"bucket end", t0.Add(time.Minute - 1), time.Minute, t0.Unix() / 60, t0},
		{"next bucket", t0.Add(time.Minute), time.Minute, t0.Unix()/60 + 1, t0.Add(time.Minute)},
		{"hour", t0, time.Hour, t0.Unix() / 3600, time.Date(2026, 11, 22, 11, 0, 0, 0, time.UTC)},
		{"day", t0, 24 * time.Hour, t0.Unix() / 86400, time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)},
		{"epoch", time.Unix(0, 0), time.Minute, 0, time.Unix(0, 0)},
		{"one ns before epoch", time.Unix(0, -1), time.Minute, -1, time.Unix(-60, 0)},
		{"one ns before epoch, day", time.Unix(0, -1), 24 * time.Hour, -1, time.Unix(-86400, 0)},
		{"before epoch, inside", time.Date(1969, 12, 31, 23, 59, 30, 0, time.UTC), time.Minute, -1, time.Date(1969, 12, 31, 23, 59, 0, 0, time.UTC)},
		{"before epoch, on boundary", time.Date(1969, 12, 31, 23, 59, 0, 0, time.UTC), time.Minute, -1, time.Date(1969, 12, 31, 23, 59, 0, 0, time.UTC)},
		{"before epoch, just before boundary", time.Date(1969, 12, 31, 23, 58, 59, 999999999, time.UTC), time.Minute, -2, time.Date(1969, 12, 31, 23, 58, 0, 0, time.UTC)},
		{"1900", time.Date(1900, 1, 1, 0, 0, 30, 0, time.UTC), time.Minute, -ntp / 60, time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"odd period, -1s", time.Unix(-1, 0), 7 * time.Second, -1, time.Unix(-7, 0)},
		{"odd period, -7s", time.Unix(-7, 0), 7 * time.Second, -1, time.Unix(-7, 0)},
		{"odd period, -8s", time.Unix(-8, 0), 7 * time.Second, -2, time.Unix(-14, 0)},
		{"odd period, +8s", time.Unix(8, 0), 7 * time.Second, 1, time.Unix(7, 0)},
		{"other zone, same bucket", t0.In(time.FixedZone("X", 5*3600+1800)), time.Hour, t0.Unix() / 3600, time.Date(2026, 11, 22, 11, 0, 0, 0, time.UTC)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			i := window.Index(tt.t, tt.d)
			if got, want := i, tt.wantIndex; got != want {
				t.Fatalf("Index(%v, %v) = %d, want %d", tt.t, tt.d, got, want)
			}
			if got, want := window.Start(i, tt.d), tt.wantStart; !got.Equal(want) {
				t.Errorf("Start(%d, %v) = %v, want %v", i, tt.d, got, want)
			}
			if s := window.Start(i, tt.d); s.After(tt.t) || !tt.t.Before(s.Add(tt.d)) {
				t.Errorf("%v is not in [%v, %v)", tt.t, s, s.Add(tt.d))
			}
		})
	}
}

func TestEstimate(t *testing.T) {
	tests := []struct {
		name          string
		at            time.Duration // since t0, the start of the current bucket
		prev, cur     int64
		wantWeighted  int64
		wantEstimates int64
	}{
		{"bucket start: whole previous bucket", 0, 100, 0, 100, 100},
		{"half way", 30 * time.Second, 100, 0, 50, 50},
		{"quarter left", 45 * time.Second, 100, 7, 25, 32},
		{"floor 6.67", 20 * time.Second, 10, 3, 6, 9},
		{"last second: floor(100/60)", 59 * time.Second, 100, 0, 1, 1},
		{"last nanosecond", time.Minute - 1, 100, 40, 0, 40},
		{"nothing", 30 * time.Second, 0, 0, 0, 0},
		{"negative counts count as zero", 30 * time.Second, -100, 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := t0.Add(tt.at)
			if got, want := perMinute.Weighted(now, tt.prev), tt.wantWeighted; got != want {
				t.Errorf("Weighted = %d, want %d", got, want)
			}
			if got, want := perMinute.Estimate(now, tt.prev, tt.cur), tt.wantEstimates; got != want {
				t.Errorf("Estimate = %d, want %d", got, want)
			}
		})
	}
}

func TestDecide(t *testing.T) {
	tests := []struct {
		name          string
		at            time.Duration
		prev, cur     int64
		cost          int64
		wantAllowed   bool
		wantUsed      int64
		wantRemaining int64
	}{
		{"empty", 0, 0, 0, 1, true, 1, 99},
		{"peek", 30 * time.Second, 100, 20, 0, true, 70, 30},
		{"last unit", 30 * time.Second, 100, 49, 1, true, 100, 0},
		{"one over", 30 * time.Second, 100, 49, 2, false, 99, 1},
		{"full at bucket start", 0, 100, 0, 1, false, 100, 0},
		{"over the limit", 10 * time.Second, 100, 50, 1, false, 133, 0},
		{"cost equals limit, empty", 0, 0, 0, 100, true, 100, 0},
		{"cost above limit", 0, 0, 0, 101, false, 0, 100},
		{"previous bucket almost gone", time.Minute - 1, 100, 99, 1, true, 100, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := perMinute.Decide(t0.Add(tt.at), tt.prev, tt.cur, tt.cost)
			if got, want := d.Allowed, tt.wantAllowed; got != want {
				t.Errorf("Allowed = %v, want %v", got, want)
			}
			if got, want := d.Used, tt.wantUsed; got != want {
				t.Errorf("Used = %d, want %d", got, want)
			}
			if got, want := d.Remaining, tt.wantRemaining; got != want {
				t.Errorf("Remaining = %d, want %d", got, want)
			}
			if got, want := d.Rule, "minute"; got != want {
				t.Errorf("Rule = %q, want %q", got, want)
			}
			if d.Limit != 100 || d.Period != time.Minute {
				t.Errorf("Limit, Period = %d, %v, want 100, 1m", d.Limit, d.Period)
			}
			if d.Allowed && d.RetryAfter != 0 {
				t.Errorf("RetryAfter = %v on an admitted request, want 0", d.RetryAfter)
			}
		})
	}
}

// TestBoundaryBurst sends 100 requests at 11:59:59 and 100 at 12:00:01
// against 100/min. At 12:00:01 the previous bucket still weighs
// floor(100 × 59/60) = 98, so exactly 2 more pass: 102 in two seconds,
// never the 200 a fixed window would let through.
func TestBoundaryBurst(t *testing.T) {
	c := counts{}
	if got, want := c.takeN(perMinute, t0.Add(59*time.Second), 100), 100; got != want {
		t.Fatalf("admitted at 11:59:59 = %d, want %d", got, want)
	}
	second := c.takeN(perMinute, t0.Add(61*time.Second), 100)
	if got, want := second, 2; got != want {
		t.Errorf("admitted at 12:00:01 = %d, want %d (floor(100*59/60) = 98 still counted)", got, want)
	}
	if total := 100 + second; total >= 200 {
		t.Errorf("admitted %d in two seconds against 100/min", total)
	}
	// The next one is denied until the previous bucket's weight falls to 97:
	// 100x < 98 × 60 s, x <= 58.8 s - 1 ns, so at 12:00:01.2 + 1 ns.
	d := c.take(perMinute, t0.Add(61*time.Second), 1)
	if got, want := d.RetryAfter, 200*time.Millisecond+1; got != want {
		t.Errorf("RetryAfter = %v, want %v", got, want)
	}
	admitsFrom(t, c, perMinute, t0.Add(61*time.Second+d.RetryAfter), 1)
}

// TestRetryAfter checks hand-computed RetryAfter values. For a rule of
// 100/min, at elapsed e in the current bucket with counts prev and cur, a
// request of cost c needs floor(prev × x / 60 s) + cur + c <= 100 where
// x = 60 s - e: the earliest instant is one where x is at most the largest x
// that satisfies it.
func TestRetryAfter(t *testing.T) {
	tests := []waitCase{
		// weighted 50 + 49 + 2 > 100; weight 49 needs x < 30 s: 1 ns later.
		{"one nanosecond", 30 * time.Second, 100, 49, 2, 1},
		// 75 + 30 + 1 > 100; weight 69 needs 100x < 70 × 60 s, x <= 42 s - 1 ns.
		{"falling overlap", 15 * time.Second, 100, 30, 1, 3*time.Second + 1},
		// weight 60 needs 100x < 61 × 60 s, x <= 36.6 s - 1 ns.
		{"falling overlap, cost 10", 15 * time.Second, 100, 30, 10, 8400*time.Millisecond + 1},
		// cur alone is at the limit: in the next bucket it weighs
		// floor(100x / 60 s) <= 99 once x <= 60 s - 1 ns.
		{"next bucket", 30 * time.Second, 0, 100, 1, 30*time.Second + 1},
		// weight 50 in the next bucket: x < 30.6 s.
		{"next bucket, cost 50", 30 * time.Second, 0, 100, 50, 59400*time.Millisecond + 1},
		// weight 0 in the next bucket: 100x < 60 s, x <= 0.6 s - 1 ns.
		{"next bucket, cost is the limit", 30 * time.Second, 0, 100, 100, 89400*time.Millisecond + 1},
		// prev weighs floor(6e12 × 1 ns / 60 s) = 100 even 1 ns before
		// the roll-over; at 12:00:00 it is gone and cur = 0 becomes prev.
		{"at the roll-over", 30 * time.Second, 6_000_000_000_000, 0, 1, 30 * time.Second},
		// cur weighs 100 in the whole next bucket: the bucket after.
		{"bucket after", 30 * time.Second, 0, 6_000_000_000_000, 1, 90 * time.Second},
		// one less: weighs 99 at x = 1 ns, the last nanosecond of the next bucket.
		{"last ns of next bucket", 30 * time.Second, 0, 5_999_999_999_999, 1, 90*time.Second - 1},
		{"cost above limit", 30 * time.Second, 0, 0, 101, window.Never},
		{"cost above limit, full", 30 * time.Second, 100, 100, 1000, window.Never},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := t0.Add(tt.at)
			d := perMinute.Decide(now, tt.prev, tt.cur, tt.cost)
			if d.Allowed {
				t.Fatalf("Decide admitted: %+v", d)
			}
			if got, want := d.RetryAfter, tt.want; got != want {
				t.Fatalf("RetryAfter = %v, want %v", got, want)
			}
			if tt.want == window.Never {
				return
			}
			i := window.Index(now, perMinute.Period)
			admitsFrom(t, counts{i - 1: tt.prev, i: tt.cur}, perMinute, now.Add(tt.want), tt.cost)
		})
	}
}

// waitCase is a request of cost at t0+at on the counts prev and cur, and
// the hand-computed wait it should get.
type waitCase struct {
	name      string
	at        time.Duration
	prev, cur int64
	cost      int64
	want      time.Duration
}

// admitsFrom replays a request of cost on a store-like c: what was
// recorded stays in its bucket as the clock advances. The request must be
// denied one nanosecond before at and admitted at at.
func admitsFrom(t *testing.T, c counts, r window.Rule, at time.Time, cost int64) {
	t.Helper()
	if d := c.take(r, at.Add(-1), cost); d.Allowed {
		t.Errorf("admitted 1 ns before %v: %+v", at, d)
	}
	if d := c.take(r, at, cost); !d.Allowed {
		t.Errorf("denied at %v: %+v", at, d)
	}
}

// takeAt decides a request of cost at t0+at on the counts prev and cur of
// r's previous and current buckets there, and returns the counts (with the
// request's cost when admitted), the instant and the decision.
func takeAt(r window.Rule, at time.Duration, prev, cur, cost int64) (counts, time.Time, window.Decision) {
	now := t0.Add(at)
	i := window.Index(now, r.Period)
	c := counts{i - 1: prev, i: cur}
	return c, now, c.take(r, now, cost)
}

func TestResetAfter(t *testing.T) {
	tests := []waitCase{
		{"nothing counted", 30 * time.Second, 0, 0, 0, 0},
		// floor(100x / 60 s) = 0 needs x < 0.6 s: at 59.4 s + 1 ns.
		{"previous bucket only", 30 * time.Second, 100, 0, 0, 29400*time.Millisecond + 1},
		// the admitted request moves into prev at 12:00:00 and weighs
		// floor(1 × x / 60 s) = 0 from 1 ns later.
		{"admitted request", 30 * time.Second, 0, 0, 1, 30*time.Second + 1},
		// cur = 100 weighs 0 in the next bucket once 100x < 60 s: x <= 0.6 s - 1 ns.
		{"full current bucket, peek", 30 * time.Second, 0, 100, 0, 89400*time.Millisecond + 1},
		{"full current bucket, denied request not counted", 30 * time.Second, 0, 100, 1, 89400*time.Millisecond + 1},
		{"admitted request counted", 30 * time.Second, 0, 99, 1, 89400*time.Millisecond + 1},
		// prev is gone at the roll-over; cur = 50 then weighs 0 once 50x < 60 s.
		{"both buckets", 30 * time.Second, 100, 49, 1, 88800*time.Millisecond + 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, now, d := takeAt(perMinute, tt.at, tt.prev, tt.cur, tt.cost)
			if got, want := d.ResetAfter, tt.want; got != want {
				t.Fatalf("ResetAfter = %v, want %v", got, want)
			}
			if d.ResetAfter < d.RetryAfter {
				t.Errorf("ResetAfter %v < RetryAfter %v", d.ResetAfter, d.RetryAfter)
			}
			if got := c.estimate(perMinute, now.Add(d.ResetAfter)); got != 0 {
				t.Errorf("estimate at ResetAfter = %d, want 0", got)
			}
			if d.ResetAfter > 0 && c.estimate(perMinute, now.Add(d.ResetAfter-1)) == 0 {
				t.Errorf("estimate is 0 already 1 ns before ResetAfter")
			}
		})
	}
}

// TestNextAfter pins NextAfter, the time until Remaining next rises (the
// RateLimit field's t), on a rule of 10 a minute, at the boundaries of
// the floor in the estimate, and against RetryAfter: for a denial it is
// never later (draft-ietf-httpapi-ratelimit-headers-10 §6), and for a cost
// of 1 it is the same wait.
func TestNextAfter(t *testing.T) {
	r := window.Rule{Name: "minute", Limit: 10, Period: time.Minute}
	const never = window.Never
	tests := []struct {
		name            string
		at              time.Duration
		prev, cur, cost int64
		next, retry     time.Duration
	}{
		{"nothing used", 30 * time.Second, 0, 0, 0, 0, 0},
		// floor(1 × 30 s / 60 s) = 0: nothing to give back.
		{"previous bucket weighs nothing", 30 * time.Second, 1, 0, 0, 0, 0},
		// the request moves into prev at the boundary and weighs 0 1 ns on.
		{"one admitted", 30 * time.Second, 0, 0, 1, 30*time.Second + 1, 0},
		{"admitted to 0 left", 30 * time.Second, 0, 9, 1, 30*time.Second + 1, 0},
		// floor(10 × x / 60 s) <= 9 from 1 ns into the next bucket, <= 7
		// once x < 48 s; the whole quota is back after 84 s.
		{"used up, cost 1", 30 * time.Second, 0, 10, 1, 30*time.Second + 1, 30*time.Second + 1},
		{"used up, cost 3", 30 * time.Second, 0, 10, 3, 30*time.Second + 1, 42*time.Second + 1},
		{"cost above the limit", 30 * time.Second, 0, 10, 11, 30*time.Second + 1, never},
		// Used 15 over a limit of 10 (lowered): Remaining rises when the
		// estimate is 9, floor(15 × x / 60 s) <= 9 once x < 40 s, not
		// when it is 14 (1 ns into the next bucket).
		{"used over the limit", 30 * time.Second, 0, 15, 1, 50*time.Second + 1, 50*time.Second + 1},
		// floor(10 × 54 s / 60 s) = 9 exactly: 8 from 1 ns later.
		{"previous bucket on a step", 6 * time.Second, 10, 0, 0, 1, 0},
		// floor(10 × 57 s / 60 s) = 9 until the step at 6 s.
		{"previous bucket between steps", 3 * time.Second, 10, 0, 0, 3*time.Second + 1, 0},
		// 5 + 2 + 1 = 8 falls to 7 when floor(10 × x / 60 s) <= 4: x < 30 s.
		{"both buckets", 30 * time.Second, 10, 2, 1, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, now, d := takeAt(r, tt.at, tt.prev, tt.cur, tt.cost)
			if d.NextAfter != tt.next || d.RetryAfter != tt.retry {
				t.Fatalf("%+v: NextAfter, RetryAfter = %v, %v; want %v, %v", d, d.NextAfter, d.RetryAfter, tt.next, tt.retry)
			}
			if !d.Allowed && d.NextAfter > d.RetryAfter {
				t.Errorf("denied with NextAfter %v after RetryAfter %v", d.NextAfter, d.RetryAfter)
			}
			if d.Used == 0 {
				return
			}
			left := func(at time.Time) int64 { return max(r.Limit-c.estimate(r, at), 0) }
			if got := left(now.Add(d.NextAfter)); got <= d.Remaining {
				t.Errorf("remaining %d at now+NextAfter, want more than %d", got, d.Remaining)
			}
			if got := left(now.Add(d.NextAfter - 1)); got != d.Remaining {
				t.Errorf("remaining %d 1 ns before now+NextAfter, want %d", got, d.Remaining)
			}
		})
	}
}

func TestWait(t *testing.T) {
	now := t0.Add(30 * time.Second)
	tests := []struct {
		name      string
		prev, cur int64
		bound     int64
		want      time.Duration
	}{
		{"already below", 100, 0, 60, 0},
		{"at bound", 100, 0, 50, 0},
		{"falling overlap", 100, 0, 49, 1},
		{"next bucket", 0, 100, 99, 30*time.Second + 1},
		{"zero bound", 100, 0, 0, 29400*time.Millisecond + 1},
		{"negative bound", 0, 0, -1, window.Never},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, want := perMinute.Wait(now, tt.prev, tt.cur, tt.bound), tt.want; got != want {
				t.Fatalf("Wait = %v, want %v", got, want)
			}
		})
	}
}

func TestCombine(t *testing.T) {
	allow := func(rule string, remaining int64) window.Decision {
		return window.Decision{Allowed: true, Rule: rule, Remaining: remaining}
	}
	deny := func(rule string, retry time.Duration) window.Decision {
		return window.Decision{Rule: rule, RetryAfter: retry}
	}
	tests := []struct {
		name        string
		ds          []window.Decision
		wantRule    string
		wantAllowed bool
	}{
		{"empty", nil, "", true},
		{"one admit", []window.Decision{allow("minute", 5)}, "minute", true},
		{"one deny", []window.Decision{deny("minute", time.Second)}, "minute", false},
		{"least remaining", []window.Decision{allow("minute", 5), allow("day", 3), allow("hour", 4)}, "day", true},
		{"remaining tie goes to the earlier", []window.Decision{allow("minute", 3), allow("day", 3)}, "minute", true},
		{"deny after admits", []window.Decision{allow("minute", 0), deny("day", time.Second)}, "day", false},
		{"deny before admits", []window.Decision{deny("minute", time.Second), allow("day", 0)}, "minute", false},
		{"longest retry", []window.Decision{deny("second", time.Second), allow("x", 0), deny("day", time.Hour), deny("minute", time.Minute)}, "day", false},
		{"retry tie goes to the earlier", []window.Decision{deny("minute", time.Minute), deny("day", time.Minute)}, "minute", false},
		{"never wins", []window.Decision{deny("minute", time.Minute), deny("day", window.Never)}, "day", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := window.Combine(tt.ds)
			if got, want := d.Rule, tt.wantRule; got != want {
				t.Errorf("Rule = %q, want %q", got, want)
			}
			if got, want := d.Allowed, tt.wantAllowed; got != want {
				t.Errorf("Allowed = %v, want %v", got, want)
			}
		})
	}
	t.Run("real rules", func(t *testing.T) {
		day := window.Rule{Name: "day", Limit: 1000, Period: 24 * time.Hour}
		now := t0.Add(30 * time.Second)
		ds := []window.Decision{
			perMinute.Decide(now, 0, 10, 1), // remaining 89
			day.Decide(now, 0, 950, 1),      // remaining 49
		}
		if got, want := window.Combine(ds), ds[1]; got != want {
			t.Errorf("Combine = %+v, want the day decision %+v", got, want)
		}
		ds[0] = perMinute.Decide(now, 0, 100, 1) // denied until 12:00:00 + 1 ns
		if got, want := window.Combine(ds), ds[0]; got != want {
			t.Errorf("Combine = %+v, want the minute denial %+v", got, want)
		}
	})
}

// TestDayLong uses a period of 86400 s (8.64e13 ns): prev × x overflows 64
// bits as soon as prev exceeds ~106,000, so a limit of 1,000,000 needs the
// 128-bit products.
func TestDayLong(t *testing.T) {
	day := window.Rule{Name: "day", Limit: 1_000_000, Period: 24 * time.Hour}
	// t0 is 11:59 UTC: 43,260 s of the previous day still overlap.
	now := t0
	if got, want := day.Weighted(now, 1_000_000), int64(500_694); got != want {
		t.Errorf("Weighted(1e6) = %d, want floor(1e6 × 43260 / 86400) = %d", got, want)
	}
	if got, want := day.Weighted(now, 1_000_000_000_000_000), int64(500_694_444_444_444); got != want {
		t.Errorf("Weighted(1e15) = %d, want %d", got, want)
	}
	if got, want := day.Weighted(now.Add(-11*time.Hour-59*time.Minute), 1<<62), int64(1<<62); got != want {
		t.Errorf("Weighted(2^62) at midnight = %d, want %d", got, want)
	}
	if d := day.Decide(now, 1_000_000, 499_305, 1); !d.Allowed || d.Remaining != 0 || d.Used != 1_000_000 {
		t.Errorf("Decide(499,305 + 1) = %+v, want admitted, used 1e6, remaining 0", d)
	}
	d := day.Decide(now, 1_000_000, 499_306, 1)
	if d.Allowed {
		t.Fatalf("Decide(499,306 + 1) admitted: %+v", d)
	}
	// weight 500,693 needs 1e6 x < 500,694 × 86,400 s = 43,259.9616e6 × 1e6 ns,
	// x <= 43,259,961,599,999 ns: 38.4 ms + 1 ns after 11:59.
	if got, want := d.RetryAfter, 38400*time.Microsecond+1; got != want {
		t.Errorf("RetryAfter = %v, want %v", got, want)
	}
	if got, want := d.Used, int64(1_000_000); got != want {
		t.Errorf("Used = %d, want %d", got, want)
	}
	if d.ResetAfter <= 0 || d.ResetAfter > 2*24*time.Hour {
		t.Errorf("ResetAfter = %v, want within two days", d.ResetAfter)
	}
}

// TestClockBackwardsWithinBucket decides the same counts at an instant and
// at earlier ones in the same bucket: the formula is the same, durations are
// never negative, and the instant at which the request is admitted does not
// move (the earlier clock waits longer, by exactly the step).
func TestClockBackwardsWithinBucket(t *testing.T) {
	const prev, cur = 100, 30
	later := t0.Add(15 * time.Second)
	dl := perMinute.Decide(later, prev, cur, 1)
	for _, step := range []time.Duration{1, time.Millisecond, 5 * time.Second, 15 * time.Second} {
		earlier := later.Add(-step)
		de := perMinute.Decide(earlier, prev, cur, 1)
		if de.RetryAfter < 0 || de.ResetAfter < 0 {
			t.Fatalf("step %v: negative duration: %+v", step, de)
		}
		if got, want := de.Used, perMinute.Estimate(earlier, prev, cur); got != want {
			t.Errorf("step %v: Used = %d, want the estimate %d", step, got, want)
		}
		if de.Used < dl.Used {
			t.Errorf("step %v: estimate fell when the clock went back: %d < %d", step, de.Used, dl.Used)
		}
		if got, want := earlier.Add(de.RetryAfter), later.Add(dl.RetryAfter); !got.Equal(want) {
			t.Errorf("step %v: retry at %v, want %v", step, got, want)
		}
		if got, want := earlier.Add(de.ResetAfter), later.Add(dl.ResetAfter); !got.Equal(want) {
			t.Errorf("step %v: reset at %v, want %v", step, got, want)
		}
	}
}

// TestClockBackwardsAcrossBucket steps the clock back from 12:00:30 to
// 11:59:30. Decide itself is well-defined there (it only sees the counts
// it is given), but a store keyed by bucket would hand it the buckets
// 11:58 and 11:59 and miss what was recorded at 12:00: the caller has to
// keep its clock monotonic, as rate.Limiter does (a time before the last
// one is treated as the last one). The simulation here does that and shows
// no quota comes free.
func TestClockBackwardsAcrossBucket(t *testing.T) {
	c := monotonic{counts: counts{}}
	first := c.takeN(perMinute, t0.Add(90*time.Second), 100)
	if got, want := first, 100; got != want {
		t.Fatalf("admitted at 12:00:30 = %d, want %d", got, want)
	}
	for _, back := range []time.Duration{time.Second, time.Minute, time.Minute + time.Second, time.Hour} {
		now := t0.Add(90 * time.Second).Add(-back)
		if got := c.takeN(perMinute, now, 100); got != 0 {
			t.Errorf("clock back %v: admitted %d more, want 0", back, got)
		}
		d := perMinute.Decide(now, 0, 100, 1)
		if d.Allowed || d.RetryAfter <= 0 || d.ResetAfter <= 0 {
			t.Errorf("clock back %v: Decide on the full bucket = %+v, want denied with positive waits", back, d)
		}
	}
	// Once real time passes 12:00:30 again, the estimate falls as usual.
	if got, want := c.takeN(perMinute, t0.Add(120*time.Second+1), 100), 1; got != want {
		t.Errorf("admitted at 12:01:00 + 1 ns = %d, want %d", got, want)
	}
}

// monotonic wraps counts with a clock that never goes back.
type monotonic struct {
	counts
	last time.Time
}

func (m *monotonic) takeN(r window.Rule, now time.Time, n int) int {
	if now.Before(m.last) {
		now = m.last
	}
	m.last = now
	return m.counts.takeN(r, now, n)
}
