package accuracy

import (
	"math"
	"time"
)

// Colours of the plotted limiters and traces.
const (
	blue   = "#1f77b4"
	orange = "#ff7f0e"
	green  = "#2ca02c"
	red    = "#d62728"
	purple = "#9467bd"
	olive  = "#8c9a2a"
)

// rateplot is the wrong-decision share against the offered rate, for the
// Poisson and on/off sweeps in both modes.
func (rep *Report) rateplot() plot {
	p := plot{
		Title:  "Wrong decisions of the two-bucket window vs an exact sliding log",
		XLabel: "offered rate (multiple of the limit; on/off: mean rate)",
		YLabel: "wrong decisions (% of all requests)",
	}
	add := func(name, color string, dashed bool, cs []Case, m Mode) {
		s := series{Name: name, Color: color, Dashed: dashed}
		for _, c := range cs {
			y := 100 * c.Results[m].WrongShare()
			s.Points = append(s.Points, point{c.Offered, y})
			p.XMax = max(p.XMax, c.Offered)
			p.YMax = max(p.YMax, y)
		}
		p.Series = append(p.Series, s)
	}
	add("Poisson, count admitted", blue, false, rep.Poisson, CountAdmitted)
	add("Poisson, count denied too", blue, true, rep.Poisson, CountAll)
	add("on/off bursts, count admitted", orange, false, rep.OnOff, CountAdmitted)
	add("on/off bursts, count denied too", orange, true, rep.OnOff, CountAll)
	p.YMax = math.Max(1, math.Ceil(1.35*p.YMax/5)*5) // headroom for the legend
	p.Lines = []refLine{{At: 1, Label: "limit", Vertical: true}}
	return p
}

// boundaryplot is the number of admitted requests in the trailing period
// over the first round of the boundary attack with retries.
func (rep *Report) boundaryplot() plot {
	c := rep.Retry
	rule := c.trace.Rule
	per := rule.Period
	edge := Origin(per).Add(per)
	from, to := edge.Add(-per/4), edge.Add(2*per+per/4)
	sec := func(t time.Time) float64 { return t.Sub(edge).Seconds() }
	p := plot{
		Title:  "Boundary attack with retries: admitted requests in the trailing " + per.String(),
		XLabel: "seconds since the bucket boundary",
		YLabel: "admitted requests in (t - period, t]",
		XMin:   sec(from), XMax: sec(to),
		YMax: float64(2*rule.Limit) * 1.4, // headroom for the legend
		Lines: []refLine{
			{At: float64(rule.Limit), Label: "limit"},
			{At: float64(2 * rule.Limit), Label: "2 × limit"},
			{At: 0, Label: "boundary", Vertical: true},
			{At: sec(edge.Add(per)), Label: "boundary", Vertical: true},
			{At: sec(edge.Add(2 * per)), Label: "retries stop", Vertical: true},
		},
	}
	add := func(name, color string, dashed bool, admitted []bool) {
		var times []time.Time
		for i, q := range c.trace.Requests {
			if admitted[i] && !q.At.Before(from.Add(-per)) && q.At.Before(to) {
				times = append(times, q.At)
			}
		}
		s := series{Name: name, Color: color, Dashed: dashed, Step: true}
		for _, pt := range sliding(times, per, from, to) {
			s.Points = append(s.Points, point{sec(pt.at), float64(pt.n)})
		}
		p.Series = append(p.Series, s)
	}
	add("two-bucket, count admitted", red, false, c.Results[CountAdmitted].Window)
	add("two-bucket, count denied too", purple, true, c.Results[CountAll].Window)
	add("exact sliding log, count admitted", green, false, c.Results[CountAdmitted].Exact)
	add("exact sliding log, count denied too", olive, true, c.Results[CountAll].Exact)
	return p
}

// step is the value n of a step function from instant at on.
type step struct {
	at time.Time
	n  int
}

// sliding returns, as a step function over [from, to], the number of the
// sorted instants in (t - period, t]: each instant counts from itself
// until just before itself + period.
func sliding(times []time.Time, period time.Duration, from, to time.Time) []step {
	var (
		out     []step
		n       int
		in, ex  int // next instant to enter, next to leave
		started bool
	)
	for {
		t, more := to, false
		switch {
		case in < len(times) && !times[in].After(times[ex].Add(period)):
			t, more = times[in], true
		case ex < in:
			t, more = times[ex].Add(period), true
		}
		if t.After(to) {
			t, more = to, false
		}
		if !started && !t.Before(from) {
			if t.After(from) {
				out = append(out, step{from, n}) // the value held since before from
			}
			started = true
		}
		if !more {
			if len(out) == 0 || !out[len(out)-1].at.Equal(to) {
				out = append(out, step{to, n})
			}
			return out
		}
		for in < len(times) && times[in].Equal(t) {
			in, n = in+1, n+1
		}
		for ex < in && times[ex].Add(period).Equal(t) {
			ex, n = ex+1, n-1
		}
		if started {
			out = append(out, step{t, n})
		}
	}
}
