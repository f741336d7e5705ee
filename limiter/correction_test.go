package limiter

import (
	"testing"
	"time"
)

// TestDenyCacheAfterClockCorrection: the deny cache answers from counts it
// takes for lower bounds of the store's: those it was denied on, and zero
// for the bucket after theirs. After a correction of the clock (a step back
// of more than maxHold), neither holds. A denial remembered while the clock
// ran ahead stays cached (its wait ends in the ahead time) while requests
// that it no longer denies are counted in the store; and a bucket after a
// remembered one may hold what was counted while the clock ran ahead. The
// cached answers then come with waits shorter than the store's: a client
// told to retry then is refused again. The same requests on a limiter
// without the deny cache show what the store says.
func TestDenyCacheAfterClockCorrection(t *testing.T) {
	base := t0.Add(10 * time.Minute) // 12:09:30
	type op struct {
		at   time.Time
		cost int64
		set  int // index in sets
	}
	for _, tc := range []struct {
		name string
		sets [][]Rule
		ops  []op
	}{
		{
			name: "denial remembered ahead",
			sets: [][]Rule{{rule("minute", 2, time.Minute), rule("hour", 3, time.Hour)}},
			ops: []op{
				{base.Add(5 * time.Minute), 1, 0}, {base.Add(5 * time.Minute), 1, 0}, // minute full, hour 2
				{base.Add(5 * time.Minute), 1, 0}, // denied by minute: remembered until 12:15:30 and more
				{base, 1, 0},                      // the correction: not denied by the cache, counted (hour 3)
				{base.Add(time.Second), 2, 0},     // denied by hour: on 3, not on 2
			},
		},
		{
			// Two plans' "minute" rules share a counter (a check API
			// request naming another plan than its key's).
			name: "next bucket counted ahead",
			sets: [][]Rule{{rule("minute", 1, time.Minute)}, {rule("minute", 3, time.Minute)}},
			ops: []op{
				{base.Add(70 * time.Second), 1, 1}, {base.Add(70 * time.Second), 1, 1}, // 12:10 holds 2
				{base, 1, 1}, {base, 1, 1}, {base, 1, 1}, // the correction: 12:09 holds 3
				{base, 1, 0},                       // denied: remembered, with 12:10 taken as empty
				{base.Add(35 * time.Second), 1, 0}, // 12:10:05: on 3 of 12:09 and 2 of 12:10
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cached, plain := New(Options{}), New(Options{DisableDenyCache: true})
			for i, o := range tc.ops {
				got := check(t, cached, o.at, "k", o.cost, tc.sets[o.set]...)
				want := check(t, plain, o.at, "k", o.cost, tc.sets[o.set]...)
				if got.Allowed != want.Allowed || got.RetryAfter != want.RetryAfter || got.Used != want.Used {
					t.Fatalf("request %d (set %d, cost %d at %s): allowed %t, cached %t, rule %q used %d, RetryAfter %v; the store says allowed %t, rule %q used %d, RetryAfter %v",
						i, o.set, o.cost, o.at.Format("15:04:05"), got.Allowed, got.Cached, got.Rule, got.Used, got.RetryAfter,
						want.Allowed, want.Rule, want.Used, want.RetryAfter)
				}
			}
		})
	}
}

// TestRefundAfterClockCorrectionKeepsCurrentCounts: a refund of a check
// made while the clock ran ahead, taken after the clock was corrected, must
// take its cost back from the bucket that check counted in and leave the
// counts of the current (corrected) buckets alone. The memory store keeps
// the corrected time's counts as cells behind the identity's newest pair
// and, to write the refund's bucket, reused the cell of the current bucket
// (any cell older than the written bucket's previous one counts as
// unreadable): the current count was wiped, and the next request of an
// identity at its limit was admitted.
func TestRefundAfterClockCorrectionKeepsCurrentCounts(t *testing.T) {
	r := rule("second", 1, 2*time.Second)
	for _, local := range []bool{false, true} {
		r.Local = local
		l := New(Options{DisableDenyCache: true})
		ahead := t0.Add(10 * time.Minute)
		first := check(t, l, ahead, "k", 1, r) // the check to be refunded
		if !first.Allowed {
			t.Fatal("setup: first check denied")
		}
		if !check(t, l, ahead.Add(10*time.Second), "k", 1, r).Allowed {
			t.Fatal("setup: second check denied")
		}
		// The clock is corrected by ten minutes: the limiter follows it.
		if !check(t, l, t0, "k", 1, r).Allowed {
			t.Fatal("setup: the first check after the correction was denied")
		}
		if res := check(t, l, t0.Add(100*time.Millisecond), "k", 1, r); res.Allowed {
			t.Fatal("setup: the second check of the corrected second was admitted")
		}
		if err := l.Refund(ctx, first.At, "k", []Rule{r}, 1); err != nil {
			t.Fatal(err)
		}
		// The refund took back a cost of ten minutes ahead; the current
		// bucket still holds the check at t0, and its limit is 1.
		if res := check(t, l, t0.Add(200*time.Millisecond), "k", 1, r); res.Allowed {
			t.Errorf("local %t: after the refund of a check ten minutes ahead, a request over the limit of the current bucket was admitted (used %d)", local, res.Used)
		}
	}
}

// TestNoDenialRememberedFromBeforeACorrection: a check decided in the time
// the clock ran ahead may reach remember after the correction emptied the
// cache (it passed its own checks before): remember refuses it under the
// shard's lock, where clear takes it too.
func TestNoDenialRememberedFromBeforeACorrection(t *testing.T) {
	c := newDenyCache(0)
	rules := []Rule{rule("day", 1, 24*time.Hour)}
	ahead := t0.Add(10 * time.Minute)
	c.corrected(ahead.UnixNano())
	for _, at := range []time.Time{ahead.Add(-time.Minute), ahead} {
		c.remember("k", at, rules, []int64{0}, []int64{1}, c.generation("k"))
		if n := c.size.Load(); n != 0 {
			t.Fatalf("a denial decided at %s, before the correction from %s, was remembered", at.Format(time.TimeOnly), ahead.Format(time.TimeOnly))
		}
	}
	c.remember("k", ahead.Add(time.Millisecond), rules, []int64{0}, []int64{1}, c.generation("k"))
	if n := c.size.Load(); n != 1 {
		t.Errorf("a denial decided past the time the clock had reached was not remembered (%d held)", n)
	}
}
