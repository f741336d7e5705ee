package main

import (
	"runtime/debug"
	"strconv"
)

// Environment variables read by limitMemory: Lambda sets the function's
// memory in megabytes (MiB); GOMEMLIMIT is the operator's own limit.
const (
	envMemorySize = "AWS_LAMBDA_FUNCTION_MEMORY_SIZE"
	envGoMemLimit = "GOMEMLIMIT"
)

// limitMemory sets the Go runtime's soft memory limit below the function's
// memory and returns it (0: left as it was). An instance whose caches are
// full (maxLocalIdentities local identities, the store's
// dynamostore.DefaultCacheSize and the deny cache) held about 47 MB live
// (up to about 62 MB since the memory store's slots took 280 bytes for
// any identity: docs/lambda.md);
// the collector's default goal doubles that, and the instance, 147 MB at
// its peak, was killed by Lambda at 128 MB, losing its counts and caches.
// With the limit the collector works harder near it instead. The limit
// leaves the function a tenth of its memory, at least 24 MiB, for what
// the runtime does not count (the binary's pages, the runtime client's
// buffers). A GOMEMLIMIT set by the operator is left alone.
func limitMemory(getenv func(string) string) int64 {
	if getenv(envGoMemLimit) != "" {
		return 0
	}
	mb, err := strconv.ParseInt(getenv(envMemorySize), 10, 64)
	if err != nil || mb <= 0 || mb > 1<<20 {
		return 0
	}
	limit := mb<<20 - max(mb<<20/10, 24<<20)
	if limit <= 0 {
		return 0
	}
	debug.SetMemoryLimit(limit)
	return limit
}
