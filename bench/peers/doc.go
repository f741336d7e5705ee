// Package peers puts slidegate's limiter and the Go rate limiters people
// reach for behind one interface, so that one `go test -bench` run measures
// them all on the same keys, the same key choice and the same quota.
//
// The peers:
//
//   - slidegate: limiter.New(limiter.Options{}) on the memory store, with the
//     time passed in (a fixed instant in benchmarks);
//   - slidegate-timenow: the same, reading time.Now() on every request, the
//     cost a server pays when it takes the time per request;
//   - slidegate-oneblocked: the same with one unrelated identity blocked, so
//     that every request probes the deny cache (with no identity blocked the
//     probe is skipped);
//   - golimiter: github.com/sethvargo/go-limiter memorystore (reads its clock
//     internally on every Take);
//   - ulule: github.com/ulule/limiter/v3 with its memory store (reads
//     time.Now() internally, several times per Get);
//   - xrate: a map[string]*rate.Limiter behind a sync.Mutex, the way most
//     code uses golang.org/x/time/rate per key, with the time passed in;
//   - xrate-syncmap: the same with a sync.Map.
//
// The package lives in its own module (bench/) so that the peers never enter
// slidegate's go.mod.
package peers
