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
