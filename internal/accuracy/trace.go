package accuracy

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/slidegate/slidegate/window"
)

// Errors returned by the generators, Replay and WorstWindow, wrapped with
// the offending field and value.
var (
	ErrParam    = errors.New("invalid parameter")
	ErrUnsorted = errors.New("requests are not in time order")
	ErrSource   = errors.New("source out of range")
)

// MaxSources bounds the number of distinct sources of one trace, so that a
// bad Source value cannot make Replay allocate without limit.
const MaxSources = 1 << 22

// Request is one request of a trace: when it arrived and which source
// (client identity) sent it. Every request costs 1.
type Request struct {
	At     time.Time
	Source int // in [0, MaxSources)
}

// Trace is a named list of requests in time order, to be judged against
// one rule. Traces start at Origin(Rule.Period), a bucket boundary.
type Trace struct {
	Name     string
	Rule     window.Rule
	Requests []Request
}

// Generator builds a trace deterministically: the same generator and seed
// always give the same trace.
type Generator interface {
	Generate(seed uint64) (Trace, error)
}

// origin is an arbitrary instant (2025-06-15 UTC) that the traces start
// from, rounded up to a bucket boundary.
var origin = time.Unix(1_750_000_000, 0)

// Origin returns the instant every generated trace starts at: the first
// boundary of a bucket of length period at or after 2025-06-15 15:06:40 UTC.
func Origin(period time.Duration) time.Time {
	i := window.Index(origin, period)
	if s := window.Start(i, period); s.Equal(origin) {
		return s
	}
	return window.Start(i+1, period)
}

// rng returns the random source of one stream of a trace. Streams (the
// sources of ManySources, the rounds of Boundary) get their own generator
// so that changing how many there are leaves the others unchanged.
func rng(seed, stream uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, stream))
}

// poisson appends to reqs the arrivals of a Poisson process of the given
// rate (requests per nanosecond) from source src in [from, to).
func poisson(reqs []Request, r *rand.Rand, src int, rate float64, from, to time.Time) []Request {
	if rate <= 0 {
		return reqs
	}
	span := float64(to.Sub(from))
	for t := r.ExpFloat64() / rate; t < span; t += r.ExpFloat64() / rate {
		reqs = append(reqs, Request{At: from.Add(time.Duration(t)), Source: src})
	}
	return reqs
}

// perNano converts a rate given as a multiple of the rule's limit per
// period into requests per nanosecond.
func perNano(rule window.Rule, rate float64) float64 {
	return rate * float64(rule.Limit) / float64(rule.Period)
}

// sortRequests orders requests by time, then by source, so that merged
// streams are reproducible.
func sortRequests(reqs []Request) {
	slices.SortFunc(reqs, func(a, b Request) int {
		if c := a.At.Compare(b.At); c != 0 {
			return c
		}
		return cmp.Compare(a.Source, b.Source)
	})
}

func paramErr(gen, field string, value any) error {
	return fmt.Errorf("accuracy: %s: %s: %w, got %v", gen, field, ErrParam, value)
}

func checkCommon(gen string, rule window.Rule, periods int) error {
	if err := rule.Validate(); err != nil {
		return fmt.Errorf("accuracy: %s: %w", gen, err)
	}
	if periods <= 0 || periods > 1_000_000 {
		return paramErr(gen, "Periods", periods)
	}
	return nil
}

func positive(x float64) bool { return x > 0 && !math.IsInf(x, 1) }

// Poisson is one source sending a Poisson stream of Rate × Limit requests
// per Period for Periods periods.
type Poisson struct {
	Rule    window.Rule
	Rate    float64 // offered rate as a multiple of the limit; > 0
	Periods int     // trace length in periods; > 0
}

// Generate implements Generator.
func (p Poisson) Generate(seed uint64) (Trace, error) {
	if err := checkCommon("poisson", p.Rule, p.Periods); err != nil {
		return Trace{}, err
	}
	if !positive(p.Rate) {
		return Trace{}, paramErr("poisson", "Rate", p.Rate)
	}
	from := Origin(p.Rule.Period)
	to := from.Add(time.Duration(p.Periods) * p.Rule.Period)
	reqs := poisson(nil, rng(seed, 0), 0, perNano(p.Rule, p.Rate), from, to)
	return Trace{Name: fmt.Sprintf("poisson %.2gx", p.Rate), Rule: p.Rule, Requests: reqs}, nil
}

// OnOff is one source that alternates between bursts and silence: on
// phases (exponentially distributed, mean On) carry a Poisson stream of
// Rate × Limit per Period, off phases (mean Off) carry nothing. The mean
// offered rate is Rate × On / (On + Off) times the limit.
type OnOff struct {
	Rule    window.Rule
	Rate    float64       // rate during bursts as a multiple of the limit; > 0
	On, Off time.Duration // mean phase lengths; > 0
	Periods int           // trace length in periods; > 0
}

// Mean returns the mean offered rate as a multiple of the limit.
func (o OnOff) Mean() float64 {
	return o.Rate * float64(o.On) / float64(o.On+o.Off)
}

// Generate implements Generator.
func (o OnOff) Generate(seed uint64) (Trace, error) {
	if err := checkCommon("onoff", o.Rule, o.Periods); err != nil {
		return Trace{}, err
	}
	switch {
	case !positive(o.Rate):
		return Trace{}, paramErr("onoff", "Rate", o.Rate)
	case o.On <= 0:
		return Trace{}, paramErr("onoff", "On", o.On)
	case o.Off <= 0:
		return Trace{}, paramErr("onoff", "Off", o.Off)
	}
	r := rng(seed, 0)
	from := Origin(o.Rule.Period)
	end := from.Add(time.Duration(o.Periods) * o.Rule.Period)
	rate := perNano(o.Rule, o.Rate)
	var reqs []Request
	// Start in a random phase so that bursts do not line up with buckets.
	on := r.Float64() < float64(o.On)/float64(o.On+o.Off)
	for t := from; t.Before(end); on = !on {
		mean := o.Off
		if on {
			mean = o.On
		}
		next := t.Add(time.Duration(r.ExpFloat64() * float64(mean)))
		if next.After(end) {
			next = end
		}
		if on {
			reqs = poisson(reqs, r, 0, rate, t, next)
		}
		t = next
	}
	return Trace{Name: fmt.Sprintf("on/off %.2gx", o.Mean()), Rule: o.Rule, Requests: reqs}, nil
}

// ManySources is many independent Poisson sources with heavy-tailed (Zipf)
// rates, merged into one trace the way Cloudflare evaluated its window: the
// source of rank k (1-based) offers Top × k^-Exponent times the limit, and
// the errors of all sources are summed.
type ManySources struct {
	Rule     window.Rule
	Sources  int     // number of sources; > 0
	Top      float64 // rate of the heaviest source as a multiple of the limit; > 0
	Exponent float64 // Zipf exponent; > 0
	Periods  int     // trace length in periods; > 0
}

// Rate returns the offered rate of the source of 0-based index i as a
// multiple of the limit.
func (m ManySources) Rate(i int) float64 {
	return m.Top * math.Pow(float64(i+1), -m.Exponent)
}

// Generate implements Generator.
func (m ManySources) Generate(seed uint64) (Trace, error) {
	if err := checkCommon("many sources", m.Rule, m.Periods); err != nil {
		return Trace{}, err
	}
	switch {
	case m.Sources <= 0 || m.Sources > MaxSources:
		return Trace{}, paramErr("many sources", "Sources", m.Sources)
	case !positive(m.Top):
		return Trace{}, paramErr("many sources", "Top", m.Top)
	case !positive(m.Exponent):
		return Trace{}, paramErr("many sources", "Exponent", m.Exponent)
	}
	from := Origin(m.Rule.Period)
	to := from.Add(time.Duration(m.Periods) * m.Rule.Period)
	var reqs []Request
	for i := range m.Sources {
		reqs = poisson(reqs, rng(seed, uint64(i)), i, perNano(m.Rule, m.Rate(i)), from, to)
	}
	sortRequests(reqs)
	name := fmt.Sprintf("many sources (%d, Zipf %.2g, top %.2gx)", m.Sources, m.Exponent, m.Top)
	return Trace{Name: name, Rule: m.Rule, Requests: reqs}, nil
}

// Boundary is the boundary attack, repeated for Rounds rounds: one source
// sends Limit requests spread over the last Spread before a bucket boundary
// and Limit more over the first Spread after it. With Probe > 0 it then
// keeps retrying (a Poisson stream of Probe × Limit per Period) until two
// periods after the boundary, taking every unit the limiter frees.
//
// Each round takes four periods; the last one is silent, so every round
// starts from empty counters.
type Boundary struct {
	Rule   window.Rule
	Spread time.Duration // length of each burst; in (0, Period]
	Probe  float64       // retry rate after the bursts as a multiple of the limit; >= 0
	Rounds int           // > 0
}

// Generate implements Generator.
func (b Boundary) Generate(seed uint64) (Trace, error) {
	if err := checkCommon("boundary", b.Rule, 1); err != nil {
		return Trace{}, err
	}
	switch {
	case b.Rounds <= 0 || b.Rounds > 100_000:
		return Trace{}, paramErr("boundary", "Rounds", b.Rounds)
	case b.Rule.Limit > 1_000_000:
		return Trace{}, paramErr("boundary", "Rule.Limit", b.Rule.Limit)
	case b.Spread <= 0 || b.Spread > b.Rule.Period:
		return Trace{}, paramErr("boundary", "Spread", b.Spread)
	case b.Probe < 0 || math.IsInf(b.Probe, 1) || math.IsNaN(b.Probe):
		return Trace{}, paramErr("boundary", "Probe", b.Probe)
	}
	p := b.Rule.Period
	var reqs []Request
	for k := range b.Rounds {
		r := rng(seed, uint64(k))
		edge := Origin(p).Add(time.Duration(4*k+1) * p)
		start := len(reqs)
		for i := range 2 * b.Rule.Limit {
			at := edge.Add(time.Duration(r.Int64N(int64(b.Spread))))
			if i < b.Rule.Limit {
				at = at.Add(-b.Spread)
			}
			reqs = append(reqs, Request{At: at})
		}
		sortRequests(reqs[start:])
		reqs = poisson(reqs, r, 0, perNano(b.Rule, b.Probe), edge.Add(b.Spread), edge.Add(2*p))
	}
	name := "boundary burst"
	if b.Probe > 0 {
		name = "boundary burst + retries"
	}
	return Trace{Name: name, Rule: b.Rule, Requests: reqs}, nil
}
