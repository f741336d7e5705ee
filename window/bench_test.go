package window_test

import (
	"testing"
	"time"

	"github.com/slidegate/slidegate/window"
)

// sink keeps the compiler from dropping the benchmarked calls.
var sink window.Decision

func BenchmarkDecide(b *testing.B) {
	now := t0.Add(30 * time.Second)
	for _, c := range []struct {
		name      string
		prev, cur int64
	}{{"allowed", 100, 20}, {"denied", 100, 100}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sink = perMinute.Decide(now, c.prev, c.cur, 1)
			}
		})
		b.Run(c.name+"_into", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				perMinute.DecideInto(&sink, now, c.prev, c.cur, 1)
			}
		})
	}
}

func BenchmarkDecideTwoRules(b *testing.B) {
	day := window.Rule{Name: "day", Limit: 1_000_000, Period: 24 * time.Hour}
	now := t0.Add(30 * time.Second)
	b.ReportAllocs()
	for b.Loop() {
		ds := [2]window.Decision{
			perMinute.Decide(now, 100, 20, 1),
			day.Decide(now, 400_000, 300_000, 1),
		}
		sink = window.Combine(ds[:])
	}
}
