package accuracy

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate/window"
)

var minute = window.Rule{Name: "minute", Limit: 100, Period: time.Minute}

func TestOrigin(t *testing.T) {
	for _, p := range []time.Duration{time.Second, 7 * time.Second, time.Minute, time.Hour, 24 * time.Hour} {
		o := Origin(p)
		if !window.Start(window.Index(o, p), p).Equal(o) {
			t.Errorf("Origin(%s) = %v is not a bucket boundary", p, o)
		}
		if o.Before(origin) || o.Sub(origin) >= p {
			t.Errorf("Origin(%s) = %v, want the first boundary at or after %v", p, o, origin)
		}
	}
}

// generators returns one small instance of every generator.
func generators() []Generator {
	return []Generator{
		Poisson{Rule: minute, Rate: 1.5, Periods: 30},
		OnOff{Rule: minute, Rate: 4, On: 10 * time.Second, Off: 30 * time.Second, Periods: 30},
		ManySources{Rule: minute, Sources: 200, Top: 2, Exponent: 1.1, Periods: 10},
		Boundary{Rule: minute, Spread: time.Second, Probe: 3, Rounds: 3},
	}
}

func TestGeneratorsDeterministic(t *testing.T) {
	for _, g := range generators() {
		a, err := g.Generate(11)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(a.Name, func(t *testing.T) {
			b, err := g.Generate(11)
			if err != nil {
				t.Fatal(err)
			}
			if a.Name != b.Name || a.Rule != b.Rule || !slices.Equal(a.Requests, b.Requests) {
				t.Error("same seed, different traces")
			}
			c, err := g.Generate(12)
			if err != nil {
				t.Fatal(err)
			}
			if slices.Equal(a.Requests, c.Requests) {
				t.Error("seeds 11 and 12 give the same trace")
			}
			if len(a.Requests) == 0 {
				t.Fatal("empty trace")
			}
			if !slices.IsSortedFunc(a.Requests, func(x, y Request) int { return x.At.Compare(y.At) }) {
				t.Error("requests not in time order")
			}
			if first := a.Requests[0].At; first.Before(Origin(minute.Period)) {
				t.Errorf("first request at %v, before the origin %v", first, Origin(minute.Period))
			}
		})
	}
}

// TestPoissonRate checks the mean rate of the generated streams: 1.5 ×
// 100 per minute over 200 minutes is 30,000 requests (σ ≈ 173), and the
// on/off source is on a quarter of the time at 4× the limit.
func TestPoissonRate(t *testing.T) {
	tests := []struct {
		g    Generator
		want float64
		tol  float64
	}{
		{Poisson{Rule: minute, Rate: 1.5, Periods: 200}, 30_000, 0.02},
		{OnOff{Rule: minute, Rate: 4, On: 15 * time.Second, Off: 45 * time.Second, Periods: 400}, 40_000, 0.1},
	}
	for _, tt := range tests {
		tr, err := tt.g.Generate(3)
		if err != nil {
			t.Fatal(err)
		}
		if got := float64(len(tr.Requests)); math.Abs(got-tt.want) > tt.tol*tt.want {
			t.Errorf("%s: %g requests, want %g ± %g %%", tr.Name, got, tt.want, 100*tt.tol)
		}
	}
	if got, want := (OnOff{Rate: 4, On: 15 * time.Second, Off: 45 * time.Second}).Mean(), 1.0; got != want {
		t.Errorf("OnOff.Mean() = %g, want %g", got, want)
	}
}

// TestManySourcesZipf checks that source k offers Top × (k+1)^-Exponent:
// the heaviest sources' counts over 50 periods at 100 per period.
func TestManySourcesZipf(t *testing.T) {
	m := ManySources{Rule: minute, Sources: 20, Top: 4, Exponent: 1, Periods: 50}
	tr, err := m.Generate(9)
	if err != nil {
		t.Fatal(err)
	}
	counts := make([]int, m.Sources)
	for _, q := range tr.Requests {
		counts[q.Source]++
	}
	for k, want := range map[int]float64{0: 20_000, 1: 10_000, 3: 5_000, 9: 2_000} {
		if got := float64(counts[k]); math.Abs(got-want) > 0.05*want {
			t.Errorf("source %d: %g requests, want %g ± 5 %%", k, got, want)
		}
	}
	if got, want := m.Rate(1), 2.0; got != want {
		t.Errorf("Rate(1) = %g, want %g", got, want)
	}
}

// TestBoundaryShape checks the attack: per round, exactly Limit requests
// in the Spread before the boundary and Limit in the Spread after it,
// retries only with Probe > 0 and only until two periods after it.
func TestBoundaryShape(t *testing.T) {
	for _, probe := range []float64{0, 2} {
		b := Boundary{Rule: minute, Spread: 2 * time.Second, Probe: probe, Rounds: 3}
		tr, err := b.Generate(1)
		if err != nil {
			t.Fatal(err)
		}
		for k := range b.Rounds {
			edge := Origin(minute.Period).Add(time.Duration(4*k+1) * minute.Period)
			var before, after, retries, outside int
			for _, q := range tr.Requests {
				switch d := q.At.Sub(edge); {
				case d >= -b.Spread && d < 0:
					before++
				case d >= 0 && d < b.Spread:
					after++
				case d >= b.Spread && d < 2*minute.Period:
					retries++
				case d >= -minute.Period && d < 3*minute.Period:
					outside++
				}
			}
			if before != 100 || after != 100 || outside != 0 {
				t.Errorf("probe %g round %d: %d before, %d after, %d elsewhere; want 100, 100, 0", probe, k, before, after, outside)
			}
			if (retries > 0) != (probe > 0) {
				t.Errorf("probe %g round %d: %d retries", probe, k, retries)
			}
		}
	}
}

func TestGeneratorsRejectBadParameters(t *testing.T) {
	tests := []struct {
		g     Generator
		field string
		want  error
	}{
		{Poisson{Rule: minute, Rate: 0, Periods: 10}, "Rate", ErrParam},
		{Poisson{Rule: minute, Rate: math.Inf(1), Periods: 10}, "Rate", ErrParam},
		{Poisson{Rule: minute, Rate: math.NaN(), Periods: 10}, "Rate", ErrParam},
		{Poisson{Rule: minute, Rate: 1, Periods: 0}, "Periods", ErrParam},
		{Poisson{Rule: window.Rule{Name: "x", Limit: 1}, Rate: 1, Periods: 1}, "period", window.ErrPeriod},
		{OnOff{Rule: minute, Rate: 1, On: 0, Off: time.Second, Periods: 1}, "On", ErrParam},
		{OnOff{Rule: minute, Rate: 1, On: time.Second, Off: -1, Periods: 1}, "Off", ErrParam},
		{ManySources{Rule: minute, Sources: 0, Top: 1, Exponent: 1, Periods: 1}, "Sources", ErrParam},
		{ManySources{Rule: minute, Sources: MaxSources + 1, Top: 1, Exponent: 1, Periods: 1}, "Sources", ErrParam},
		{ManySources{Rule: minute, Sources: 1, Top: 1, Exponent: -1, Periods: 1}, "Exponent", ErrParam},
		{Boundary{Rule: minute, Spread: 0, Rounds: 1}, "Spread", ErrParam},
		{Boundary{Rule: minute, Spread: 2 * time.Minute, Rounds: 1}, "Spread", ErrParam},
		{Boundary{Rule: minute, Spread: time.Second, Probe: -1, Rounds: 1}, "Probe", ErrParam},
		{Boundary{Rule: minute, Spread: time.Second, Rounds: 0}, "Rounds", ErrParam},
	}
	for _, tt := range tests {
		_, err := tt.g.Generate(1)
		if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.field) {
			t.Errorf("%T%+v: error = %v, want %v naming %s", tt.g, tt.g, err, tt.want, tt.field)
		}
	}
}
