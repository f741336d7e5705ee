// Package workerskv is slidegate's Cloudflare Workers KV backend, built for
// a Worker compiled to Wasm with github.com/syumai/workers.
//
// Workers KV has no atomic operations, allows one write per second to a key
// and shows a write in other locations only after up to a minute. A
// read-increment-write of a shared counter therefore loses increments. This
// package never does one:
//
//   - Each isolate counts exactly in isolate globals (JS globalThis, which
//     outlives the per-request Go instance of the stock syumai shim). The
//     read-increment-write of a count runs with no await in between, so it is
//     exact under any concurrency inside the isolate.
//   - Write-behind: each isolate writes its absolute total for a slot to its
//     own KV key, sg:{rule}:{identity hash}:{bucket length}:{bucket}:{isolate},
//     with the total also in the key's metadata, at most once per second per
//     key, in the background (waitUntil), plus a trailing write so the last
//     counts reach KV without further traffic. Nothing is read back and
//     modified, so no isolate can lose another's counts. expirationTtl covers
//     the slot's useful life (the end of the bucket after it; at least 60 s).
//   - The other isolates' counts come from one list of the slot's prefix with
//     metadata, summed and cached in the isolate (2 s by default, the
//     previous bucket's sum 30 s), refreshed in the background with one
//     refresh in flight per slot. The sum leaves out only the key this
//     isolate's counter writes, chosen when the list has ended: the keys of
//     counters it evicted are in it. Load returns that sum plus this
//     isolate's exact total. A list reads at most 10 pages (10,000 keys);
//     a slot with more is summed from those, and the cut is logged.
//
// The result is exact within an isolate and eventually consistent across
// isolates and locations, bounded by the list cache interval plus KV's
// propagation delay. An isolate evicted before its trailing write loses at
// most the last second of its counts.
//
// Writes run in a request's background work, which the Worker cancels 30 s
// after the request's response. A counter's writes therefore belong to one
// request at a time, its Owner: they stop 25 s after it started, a request
// that counts takes them over once the owner is 20 s old, and the isolate's
// sweep (every 10 s, on any request; every second while more than maxAdopt
// wait and the sweeps of the last 10 s run half the counters they took on
// still, and as the counters an earlier sweep took on become 10 s old)
// restarts a flush that stopped with counts unwritten (after three
// failed writes, or out of time, or whose request is gone past its 25 s:
// its work cancelled, or a put that never answered). The sweep also takes over the writes
// other requests run (up to maxAdopt counters, not those a sweep of the
// last 10 s took on, an older sweep's first), which then linger for new
// counts and follow each counter into its next bucket when that starts: a
// request keeps its Go instance alive while it runs writes, and left with
// each client's own requests they kept one instance alive per busy client.
// A background KV call keeps its request alive until KV answers, so at most
// eight requests of an isolate have calls in flight: when KV is slow, the
// others' writes wait for the next sweep and their sums are served as
// cached.
// Counts of a stopped flush reach KV only if the isolate serves another
// request before it is evicted. Strict global limits need the DynamoDB store (or a Durable
// Object).
//
// An isolate holds at most 50,000 cells (about 8.5 MB of its 128 MB): a
// day rule keeps a client's cells for up to two days, and a stream of
// made-up keys would otherwise fill the isolate. A full isolate evicts the
// cells that count least per unit of time first, each cell by itself
// (memstore.NewLimited weighs an identity's counters together); an evicted
// client's count in this isolate starts afresh if it comes back, written to
// a KV key of its own (its isolate id followed by "." and the time it was
// made), so that the evicted counter's written counts stay in KV, listed
// with the other isolates'. An evicted sum of a client the isolate counts
// is listed again behind its next request. Counts not yet written to KV
// are evicted last, each logged; a counter being written, or written
// within FlushInterval, is not evicted, nor is a counter of the previous
// bucket while its client's counter of the current one stays, and a
// take-back from an evicted counter does nothing.
//
// Local is the local-scope counter store for limiter.Options.Local: a
// kvstore.Conditional over the same isolate globals that never touches KV.
//
// The logic is host-testable: KV, the isolate globals and the background
// scheduler are small interfaces. The syscall/js implementations (Binding,
// JSGlobals) live in files built only for js/wasm.
package workerskv
