package accuracy

import (
	"fmt"
	"time"

	"github.com/slidegate/slidegate/window"
)

// Mode says which requests the limiters count.
type Mode int

// The counting modes of limiter.Options.CountDenied.
const (
	// CountAdmitted counts only admitted requests (slidegate's default): a
	// denied request costs the client nothing.
	CountAdmitted Mode = iota
	// CountAll counts denied requests too: a client that keeps knocking
	// stays blocked.
	CountAll
)

// String returns the mode's name as used in the report.
func (m Mode) String() string {
	switch m {
	case CountAdmitted:
		return "count admitted"
	case CountAll:
		return "count denied too"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Worst is the densest window of one period found in a set of admitted
// requests.
type Worst struct {
	N      int64     // admitted requests in [Start, Start + Period)
	Source int       // the source they came from
	Start  time.Time // the window's start (the first of the N requests)
}

// Result is what Replay measured for one trace in one mode.
//
// Wrong decisions follow the package's definition: the two-bucket window's
// decision is compared with the decision of an exact sliding log fed the
// same counted history (the requests the window itself counted). Diverged
// uses the other definition, two limiters each running on its own
// decisions; in CountAll mode the two definitions coincide, because what is
// counted then does not depend on any decision.
type Result struct {
	Trace    string
	Mode     Mode
	Rule     window.Rule
	Requests int
	Sources  int // number of source slots (largest Source + 1)

	WrongAdmissions int // admitted by the window, denied by the exact log on the same history
	WrongDenials    int // denied by the window, admitted by the exact log on the same history

	// AbsError is the sum over requests of |estimate - true count|, both
	// taken just before the request on the same counted history; TrueCount
	// is the sum of the true counts.
	AbsError, TrueCount float64

	Diverged      int // requests the two independent runs decided differently
	Admitted      int // admitted by the two-bucket window
	AdmittedExact int // admitted by the independent exact run

	Worst      Worst // densest window of the two-bucket window's admissions
	WorstExact Worst // densest window of the independent exact run's admissions

	// Window and Exact hold, per request of the trace, whether the
	// two-bucket window and the independent exact run admitted it.
	Window, Exact []bool
}

func share(n, of int) float64 {
	if of == 0 {
		return 0
	}
	return float64(n) / float64(of)
}

// WrongAdmissionShare returns WrongAdmissions / Requests.
func (r Result) WrongAdmissionShare() float64 { return share(r.WrongAdmissions, r.Requests) }

// WrongDenialShare returns WrongDenials / Requests.
func (r Result) WrongDenialShare() float64 { return share(r.WrongDenials, r.Requests) }

// WrongShare returns (WrongAdmissions + WrongDenials) / Requests.
func (r Result) WrongShare() float64 { return share(r.WrongAdmissions+r.WrongDenials, r.Requests) }

// DivergedShare returns Diverged / Requests.
func (r Result) DivergedShare() float64 { return share(r.Diverged, r.Requests) }

// MeanAbsError returns the mean absolute difference between the estimated
// and the true count of the window, in requests.
func (r Result) MeanAbsError() float64 {
	if r.Requests == 0 {
		return 0
	}
	return r.AbsError / float64(r.Requests)
}

// RelativeError returns AbsError / TrueCount: the mean absolute difference
// between estimated and true rate relative to the mean true rate.
func (r Result) RelativeError() float64 {
	if r.TrueCount == 0 {
		return 0
	}
	return r.AbsError / r.TrueCount
}

// buckets are one source's counters as a store keeps them: counts of the
// epoch-aligned bucket idx and of the one before it; anything older has
// expired.
type buckets struct {
	idx, prev, cur int64
}

// roll moves the counters to bucket i.
func (b *buckets) roll(i int64) {
	switch {
	case i == b.idx:
	case i == b.idx+1:
		b.idx, b.prev, b.cur = i, b.cur, 0
	default: // a gap of more than one bucket (or the first request)
		b.idx, b.prev, b.cur = i, 0, 0
	}
}

// source is everything Replay keeps per source.
type source struct {
	seen          bool
	b             buckets
	shadow        SlidingLog  // the window's counted history, exactly
	exact         SlidingLog  // the independent exact run's counted history
	admitted      []time.Time // the window's admissions
	admittedExact []time.Time // the independent exact run's admissions
}

// Replay runs tr through the two-bucket window and the exact sliding log,
// with tr.Rule for both, counting as mode says, and measures the
// differences. Every request costs 1. The requests must be in time order
// and their sources in [0, MaxSources).
func Replay(tr Trace, mode Mode) (Result, error) {
	rule := tr.Rule
	if err := rule.Validate(); err != nil {
		return Result{}, fmt.Errorf("accuracy: replay %q: %w", tr.Name, err)
	}
	if mode != CountAdmitted && mode != CountAll {
		return Result{}, fmt.Errorf("accuracy: replay %q: mode: %w, got %d", tr.Name, ErrParam, int(mode))
	}
	n := 0
	for i, q := range tr.Requests {
		if q.Source < 0 || q.Source >= MaxSources {
			return Result{}, fmt.Errorf("accuracy: replay %q: requests[%d].Source: %w, got %d", tr.Name, i, ErrSource, q.Source)
		}
		if i > 0 && q.At.Before(tr.Requests[i-1].At) {
			return Result{}, fmt.Errorf("accuracy: replay %q: requests[%d].At: %w", tr.Name, i, ErrUnsorted)
		}
		n = max(n, q.Source+1)
	}
	res := Result{
		Trace: tr.Name, Mode: mode, Rule: rule, Requests: len(tr.Requests), Sources: n,
		Window: make([]bool, len(tr.Requests)), Exact: make([]bool, len(tr.Requests)),
	}
	srcs := make([]source, n)
	for i, q := range tr.Requests {
		s := &srcs[q.Source]
		if !s.seen {
			s.seen = true
			s.shadow.Rule, s.exact.Rule = rule, rule
		}
		s.b.roll(window.Index(q.At, rule.Period))
		est := rule.Estimate(q.At, s.b.prev, s.b.cur)
		ok := rule.Decide(q.At, s.b.prev, s.b.cur, 1).Allowed
		truth := s.shadow.Count(q.At)
		switch want := truth < rule.Limit; {
		case ok && !want:
			res.WrongAdmissions++
		case !ok && want:
			res.WrongDenials++
		}
		res.AbsError += float64(abs(est - truth))
		res.TrueCount += float64(truth)
		if ok || mode == CountAll {
			s.b.cur++
			s.shadow.Record(q.At)
		}
		if ok {
			res.Admitted++
			s.admitted = append(s.admitted, q.At)
		}
		res.Window[i] = ok

		okExact := s.exact.Allow(q.At)
		if okExact || mode == CountAll {
			s.exact.Record(q.At)
		}
		if okExact {
			res.AdmittedExact++
			s.admittedExact = append(s.admittedExact, q.At)
		}
		res.Exact[i] = okExact
		if ok != okExact {
			res.Diverged++
		}
	}
	for id := range srcs {
		if err := worst(&res.Worst, id, srcs[id].admitted, rule.Period); err != nil {
			return Result{}, err
		}
		if err := worst(&res.WorstExact, id, srcs[id].admittedExact, rule.Period); err != nil {
			return Result{}, err
		}
	}
	return res, nil
}

// worst raises w to the densest window of times if that one is denser.
func worst(w *Worst, id int, times []time.Time, period time.Duration) error {
	n, start, err := WorstWindow(times, period)
	if err != nil {
		return err
	}
	if n > w.N {
		*w = Worst{N: n, Source: id, Start: start}
	}
	return nil
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}
