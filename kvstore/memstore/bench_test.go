package memstore_test

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slidegate/slidegate/kvstore"
	"github.com/slidegate/slidegate/kvstore/memstore"
	"github.com/slidegate/slidegate/window"
)

// benchAt is the fixed instant every benchmarked call is made at.
var benchAt = time.Date(2026, 11, 22, 12, 0, 30, 0, time.UTC)

// benchSlots are the two counters the limiter reads for one rule: the
// previous and the current minute.
var benchSlots = func() []kvstore.Slot {
	b := window.Index(benchAt, time.Minute)
	return []kvstore.Slot{
		{Name: "minute", Bucket: b - 1, Length: time.Minute},
		{Name: "minute", Bucket: b, Length: time.Minute},
	}
}()

// op is one store call on key, with buffers owned by the calling goroutine.
type op func(s *memstore.Store, key string, counts []int64) error

// admitAll is a kvstore.Admitter that admits every request.
type admitAll struct{}

func (admitAll) Admit([]int64) bool { return true }

// BenchmarkStore measures the calls the limiter makes per request on the
// admitted path: Update (one locked round trip, the limiter's path on this
// store) and the Load then AddIf that other Conditional stores get, on
// identities shaped like hashed API keys, with every key known before the
// timer starts.
func BenchmarkStore(b *testing.B) {
	ctx := context.Background()
	conds := []kvstore.Cond{
		{Slot: benchSlots[0], Max: math.MaxInt64},
		{Slot: benchSlots[1], Max: math.MaxInt64, Add: 1},
	}
	costs := []int64{0, 1}
	ops := []struct {
		name string
		do   op
	}{
		{"update", func(s *memstore.Store, key string, counts []int64) error {
			ok, err := s.Update(ctx, key, benchSlots, counts, costs, admitAll{})
			if err == nil && !ok {
				err = fmt.Errorf("Update(%q) did not admit", key)
			}
			return err
		}},
		{"load", func(s *memstore.Store, key string, counts []int64) error {
			return s.Load(ctx, key, benchSlots, counts)
		}},
		{"addif", func(s *memstore.Store, key string, counts []int64) error {
			ok, err := s.AddIf(ctx, key, conds, counts)
			if err == nil && !ok {
				err = fmt.Errorf("AddIf(%q) did not apply", key)
			}
			return err
		}},
	}
	for _, parallel := range []bool{false, true} {
		mode := map[bool]string{false: "serial", true: "parallel"}[parallel]
		for _, n := range []int{1, 10_000} {
			keys := make([]string, n)
			for i := range keys {
				keys[i] = fmt.Sprintf("k:%064x", uint64(i)*0x9e3779b97f4a7c15)
			}
			for _, o := range ops {
				b.Run(fmt.Sprintf("%s/%s/%s", mode, keysName(n), o.name), func(b *testing.B) {
					s := memstore.New()
					for _, k := range keys {
						if _, err := s.AddIf(ctx, k, conds, make([]int64, len(conds))); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportAllocs()
					if parallel {
						runParallel(b, s, keys, o.do)
					} else {
						runSerial(b, s, keys, o.do)
					}
				})
			}
		}
	}
}

// BenchmarkGC measures what a filled store costs the garbage collector:
// the time of a forced full collection (runtime.GC, the mean of gcRuns)
// while the store holds n identities of a minute-and-day plan, in gc-ns,
// and the live heap the store adds per identity, in heap-B/id. Each
// write's id is made for it and not kept by the benchmark, as the HTTP
// layer's are: a store that keeps ids keeps them alive. The timed
// operation is the limiter's Update on 10,000 of the identities, so that
// the collections' count does not follow -benchtime. Filling a million
// identities takes a second or two.
func BenchmarkGC(b *testing.B) {
	const gcRuns = 5
	ctx := context.Background()
	var slots []kvstore.Slot
	for _, p := range []time.Duration{time.Minute, 24 * time.Hour} {
		i := window.Index(benchAt, p)
		slots = append(slots,
			kvstore.Slot{Name: p.String(), Bucket: i - 1, Length: p},
			kvstore.Slot{Name: p.String(), Bucket: i, Length: p})
	}
	costs := []int64{0, 1, 0, 1}
	id := func(i int) string { return fmt.Sprintf("k:%064x", uint64(i)*0x9e3779b97f4a7c15) }
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("%dids", n), func(b *testing.B) {
			var ms runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&ms)
			base := ms.HeapAlloc
			s := memstore.New()
			counts := make([]int64, len(slots))
			for i := range n {
				if ok, err := s.Update(ctx, id(i), slots, counts, costs, admitAll{}); err != nil || !ok {
					b.Fatalf("Update(%q): %v, %v", id(i), ok, err)
				}
			}
			runtime.GC()
			runtime.ReadMemStats(&ms)
			heap := float64(ms.HeapAlloc) - float64(base)
			start := time.Now()
			for range gcRuns {
				runtime.GC()
			}
			gc := float64(time.Since(start).Nanoseconds()) / gcRuns
			if got := s.Len(); got != n {
				b.Fatalf("Len = %d, want %d", got, n)
			}
			keys := make([]string, 10_000)
			for i := range keys {
				keys[i] = id(i * (n / len(keys)))
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := s.Update(ctx, keys[i], slots, counts, costs, admitAll{}); err != nil {
					b.Fatal(err)
				}
				if i++; i == len(keys) {
					i = 0
				}
			}
			b.ReportMetric(gc, "gc-ns")
			b.ReportMetric(heap/float64(n), "heap-B/id")
		})
	}
}

func runSerial(b *testing.B, s *memstore.Store, keys []string, do op) {
	counts := make([]int64, len(benchSlots))
	i := 0
	for b.Loop() {
		if err := do(s, keys[i], counts); err != nil {
			b.Fatal(err)
		}
		if i++; i == len(keys) {
			i = 0
		}
	}
}

// runParallel starts each goroutine at its own place in keys so that they
// do not walk the shards in step.
func runParallel(b *testing.B, s *memstore.Store, keys []string, do op) {
	var next atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		counts := make([]int64, len(benchSlots))
		i := int(next.Add(7919) % int64(len(keys)))
		for pb.Next() {
			if err := do(s, keys[i], counts); err != nil {
				b.Error(err)
				return
			}
			if i++; i == len(keys) {
				i = 0
			}
		}
	})
}

func keysName(n int) string {
	if n == 1 {
		return "1key"
	}
	return fmt.Sprintf("%dkeys", n)
}
