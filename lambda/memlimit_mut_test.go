package main

import (
	"math"
	"runtime/debug"
	"testing"
)

// TestLimitMemoryBounds: the edges of limitMemory that hand mutations
// moved unseen. Lambda's largest size (10,240 MB) is limited like any
// other; a size that leaves exactly nothing, or whose bytes overflow an
// int64 (wrapping to a small positive size), sets no limit: a limit of 0
// would have the collector run without pause, and a wrapped one would
// stop a large function far short of its memory.
func TestLimitMemoryBounds(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	const mib = 1 << 20
	for _, c := range []struct {
		name, size string
		want       int64
	}{
		{"10240 MB", "10240", 10240*mib - 1024*mib},
		{"24 MB: nothing left", "24", 0},
		{"0 MB", "0", 0},
		{"2^44+100 MB: wraps to 100 MiB", "17592186044516", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			debug.SetMemoryLimit(math.MaxInt64)
			if got := limitMemory(func(k string) string { return map[string]string{envMemorySize: c.size}[k] }); got != c.want {
				t.Errorf("limitMemory = %d, want %d", got, c.want)
			}
			wantLimit := c.want
			if wantLimit == 0 {
				wantLimit = math.MaxInt64 // left as it was
			}
			if got := debug.SetMemoryLimit(-1); got != wantLimit {
				t.Errorf("runtime limit %d, want %d", got, wantLimit)
			}
		})
	}
}
