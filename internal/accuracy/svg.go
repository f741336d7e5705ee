package accuracy

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"math"
	"strings"
)

// point is one (x, y) pair of a plotted series.
type point struct{ X, Y float64 }

// series is one line of a plot.
type series struct {
	Name   string
	Color  string
	Dashed bool
	Step   bool // hold each y until the next x (a count that changes in jumps)
	Points []point
}

// refLine is a labelled horizontal (or, with Vertical, vertical) reference line.
type refLine struct {
	At       float64
	Label    string
	Vertical bool
}

// plot is a line chart rendered as hand-written SVG.
type plot struct {
	Title, XLabel, YLabel string
	XMin, XMax            float64
	YMin, YMax            float64
	Series                []series
	Lines                 []refLine
}

// Geometry of every plot, in SVG user units.
const (
	plotW, plotH                       = 720.0, 420.0
	padLeft, padRight, padTop, padBott = 70.0, 20.0, 40.0, 55.0
)

func (p plot) x(v float64) float64 {
	return padLeft + (v-p.XMin)/(p.XMax-p.XMin)*(plotW-padLeft-padRight)
}

func (p plot) y(v float64) float64 {
	return plotH - padBott - (v-p.YMin)/(p.YMax-p.YMin)*(plotH-padTop-padBott)
}

// ticks returns round tick values covering [lo, hi], about n of them.
func ticks(lo, hi float64, n int) []float64 {
	step := (hi - lo) / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(step)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= step {
			step = m * mag
			break
		}
	}
	var ts []float64
	for v := math.Ceil(lo/step) * step; v <= hi+step*1e-9; v += step {
		ts = append(ts, math.Round(v/step)*step)
	}
	return ts
}

func label(v float64) string {
	if v == 0 {
		v = 0 // no "-0"
	}
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.4f", v), "0"), ".")
}

func esc(s string) string {
	var b bytes.Buffer
	_ = xml.EscapeText(&b, []byte(s)) // writing to a bytes.Buffer cannot fail
	return b.String()
}

// SVG renders the plot. Points outside the axes' ranges are clipped.
func (p plot) SVG() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%g" height="%g" viewBox="0 0 %g %g" font-family="sans-serif" font-size="12">`+"\n", plotW, plotH, plotW, plotH)
	fmt.Fprintf(&b, `<rect width="%g" height="%g" fill="white"/>`+"\n", plotW, plotH)
	fmt.Fprintf(&b, `<text x="%g" y="22" text-anchor="middle" font-size="15">%s</text>`+"\n", plotW/2, esc(p.Title))
	x0, x1, y0, y1 := p.x(p.XMin), p.x(p.XMax), p.y(p.YMin), p.y(p.YMax)
	fmt.Fprintf(&b, `<defs><clipPath id="area"><rect x="%.1f" y="%.1f" width="%.1f" height="%.1f"/></clipPath></defs>`+"\n", x0, y1, x1-x0, y0-y1)
	for _, t := range ticks(p.XMin, p.XMax, 8) {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e5e5e5"/>`, p.x(t), y0, p.x(t), y1)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", p.x(t), y0+16, label(t))
	}
	for _, t := range ticks(p.YMin, p.YMax, 6) {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e5e5e5"/>`, x0, p.y(t), x1, p.y(t))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", x0-6, p.y(t)+4, label(t))
	}
	fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="black"/>`+"\n", x0, y1, x1-x0, y0-y1)
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", (x0+x1)/2, plotH-12, esc(p.XLabel))
	fmt.Fprintf(&b, `<text transform="translate(18 %.1f) rotate(-90)" text-anchor="middle">%s</text>`+"\n", (y0+y1)/2, esc(p.YLabel))
	for _, l := range p.Lines {
		if l.Vertical {
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#888" stroke-dasharray="2 4"/>`, p.x(l.At), y0, p.x(l.At), y1)
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" fill="#666" font-size="10">%s</text>`+"\n", p.x(l.At)+3, y0-6, esc(l.Label))
			continue
		}
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#888" stroke-dasharray="6 4"/>`, x0, p.y(l.At), x1, p.y(l.At))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" fill="#666" font-size="10" text-anchor="end">%s</text>`+"\n", x1-4, p.y(l.At)-4, esc(l.Label))
	}
	for _, s := range p.Series {
		var d strings.Builder
		for i, pt := range s.Points {
			switch {
			case i == 0:
				fmt.Fprintf(&d, "M%.1f %.1f", p.x(pt.X), p.y(pt.Y))
			case s.Step:
				fmt.Fprintf(&d, "H%.1fV%.1f", p.x(pt.X), p.y(pt.Y))
			default:
				fmt.Fprintf(&d, "L%.1f %.1f", p.x(pt.X), p.y(pt.Y))
			}
		}
		dash := ""
		if s.Dashed {
			dash = ` stroke-dasharray="8 4"`
		}
		fmt.Fprintf(&b, `<path d="%s" fill="none" stroke="%s" stroke-width="1.8"%s clip-path="url(#area)"/>`+"\n", d.String(), s.Color, dash)
		if !s.Step {
			for _, pt := range s.Points {
				fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="2.5" fill="%s" clip-path="url(#area)"/>`, p.x(pt.X), p.y(pt.Y), s.Color)
			}
			b.WriteString("\n")
		}
	}
	longest := 0
	for _, s := range p.Series {
		longest = max(longest, len(s.Name))
	}
	fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="white" fill-opacity="0.85" stroke="#ccc"/>`+"\n", x0+6, y1+6, 46+7*float64(longest), 18*float64(len(p.Series))+4)
	for i, s := range p.Series {
		ly := y1 + 16 + 18*float64(i)
		dash := ""
		if s.Dashed {
			dash = ` stroke-dasharray="8 4"`
		}
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"%s/>`, x0+12, ly, x0+40, ly, s.Color, dash)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f">%s</text>`+"\n", x0+46, ly+4, esc(s.Name))
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}
