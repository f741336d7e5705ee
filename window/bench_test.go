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
	b.Run("allowed", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sink = perMinute.Decide(now, 100, 20, 1)
		}
	})
	b.Run("denied", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sink = perMinute.Decide(now, 100, 100, 1)
		}
	})
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
