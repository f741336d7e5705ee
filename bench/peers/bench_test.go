package peers

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/slidegate/slidegate/limiter"
)

// benchNow is the instant given to the peers that take the time.
var benchNow = time.Date(2026, 11, 22, 12, 0, 30, 0, time.UTC)

// Sub-benchmarks are named key=value (mode, keys, peer) so that benchstat
// can lay the peers out as columns: benchstat -col /peer.
//
// BenchmarkPeers measures the admitted path: the quota is so large that
// every request is admitted, so every peer does its full work (look up the
// key, read and update its counters).
func BenchmarkPeers(b *testing.B) {
	q := Quota{Limit: 1 << 40, Period: time.Hour, Now: benchNow}
	benchPeers(b, q, true, []int{1, 10_000}, All)
}

// BenchmarkPeersDenied measures the denied path: every key has spent its
// quota of one before the timer starts. slidegate answers from its deny
// cache; slidegate-nodenycache shows the path through the store.
func BenchmarkPeersDenied(b *testing.B) {
	q := Quota{Limit: 1, Period: time.Hour, Now: benchNow}
	peers := append(All[:1:1], Peer{"slidegate-nodenycache", func(q Quota) (Limiter, error) {
		return NewSlidegate(q, limiter.Options{DisableDenyCache: true})
	}})
	peers = append(peers, All[1:]...)
	benchPeers(b, q, false, []int{10_000}, peers)
}

func benchPeers(b *testing.B, q Quota, want bool, keyCounts []int, peers []Peer) {
	for _, mode := range []struct {
		name string
		run  func(*testing.B, Limiter, []string, bool)
	}{
		{"serial", runSerial},
		{"parallel", runParallel},
	} {
		b.Run("mode="+mode.name, func(b *testing.B) {
			for _, n := range keyCounts {
				keys := Keys(n)
				b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
					for _, p := range peers {
						b.Run("peer="+p.Name, func(b *testing.B) {
							l := warm(b, p, q, keys)
							defer l.Close()
							b.ReportAllocs()
							cpu := cpuTime(b)
							mode.run(b, l, keys, want)
							b.ReportMetric(float64(cpuTime(b)-cpu)/float64(b.N), "cpu-ns/op")
						})
					}
				})
			}
		})
	}
}

// cpuTime returns the CPU time this process has used, user and system.
// Reported per op next to ns/op, it is less sensitive than wall time to
// other work on a shared machine taking the cores away.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// warm builds the peer and sends every key two requests, so that the timed
// loop measures the steady state (keys known; on the denied path, quota
// spent and the denial seen once) rather than first-time inserts. It ends
// with a garbage collection: the set-up's allocations would otherwise start
// one that runs concurrently with the first milliseconds of the timed loop,
// charged to whichever peer's set-up allocated past the GC goal (with
// -benchtime 50000x, up to half of the timed loop).
func warm(b *testing.B, p Peer, q Quota, keys []string) Limiter {
	b.Helper()
	l, err := p.New(q)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for range 2 {
		for _, k := range keys {
			if _, err := l.Allow(ctx, k); err != nil {
				b.Fatal(err)
			}
		}
	}
	runtime.GC()
	return l
}

func runSerial(b *testing.B, l Limiter, keys []string, want bool) {
	ctx := context.Background()
	p := NewPicker(1, len(keys))
	for b.Loop() {
		if ok, err := l.Allow(ctx, keys[p.Next()]); ok != want || err != nil {
			b.Fatalf("Allow = %t, %v; want %t, nil", ok, err, want)
		}
	}
}

func runParallel(b *testing.B, l Limiter, keys []string, want bool) {
	ctx := context.Background()
	var seed atomic.Uint64
	var bad atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		p := NewPicker(seed.Add(1), len(keys))
		for pb.Next() {
			if ok, err := l.Allow(ctx, keys[p.Next()]); ok != want || err != nil {
				bad.Add(1)
			}
		}
	})
	if n := bad.Load(); n > 0 {
		b.Fatalf("%d requests did not answer %t", n, want)
	}
}
