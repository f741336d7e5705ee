package accuracy

import (
	"errors"
	"testing"
	"time"

	"github.com/slidegate/slidegate/window"
)

// tiny is the rule of the hand-made traces: 2 requests per 10 s.
var tiny = window.Rule{Name: "tiny", Limit: 2, Period: 10 * time.Second}

// at returns the instant s seconds after the start of the traces of rule
// tiny (a bucket boundary).
func at(s float64) time.Time {
	return Origin(tiny.Period).Add(time.Duration(s * float64(time.Second)))
}

// handTrace is the trace worked out by hand in TestReplayByHand.
func handTrace() Trace {
	var reqs []Request
	for _, s := range []float64{9, 9.5, 11, 15, 19.6, 20.5, 40.1, 40.2, 50.5, 51} {
		reqs = append(reqs, Request{At: at(s)})
	}
	return Trace{Name: "hand", Rule: tiny, Requests: reqs}
}

// TestReplayByHand checks Replay against a trace decided by hand.
//
// Rule: limit 2 per 10 s; buckets [0,10) [10,20) [20,30) ... seconds from
// a boundary. overlap = 1 - (t - bucket start)/10; est = floor(prev ×
// overlap) + cur; the window admits iff est + 1 <= 2. "true" is the exact
// count of counted requests in (t-10, t] on the window's own history.
//
// Count admitted (only admissions are counted):
//
//	t     prev cur overlap est  window  true  exact  |est-true|
//	9.0   0    0   -       0    admit   0     admit  0
//	9.5   0    1   -       1    admit   1     admit  0
//	11.0  2    0   0.9     1    admit   2     deny   1   wrong admission
//	15.0  2    1   0.5     2    deny    3     deny   1
//	19.6  2    1   0.04    1    admit   1     admit  0   (9, 9.5 have left)
//	20.5  2    0   0.95    1    admit   2     deny   1   wrong admission
//	40.1  0    0   -       0    admit   0     admit  0   (buckets expired)
//	40.2  0    1   -       1    admit   1     admit  0
//	50.5  2    0   0.95    1    admit   0     admit  1
//	51.0  2    1   0.9     2    deny    1     admit  1   wrong denial
//
// → 2 wrong admissions, 1 wrong denial, Σ|est-true| = 5, Σtrue = 11,
// 8 admitted. The independent exact run admits 9, 9.5, 19.6, 20.5, 40.1,
// 40.2, 50.5, 51 (8; it denies 11 and 15): it differs on 11 and 51, so
// diverged = 2. Densest windows: the window's admissions 9, 9.5, 11 lie in
// [9, 19) → 3; the exact run's never exceed 2 (first at [9, 19)).
//
// Count denied too (every request counted):
//
//	t     prev cur overlap est  window  true  exact  |est-true|
//	9.0   0    0   -       0    admit   0     admit  0
//	9.5   0    1   -       1    admit   1     admit  0
//	11.0  2    0   0.9     1    admit   2     deny   1   wrong admission
//	15.0  2    1   0.5     2    deny    3     deny   1
//	19.6  2    2   0.04    2    deny    2     deny   0   (11, 15 still in)
//	20.5  3    0   0.95    2    deny    3     deny   1   (floor(2.85) = 2)
//	40.1  0    0   -       0    admit   0     admit  0
//	40.2  0    1   -       1    admit   1     admit  0
//	50.5  2    0   0.95    1    admit   0     admit  1
//	51.0  2    1   0.9     2    deny    1     admit  1   wrong denial
//
// → 1 wrong admission, 1 wrong denial, Σ|est-true| = 5, Σtrue = 13,
// 6 admitted; the exact run counts the same history, so it admits 9, 9.5,
// 40.1, 40.2, 50.5, 51 (6) and diverged = 2 = wrong decisions. Densest
// windows: 3 ([9, 19): 9, 9.5, 11) and 2.
func TestReplayByHand(t *testing.T) {
	tests := []struct {
		mode                    Mode
		wrongAdm, wrongDen      int
		absErr, trueCount       float64
		admitted, admittedExact int
		diverged                int
		worst, worstExact       int64
		window, exact           []bool
	}{
		{
			mode: CountAdmitted, wrongAdm: 2, wrongDen: 1, absErr: 5, trueCount: 11,
			admitted: 8, admittedExact: 8, diverged: 2, worst: 3, worstExact: 2,
			window: []bool{true, true, true, false, true, true, true, true, true, false},
			exact:  []bool{true, true, false, false, true, true, true, true, true, true},
		},
		{
			mode: CountAll, wrongAdm: 1, wrongDen: 1, absErr: 5, trueCount: 13,
			admitted: 6, admittedExact: 6, diverged: 2, worst: 3, worstExact: 2,
			window: []bool{true, true, true, false, false, false, true, true, true, false},
			exact:  []bool{true, true, false, false, false, false, true, true, true, true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.mode.String(), func(t *testing.T) {
			r, err := Replay(handTrace(), tt.mode)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := r.Requests, 10; got != want {
				t.Errorf("Requests = %d, want %d", got, want)
			}
			if r.WrongAdmissions != tt.wrongAdm || r.WrongDenials != tt.wrongDen {
				t.Errorf("wrong admissions, denials = %d, %d, want %d, %d", r.WrongAdmissions, r.WrongDenials, tt.wrongAdm, tt.wrongDen)
			}
			if r.AbsError != tt.absErr || r.TrueCount != tt.trueCount {
				t.Errorf("AbsError, TrueCount = %g, %g, want %g, %g", r.AbsError, r.TrueCount, tt.absErr, tt.trueCount)
			}
			if r.Admitted != tt.admitted || r.AdmittedExact != tt.admittedExact || r.Diverged != tt.diverged {
				t.Errorf("Admitted, AdmittedExact, Diverged = %d, %d, %d, want %d, %d, %d",
					r.Admitted, r.AdmittedExact, r.Diverged, tt.admitted, tt.admittedExact, tt.diverged)
			}
			if want := (Worst{N: tt.worst, Start: at(9)}); r.Worst != want {
				t.Errorf("Worst = %+v, want %+v", r.Worst, want)
			}
			if want := (Worst{N: tt.worstExact, Start: at(9)}); r.WorstExact != want {
				t.Errorf("WorstExact = %+v, want %+v", r.WorstExact, want)
			}
			for i := range tt.window {
				if r.Window[i] != tt.window[i] || r.Exact[i] != tt.exact[i] {
					t.Errorf("request %d (%v): window, exact = %v, %v, want %v, %v",
						i, handTrace().Requests[i].At.Sub(at(0)), r.Window[i], r.Exact[i], tt.window[i], tt.exact[i])
				}
			}
			if got, want := r.WrongShare(), float64(tt.wrongAdm+tt.wrongDen)/10; got != want {
				t.Errorf("WrongShare() = %g, want %g", got, want)
			}
			if got, want := r.MeanAbsError(), tt.absErr/10; got != want {
				t.Errorf("MeanAbsError() = %g, want %g", got, want)
			}
			if got, want := r.RelativeError(), tt.absErr/tt.trueCount; got != want {
				t.Errorf("RelativeError() = %g, want %g", got, want)
			}
		})
	}
}

// TestReplaySourcesIndependent interleaves two copies of the hand trace
// under two sources: each source must be judged on its own counters, so
// every count doubles.
func TestReplaySourcesIndependent(t *testing.T) {
	one := handTrace()
	two := Trace{Name: "two", Rule: tiny}
	for _, q := range one.Requests {
		two.Requests = append(two.Requests, Request{At: q.At, Source: 0}, Request{At: q.At, Source: 7})
	}
	for _, mode := range []Mode{CountAdmitted, CountAll} {
		t.Run(mode.String(), func(t *testing.T) {
			a, err := Replay(one, mode)
			if err != nil {
				t.Fatal(err)
			}
			b, err := Replay(two, mode)
			if err != nil {
				t.Fatal(err)
			}
			if b.Sources != 8 {
				t.Errorf("Sources = %d, want 8", b.Sources)
			}
			if b.WrongAdmissions != 2*a.WrongAdmissions || b.WrongDenials != 2*a.WrongDenials ||
				b.Admitted != 2*a.Admitted || b.AbsError != 2*a.AbsError || b.Diverged != 2*a.Diverged {
				t.Errorf("two sources: %+v\nwant twice one source: %+v", b, a)
			}
			if b.Worst.N != a.Worst.N {
				t.Errorf("Worst.N = %d, want %d (per source, not summed)", b.Worst.N, a.Worst.N)
			}
		})
	}
}

func TestReplayRejectsBadInput(t *testing.T) {
	ok := handTrace()
	unsorted := handTrace()
	unsorted.Requests[3], unsorted.Requests[4] = unsorted.Requests[4], unsorted.Requests[3]
	negative := handTrace()
	negative.Requests[2].Source = -1
	huge := handTrace()
	huge.Requests[2].Source = MaxSources
	badRule := handTrace()
	badRule.Rule.Limit = 0
	tests := []struct {
		name string
		tr   Trace
		mode Mode
		want error
	}{
		{"unsorted", unsorted, CountAdmitted, ErrUnsorted},
		{"negative source", negative, CountAdmitted, ErrSource},
		{"source too large", huge, CountAll, ErrSource},
		{"bad rule", badRule, CountAdmitted, window.ErrLimit},
		{"bad mode", ok, Mode(7), ErrParam},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Replay(tt.tr, tt.mode); !errors.Is(err, tt.want) {
				t.Errorf("Replay() error = %v, want %v", err, tt.want)
			}
		})
	}
}

// TestReplayInvariants checks what must hold on any trace: the exact log
// never admits more than the limit in one period, the two-bucket window
// never more than twice the limit (the bound proved in docs/accuracy.md),
// and in CountAll mode the two definitions of a wrong decision agree.
func TestReplayInvariants(t *testing.T) {
	rule := window.Rule{Name: "r", Limit: 20, Period: 10 * time.Second}
	gens := []Generator{
		Poisson{Rule: rule, Rate: 1, Periods: 200},
		OnOff{Rule: rule, Rate: 6, On: 2 * time.Second, Off: 8 * time.Second, Periods: 200},
		ManySources{Rule: rule, Sources: 50, Top: 3, Exponent: 1, Periods: 50},
		Boundary{Rule: rule, Spread: 100 * time.Millisecond, Probe: 5, Rounds: 5},
	}
	for _, g := range gens {
		tr, err := g.Generate(42)
		if err != nil {
			t.Fatal(err)
		}
		for _, mode := range []Mode{CountAdmitted, CountAll} {
			t.Run(tr.Name+"/"+mode.String(), func(t *testing.T) {
				r, err := Replay(tr, mode)
				if err != nil {
					t.Fatal(err)
				}
				if r.WorstExact.N > rule.Limit {
					t.Errorf("exact log admitted %d in one period, limit %d", r.WorstExact.N, rule.Limit)
				}
				if r.Worst.N > 2*rule.Limit {
					t.Errorf("two-bucket window admitted %d in one period, bound %d", r.Worst.N, 2*rule.Limit)
				}
				if mode == CountAll && r.Diverged != r.WrongAdmissions+r.WrongDenials {
					t.Errorf("count all: diverged %d != wrong %d + %d", r.Diverged, r.WrongAdmissions, r.WrongDenials)
				}
				if r.Requests != len(tr.Requests) || len(r.Window) != len(tr.Requests) {
					t.Errorf("Requests = %d, len(Window) = %d, want %d", r.Requests, len(r.Window), len(tr.Requests))
				}
			})
		}
	}
}

// TestBoundaryAttackReachesBound checks the two worst cases derived in
// docs/accuracy.md: the plain burst gets L + ceil(L·Spread/P) into one
// period, the burst with retries exactly 2L; the exact log holds L.
func TestBoundaryAttackReachesBound(t *testing.T) {
	rule := window.Rule{Name: "minute", Limit: 100, Period: time.Minute}
	tests := []struct {
		name  string
		probe float64
		mode  Mode
		worst int64
	}{
		{"burst", 0, CountAdmitted, 101}, // ceil(100 × 0.5 s / 60 s) = 1 extra
		{"burst+retries", 10, CountAdmitted, 200},
		{"burst+retries counted", 10, CountAll, 101}, // retries fill the current bucket
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, err := Boundary{Rule: rule, Spread: 500 * time.Millisecond, Probe: tt.probe, Rounds: 3}.Generate(5)
			if err != nil {
				t.Fatal(err)
			}
			r, err := Replay(tr, tt.mode)
			if err != nil {
				t.Fatal(err)
			}
			if r.Worst.N != tt.worst || r.WorstExact.N != rule.Limit {
				t.Errorf("worst two-bucket, exact = %d, %d, want %d, %d", r.Worst.N, r.WorstExact.N, tt.worst, rule.Limit)
			}
		})
	}
}

func TestModeString(t *testing.T) {
	for m, want := range map[Mode]string{CountAdmitted: "count admitted", CountAll: "count denied too", Mode(9): "Mode(9)"} {
		if got := m.String(); got != want {
			t.Errorf("Mode(%d).String() = %q, want %q", int(m), got, want)
		}
	}
}
