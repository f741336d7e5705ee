package peers

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slidegate/slidegate/limiter"
)

// testQuota has a period so long that the peers which read the clock never
// see a refill or a bucket boundary during a test.
func testQuota(limit int64) Quota {
	return Quota{Limit: limit, Period: 1000 * time.Hour, Now: time.Date(2026, 11, 22, 12, 0, 30, 0, time.UTC)}
}

// testPeers is All plus the slidegate variant without a deny cache.
func testPeers() []Peer {
	return append([]Peer{{"slidegate-nodenycache", func(q Quota) (Limiter, error) {
		return NewSlidegate(q, limiter.Options{DisableDenyCache: true})
	}}}, All...)
}

func admitted(t *testing.T, l Limiter, key string, n int) int {
	t.Helper()
	got := 0
	for range n {
		ok, err := l.Allow(context.Background(), key)
		if err != nil {
			t.Fatalf("Allow(%q): %v", key, err)
		}
		if ok {
			got++
		}
	}
	return got
}

func TestPeersAdmitExactlyTheLimit(t *testing.T) {
	for _, p := range testPeers() {
		for _, tc := range []struct {
			limit int64
			extra int
		}{
			{limit: 1, extra: 1},
			{limit: 5, extra: 3},
			{limit: 100, extra: 50},
		} {
			t.Run(p.Name, func(t *testing.T) {
				l, err := p.New(testQuota(tc.limit))
				if err != nil {
					t.Fatal(err)
				}
				defer l.Close()
				n := int(tc.limit) + tc.extra
				if got, want := admitted(t, l, "k:a", n), int(tc.limit); got != want {
					t.Errorf("key a: admitted %d of %d, want %d", got, n, want)
				}
				// Another key has its own quota.
				if got, want := admitted(t, l, "k:b", n), int(tc.limit); got != want {
					t.Errorf("key b: admitted %d of %d, want %d", got, n, want)
				}
				// A spent key stays denied.
				if got := admitted(t, l, "k:a", 3); got != 0 {
					t.Errorf("key a after its quota: admitted %d, want 0", got)
				}
			})
		}
	}
}

func TestPeersAdmitExactlyTheLimitConcurrently(t *testing.T) {
	const goroutines, each, limit = 20, 10, 150
	for _, p := range testPeers() {
		t.Run(p.Name, func(t *testing.T) {
			l, err := p.New(testQuota(limit))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			var got atomic.Int64
			var wg sync.WaitGroup
			for range goroutines {
				wg.Go(func() {
					for range each {
						ok, err := l.Allow(context.Background(), "k:shared")
						if err != nil {
							t.Error(err)
							return
						}
						if ok {
							got.Add(1)
						}
					}
				})
			}
			wg.Wait()
			if got, want := got.Load(), int64(limit); got != want {
				t.Errorf("admitted %d of %d, want %d", got, goroutines*each, want)
			}
		})
	}
}

func TestPeersRejectBadQuota(t *testing.T) {
	for _, tc := range []struct {
		name string
		q    Quota
		want error
	}{
		{"zero limit", Quota{Limit: 0, Period: time.Minute}, ErrLimit},
		{"negative limit", Quota{Limit: -1, Period: time.Minute}, ErrLimit},
		{"short period", Quota{Limit: 10, Period: time.Millisecond}, ErrPeriod},
	} {
		for _, p := range testPeers() {
			t.Run(tc.name+"/"+p.Name, func(t *testing.T) {
				l, err := p.New(tc.q)
				if !errors.Is(err, tc.want) {
					t.Errorf("New(%+v) error = %v, want %v", tc.q, err, tc.want)
				}
				if l != nil {
					t.Errorf("New(%+v) returned a limiter with an error", tc.q)
				}
			})
		}
	}
}

func TestPickerStaysInRangeAndCoversIt(t *testing.T) {
	for _, n := range []int{1, 2, 7, 10_000} {
		p := NewPicker(42, n)
		seen := make(map[int]bool)
		for range 50 * n {
			i := p.Next()
			if i < 0 || i >= n {
				t.Fatalf("n=%d: Next() = %d, out of range", n, i)
			}
			seen[i] = true
		}
		if got := len(seen); got != n {
			t.Errorf("n=%d: %d distinct indices after %d draws, want %d", n, got, 50*n, n)
		}
	}
}

func TestPickerSeeds(t *testing.T) {
	draw := func(seed uint64) []int {
		p := NewPicker(seed, 10_000)
		out := make([]int, 8)
		for i := range out {
			out[i] = p.Next()
		}
		return out
	}
	if a, b := draw(1), draw(1); !slices.Equal(a, b) {
		t.Errorf("seed 1 drew %v then %v; want the same sequence", a, b)
	}
	if a, b := draw(1), draw(2); slices.Equal(a, b) {
		t.Errorf("seeds 1 and 2 both drew %v; want different sequences", a)
	}
	if a := draw(0); slices.Equal(a, make([]int, 8)) {
		t.Errorf("seed 0 drew only zeros")
	}
}

func TestKeysAreDistinctHashedIdentities(t *testing.T) {
	keys := Keys(1000)
	seen := make(map[string]bool, len(keys))
	for _, k := range keys {
		if !strings.HasPrefix(k, "k:") || len(k) != 2+64 {
			t.Fatalf("key %q: want \"k:\" and 64 hex digits", k)
		}
		if seen[k] {
			t.Fatalf("key %q repeated", k)
		}
		seen[k] = true
	}
}
