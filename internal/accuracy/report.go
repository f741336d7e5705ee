package accuracy

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/slidegate/slidegate/window"
)

// Config sizes the suite of traces that Run replays. The zero Config is
// invalid; start from DefaultConfig.
type Config struct {
	Seed uint64      // seed of every generator
	Rule window.Rule // the rule every trace is judged against

	// Rates are the offered rates (multiples of the limit) of the Poisson
	// and on/off sweeps; for on/off, the mean rate.
	Rates   []float64
	Periods int // length of each Poisson and on/off trace, in periods

	// On and Off are the mean phase lengths of the on/off traces; the rate
	// during bursts is Rate × (On + Off) / On.
	On, Off time.Duration

	Sources       int       // number of sources of the many-sources traces
	Exponent      float64   // their Zipf exponent
	Tops          []float64 // the heaviest source's rate (× limit), one trace each
	SourcePeriods int       // length of the many-sources traces, in periods

	Rounds int           // rounds of the boundary attack
	Spread time.Duration // length of each of its two bursts
	Probe  float64       // its retry rate (× limit) after the bursts
}

// DefaultConfig returns the suite behind docs/accuracy.md: a rule of 100
// requests per minute, sized so that `make accuracy` takes seconds.
func DefaultConfig() Config {
	return Config{
		Seed:          20170607, // the day Cloudflare published its evaluation
		Rule:          window.Rule{Name: "minute", Limit: 100, Period: time.Minute},
		Rates:         []float64{0.25, 0.5, 0.6, 0.7, 0.8, 0.9, 1, 1.1, 1.25, 1.5, 2, 3, 4},
		Periods:       500,
		On:            15 * time.Second,
		Off:           45 * time.Second,
		Sources:       20_000,
		Exponent:      1,
		Tops:          []float64{0.5, 0.75, 1, 2, 4, 16},
		SourcePeriods: 60,
		Rounds:        20,
		Spread:        500 * time.Millisecond,
		Probe:         10,
	}
}

// Validate reports whether c describes a suite Run can replay. The
// generators check the rest (positive rates, lengths).
func (c Config) Validate() error {
	switch {
	case len(c.Rates) == 0:
		return fmt.Errorf("accuracy: config: Rates: %w, got none", ErrParam)
	case len(c.Tops) == 0:
		return fmt.Errorf("accuracy: config: Tops: %w, got none", ErrParam)
	case c.Probe <= 0:
		return fmt.Errorf("accuracy: config: Probe: %w, got %v", ErrParam, c.Probe)
	}
	return nil
}

// Case is one trace replayed in both modes.
type Case struct {
	Name    string    // the trace's name
	Label   string    // the case's name in its table ("0.5x", "burst")
	Offered float64   // nominal offered rate (× limit): the Poisson or mean on/off rate, the heaviest source's rate
	Results [2]Result // indexed by Mode

	// Predicted is, per mode, the wrong-decision share expected if every
	// source of the trace erred like a lone Poisson source of its rate
	// (interpolated from the Poisson sweep). Many-sources cases only.
	Predicted [2]float64
	// Marginal is the share of requests sent by sources offering between
	// 0.7 and 1.5 times the limit. Many-sources cases only.
	Marginal float64

	trace Trace // kept for plotting (boundary cases only)
}

// Report is the outcome of Run.
type Report struct {
	Config               Config
	Poisson, OnOff, Many []Case        // one case per Config.Rates, Config.Rates, Config.Tops
	BoundaryBurst, Retry Case          // the boundary attack without and with retries
	Elapsed              time.Duration // wall time of Run; not written into the report, which depends on Config only
}

// job is one trace to generate and replay.
type job struct {
	gen     Generator
	label   string
	offered float64
	keep    bool // keep the trace and per-request decisions
	out     *Case
}

func (j job) run(seed uint64) error {
	tr, err := j.gen.Generate(seed)
	if err != nil {
		return err
	}
	j.out.Name, j.out.Label, j.out.Offered = tr.Name, j.label, j.offered
	for _, m := range []Mode{CountAdmitted, CountAll} {
		r, err := Replay(tr, m)
		if err != nil {
			return err
		}
		if !j.keep {
			r.Window, r.Exact = nil, nil
		}
		j.out.Results[m] = r
	}
	if m, ok := j.gen.(ManySources); ok {
		j.out.Marginal = marginal(m, tr)
	}
	if j.keep {
		j.out.trace = tr
	}
	return nil
}

// marginal returns the share of tr's requests sent by sources of m whose
// rate lies in [0.7, 1.5] times the limit.
func marginal(m ManySources, tr Trace) float64 {
	n := 0
	for _, q := range tr.Requests {
		if r := m.Rate(q.Source); r >= 0.7 && r <= 1.5 {
			n++
		}
	}
	return share(n, len(tr.Requests))
}

// Run generates every trace of c and replays it in both modes, using all
// CPUs. The result depends only on c.
func Run(c Config) (*Report, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	start := time.Now()
	rep := &Report{
		Config:  c,
		Poisson: make([]Case, len(c.Rates)),
		OnOff:   make([]Case, len(c.Rates)),
		Many:    make([]Case, len(c.Tops)),
	}
	var jobs []job
	for i, r := range c.Rates {
		label := fmt.Sprintf("%gx", r)
		jobs = append(jobs,
			job{gen: Poisson{Rule: c.Rule, Rate: r, Periods: c.Periods}, label: label, offered: r, out: &rep.Poisson[i]},
			job{gen: OnOff{Rule: c.Rule, Rate: r * float64(c.On+c.Off) / float64(c.On), On: c.On, Off: c.Off, Periods: c.Periods}, label: label, offered: r, out: &rep.OnOff[i]})
	}
	for i, top := range c.Tops {
		jobs = append(jobs, job{gen: ManySources{Rule: c.Rule, Sources: c.Sources, Top: top, Exponent: c.Exponent, Periods: c.SourcePeriods}, label: fmt.Sprintf("top %gx", top), offered: top, out: &rep.Many[i]})
	}
	jobs = append(jobs,
		job{gen: Boundary{Rule: c.Rule, Spread: c.Spread, Rounds: c.Rounds}, label: "burst", keep: true, out: &rep.BoundaryBurst},
		job{gen: Boundary{Rule: c.Rule, Spread: c.Spread, Probe: c.Probe, Rounds: c.Rounds}, label: "burst + retries", keep: true, out: &rep.Retry})

	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		next = make(chan job)
	)
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for j := range next {
				mu.Lock()
				failed := len(errs) > 0
				mu.Unlock()
				if failed {
					continue // drain: the report is lost anyway
				}
				if err := j.run(c.Seed); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	for _, j := range jobs {
		next <- j
	}
	close(next)
	wg.Wait()
	if len(errs) > 0 {
		return nil, errs[0]
	}
	for i := range rep.Many {
		for _, m := range []Mode{CountAdmitted, CountAll} {
			rep.Many[i].Predicted[m] = predict(rep.Poisson, m, ManySources{Sources: c.Sources, Top: c.Tops[i], Exponent: c.Exponent})
		}
	}
	rep.Elapsed = time.Since(start)
	return rep, nil
}

// curve returns the wrong-decision share of a lone Poisson source at rate
// r, interpolated linearly between the measured rates and held constant
// beyond them.
func curve(sweep []Case, m Mode, r float64) float64 {
	if r <= sweep[0].Offered {
		return sweep[0].Results[m].WrongShare()
	}
	for i := 1; i < len(sweep); i++ {
		a, b := sweep[i-1], sweep[i]
		if r <= b.Offered {
			f := (r - a.Offered) / (b.Offered - a.Offered)
			return (1-f)*a.Results[m].WrongShare() + f*b.Results[m].WrongShare()
		}
	}
	return sweep[len(sweep)-1].Results[m].WrongShare()
}

// predict returns the wrong share of a many-sources trace expected from
// the lone-source curve: each source's expected requests weighted by the
// curve at its rate.
func predict(sweep []Case, m Mode, ms ManySources) float64 {
	var wrong, total float64
	for i := range ms.Sources {
		rate := ms.Rate(i)
		wrong += rate * curve(sweep, m, rate)
		total += rate
	}
	if total == 0 {
		return 0
	}
	return wrong / total
}

// Write writes accuracy.md and its SVG plots into dir, creating dir if
// needed.
func (rep *Report) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("accuracy: write report: %w", err)
	}
	files := map[string][]byte{
		"accuracy.md":                rep.markdown(),
		"accuracy-wrong-vs-rate.svg": rep.rateplot().SVG(),
		"accuracy-boundary.svg":      rep.boundaryplot().SVG(),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return fmt.Errorf("accuracy: write report: %w", err)
		}
	}
	return nil
}

// QuickConfig returns c with every trace cut to a few percent of its
// length, for tests of the report pipeline: the shape of the report stays,
// the numbers become noisy.
func QuickConfig(c Config) Config {
	c.Periods = max(c.Periods/50, 1)
	c.Sources = max(c.Sources/100, 1)
	c.SourcePeriods = max(c.SourcePeriods/30, 1)
	c.Rounds = 1
	return c
}
