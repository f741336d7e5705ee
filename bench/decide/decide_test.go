package decide

import (
	"testing"
	"time"

	"github.com/slidegate/slidegate/window"
)

var (
	sink      window.Decision
	perMinute = window.Rule{Name: "minute", Limit: 100, Period: time.Minute}
	now       = time.Date(2026, 11, 22, 11, 59, 30, 0, time.UTC)
)

// The floors return (or write) the Decision that Decide returns for the
// benchmark's arguments (half of prev still overlaps 30 s into the
// minute), with the same parameters, computing nothing but a few
// additions. They are not decisions for any other arguments.

//go:noinline
func floor(r window.Rule, now time.Time, prev, cur, cost int64) window.Decision {
	used := prev/2 + cur + cost
	return window.Decision{Allowed: true, Rule: r.Name, Limit: r.Limit, Period: r.Period,
		Used: used, Remaining: r.Limit - used, ResetAfter: 87142857143, NextAfter: 1}
}

//go:noinline
func floorInto(d *window.Decision, r window.Rule, now time.Time, prev, cur, cost int64) {
	used := prev/2 + cur + cost
	d.Allowed, d.Rule, d.Limit, d.Period = true, r.Name, r.Limit, r.Period
	d.Used, d.Remaining, d.ResetAfter, d.RetryAfter = used, r.Limit-used, 87142857143, 0
	d.NextAfter = 1
}

// BenchmarkDecide runs each floor and its decision in one process, one
// after the other, with the arguments of window's BenchmarkDecide/allowed.
func BenchmarkDecide(b *testing.B) {
	b.Run("fn=floor", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sink = floor(perMinute, now, 100, 20, 1)
		}
	})
	b.Run("fn=decide", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sink = perMinute.Decide(now, 100, 20, 1)
		}
	})
	b.Run("fn=floor_into", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			floorInto(&sink, perMinute, now, 100, 20, 1)
		}
	})
	b.Run("fn=decide_into", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			perMinute.DecideInto(&sink, now, 100, 20, 1)
		}
	})
}

// TestFloorsAreDecide keeps the floors honest: they give what Decide gives
// for the benchmark's arguments, so that each pair moves the same data.
func TestFloorsAreDecide(t *testing.T) {
	want := perMinute.Decide(now, 100, 20, 1)
	if got := floor(perMinute, now, 100, 20, 1); got != want {
		t.Errorf("floor = %+v, Decide = %+v", got, want)
	}
	got := window.Decision{Rule: "old", RetryAfter: 5}
	floorInto(&got, perMinute, now, 100, 20, 1)
	if got != want {
		t.Errorf("floorInto = %+v, Decide = %+v", got, want)
	}
}
