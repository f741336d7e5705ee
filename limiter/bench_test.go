package limiter

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// benchRules admit everything: the benchmarks measure the admitted path.
var benchRules = []Rule{rule("minute", 1<<50, time.Minute), rule("day", 1<<50, 24*time.Hour)}

func benchKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("k:%064x", i*7919)
	}
	return keys
}

func BenchmarkCheck(b *testing.B) {
	for _, n := range []int{1, 10000} {
		keys := benchKeys(n)
		b.Run(fmt.Sprintf("serial/%dkeys", n), func(b *testing.B) {
			l := New(Options{})
			var res Result
			for _, k := range keys { // warm: the timed loop inserts nothing
				l.CheckInto(ctx, t0, k, benchRules, 1, &res)
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if err := l.CheckInto(ctx, t0, keys[i%n], benchRules, 1, &res); err != nil || !res.Allowed {
					b.Fatal(res.Decision, err)
				}
			}
		})
		b.Run(fmt.Sprintf("parallel/%dkeys", n), func(b *testing.B) {
			l := New(Options{})
			var warm Result
			for _, k := range keys {
				l.CheckInto(ctx, t0, k, benchRules, 1, &warm)
			}
			var seq atomic.Uint64
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				var res Result
				i := seq.Add(1) * 104729 // spread goroutines over the keys
				for pb.Next() {
					i++
					if err := l.CheckInto(ctx, t0, keys[i%uint64(n)], benchRules, 1, &res); err != nil || !res.Allowed {
						b.Fatal(res.Decision, err)
					}
				}
			})
		})
	}
	b.Run("denied/cached", func(b *testing.B) {
		l := New(Options{})
		r := []Rule{rule("minute", 1, time.Minute)}
		l.Check(ctx, t0, "k", r, 1)
		b.ReportAllocs()
		for b.Loop() {
			if res, _ := l.Check(ctx, t0, "k", r, 1); res.Allowed {
				b.Fatal("allowed")
			}
		}
	})
	b.Run("denied/store", func(b *testing.B) {
		l := New(Options{DisableDenyCache: true})
		r := []Rule{rule("minute", 1, time.Minute)}
		l.Check(ctx, t0, "k", r, 1)
		b.ReportAllocs()
		for b.Loop() {
			if res, _ := l.Check(ctx, t0, "k", r, 1); res.Allowed {
				b.Fatal("allowed")
			}
		}
	})
}

// BenchmarkDecide is the one-rule check through Decide, as a caller that
// needs only the verdict makes it (bench/peers compares it with other
// limiters).
func BenchmarkDecide(b *testing.B) {
	one := benchRules[:1]
	for _, n := range []int{1, 10000} {
		keys := benchKeys(n)
		b.Run(fmt.Sprintf("parallel/%dkeys", n), func(b *testing.B) {
			l := New(Options{})
			for _, k := range keys {
				l.Decide(ctx, t0, k, one, 1)
			}
			var seq atomic.Uint64
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := seq.Add(1) * 104729
				for pb.Next() {
					i++
					if d, err := l.Decide(ctx, t0, keys[i%uint64(n)], one, 1); err != nil || !d.Allowed {
						b.Fatal(d, err)
					}
				}
			})
		})
	}
}

// BenchmarkNew is what a Worker request pays to build its limiter: the stock
// shim starts a fresh Go instance per request.
func BenchmarkNew(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		New(Options{})
	}
}
