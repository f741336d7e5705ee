package accuracy

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// small is a suite small enough for the race detector in well under a
// second, with the shape of DefaultConfig.
func small() Config {
	c := DefaultConfig()
	c.Rates = []float64{0.5, 1, 2}
	c.Periods = 10
	c.Sources = 50
	c.Tops = []float64{0.5, 1, 4}
	c.SourcePeriods = 3
	c.Rounds = 2
	return c
}

// wellFormed fails t unless data is well-formed XML with an <svg> root.
func wellFormed(t *testing.T, name string, data []byte) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(data))
	root := ""
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: not well-formed XML: %v", name, err)
		}
		if s, ok := tok.(xml.StartElement); ok && root == "" {
			root = s.Name.Local
		}
	}
	if root != "svg" {
		t.Errorf("%s: root element %q, want svg", name, root)
	}
}

func TestRunAndWrite(t *testing.T) {
	c := small()
	rep, err := Run(c)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Poisson) != 3 || len(rep.OnOff) != 3 || len(rep.Many) != 3 {
		t.Fatalf("cases: %d poisson, %d on/off, %d many; want 3 each", len(rep.Poisson), len(rep.OnOff), len(rep.Many))
	}
	for _, cs := range append(append(append([]Case{}, rep.Poisson...), rep.Many...), rep.BoundaryBurst, rep.Retry) {
		for m, r := range cs.Results {
			if r.Mode != Mode(m) || r.Requests == 0 || r.Trace != cs.Name {
				t.Errorf("%s: result %d = mode %v, %d requests, trace %q", cs.Label, m, r.Mode, r.Requests, r.Trace)
			}
		}
	}
	if rep.Poisson[0].Results[0].Window != nil {
		t.Error("per-request decisions kept for a sweep case; only the boundary cases need them")
	}
	if got := rep.Retry.Results[CountAdmitted].Worst.N; got != 2*c.Rule.Limit {
		t.Errorf("boundary attack with retries: worst %d, want %d", got, 2*c.Rule.Limit)
	}

	// The same config gives the same numbers.
	again, err := Run(c)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(rep.markdown(), again.markdown()) {
		t.Error("two runs of one config wrote different reports")
	}

	dir := filepath.Join(t.TempDir(), "docs")
	if err := rep.Write(dir); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "accuracy.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"# Accuracy of the two-bucket window",
		"## Headline numbers",
		"](accuracy-wrong-vs-rate.svg)",
		"](accuracy-boundary.svg)",
		"**Against the 0.003 % target.**",
		"so never more than **2L = 200**",
		"| burst + retries | count admitted |",
	} {
		if !strings.Contains(string(md), want) {
			t.Errorf("accuracy.md lacks %q", want)
		}
	}
	for _, name := range []string{"accuracy-wrong-vs-rate.svg", "accuracy-boundary.svg"} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		wellFormed(t, name, data)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(*Config)
		field string
	}{
		{"no rates", func(c *Config) { c.Rates = nil }, "Rates"},
		{"no tops", func(c *Config) { c.Tops = nil }, "Tops"},
		{"no probe", func(c *Config) { c.Probe = 0 }, "Probe"},
		{"bad rate", func(c *Config) { c.Rates = []float64{-1} }, "Rate"},
		{"bad spread", func(c *Config) { c.Spread = 0 }, "Spread"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := small()
			tt.edit(&c)
			_, err := Run(c)
			if !errors.Is(err, ErrParam) || !strings.Contains(err.Error(), tt.field) {
				t.Errorf("Run() error = %v, want ErrParam naming %s", err, tt.field)
			}
		})
	}
}

func TestPlotSVG(t *testing.T) {
	p := plot{
		Title: "a <title> & more", XLabel: "x", YLabel: "y",
		XMax: 10, YMax: 5,
		Series: []series{
			{Name: "line", Color: blue, Points: []point{{0, 0}, {5, 5}, {10, 1}}},
			{Name: "steps", Color: red, Dashed: true, Step: true, Points: []point{{0, 1}, {4, 2}}},
		},
		Lines: []refLine{{At: 2, Label: "limit"}, {At: 3, Label: "edge", Vertical: true}},
	}
	svg := p.SVG()
	wellFormed(t, "plot", svg)
	for _, want := range []string{
		"a &lt;title&gt; &amp; more", // escaped
		// x = 70 + v/10 × 630, y = 365 - v/5 × 325
		`d="M70.0 365.0L385.0 40.0L700.0 300.0"`, // line through the data
		"H322.0V235.0",                           // a step: across, then up
		">limit<", ">edge<", ">line<", ">steps<",
	} {
		if !bytes.Contains(svg, []byte(want)) {
			t.Errorf("SVG lacks %q", want)
		}
	}
}

func TestTicks(t *testing.T) {
	tests := []struct {
		lo, hi float64
		n      int
		want   []float64
	}{
		{0, 4, 8, []float64{0, 0.5, 1, 1.5, 2, 2.5, 3, 3.5, 4}},
		{0, 55, 6, []float64{0, 10, 20, 30, 40, 50}},
		{-15, 135, 8, []float64{-0, 20, 40, 60, 80, 100, 120}},
	}
	for _, tt := range tests {
		got := ticks(tt.lo, tt.hi, tt.n)
		if len(got) != len(tt.want) {
			t.Errorf("ticks(%g, %g) = %v, want %v", tt.lo, tt.hi, got, tt.want)
			continue
		}
		for i := range got {
			if got[i] != tt.want[i] {
				t.Errorf("ticks(%g, %g) = %v, want %v", tt.lo, tt.hi, got, tt.want)
				break
			}
		}
	}
	if got := label(math.Copysign(0, -1)); got != "0" {
		t.Errorf("label(-0) = %q", got)
	}
	if got := label(2.5); got != "2.5" {
		t.Errorf("label(2.5) = %q", got)
	}
}
