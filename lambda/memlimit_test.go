package main

import (
	"math"
	"runtime/debug"
	"testing"
)

// TestLimitMemory: the soft limit follows the function's memory, leaving a
// tenth of it and at least 24 MiB, and an operator's GOMEMLIMIT or a
// missing or bad memory size leaves the runtime's limit as it was.
func TestLimitMemory(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	const mib = 1 << 20
	for _, c := range []struct {
		name      string
		env       map[string]string
		want      int64
		wantLimit int64 // the runtime's limit after
	}{
		{"128 MB", map[string]string{envMemorySize: "128"}, 104 * mib, 104 * mib},
		{"1024 MB", map[string]string{envMemorySize: "1024"}, 1024*mib - 1024*mib/10, 1024*mib - 1024*mib/10},
		{"operator's GOMEMLIMIT", map[string]string{envMemorySize: "128", envGoMemLimit: "90MiB"}, 0, math.MaxInt64},
		{"not on Lambda", map[string]string{}, 0, math.MaxInt64},
		{"bad size", map[string]string{envMemorySize: "128MB"}, 0, math.MaxInt64},
		{"too small to leave room", map[string]string{envMemorySize: "16"}, 0, math.MaxInt64},
		// Edges that hand mutations moved unseen: Lambda's largest size
		// is limited like any other; a size that leaves exactly nothing,
		// or whose bytes overflow an int64 (wrapping to a small positive
		// size), sets no limit: a limit of 0 would have the collector run
		// without pause, and a wrapped one would stop a large function
		// far short of its memory.
		{"10240 MB", map[string]string{envMemorySize: "10240"}, 10240*mib - 1024*mib, 10240*mib - 1024*mib},
		{"24 MB: nothing left", map[string]string{envMemorySize: "24"}, 0, math.MaxInt64},
		{"0 MB", map[string]string{envMemorySize: "0"}, 0, math.MaxInt64},
		{"2^44+100 MB: wraps to 100 MiB", map[string]string{envMemorySize: "17592186044516"}, 0, math.MaxInt64},
	} {
		t.Run(c.name, func(t *testing.T) {
			debug.SetMemoryLimit(math.MaxInt64)
			if got := limitMemory(func(k string) string { return c.env[k] }); got != c.want {
				t.Errorf("limitMemory = %d MiB, want %d MiB", got/mib, c.want/mib)
			}
			if got := debug.SetMemoryLimit(-1); got != c.wantLimit {
				t.Errorf("runtime limit %d, want %d", got, c.wantLimit)
			}
		})
	}
}
