package workerskv

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// maxCells bounds the cells of an isolate. A cell costs about 170 bytes of
// the isolate's 128 MB in V8 (key and encoded value as strings, and the
// Map's entry), and a client of a day rule keeps three (its counter, the
// current and the previous bucket's listed sums) for up to two days: a
// stream of made-up keys or IPv6 networks filled an isolate in hours, and
// every sweep, which reads each cell through syscall/js, took seconds of
// one request's CPU. 50,000 cells are about 8.5 MB.
const maxCells = 50_000

// evictKey names the cell whose N is the latest Expires of a listed sum,
// or of a counter after a write of it had started, that the isolate has
// evicted. A counter made anew that expires no later may be one the
// isolate evicted, whose KV key holds counts: it is given a Gen (newGen)
// and writes a key of its own. A sum missing that expires no later may
// have been evicted (Store.evictedSum). It is a marker: never evicted, never
// swept.
const evictKey = "evict|"

// newGen returns the Gen of a counter made at ms that expires at expires
// (Unix ms): ms when it may be one the isolate evicted (mayBeEvicted), else
// 0.
func newGen(c Cells, expires, ms int64) int64 {
	if mayBeEvicted(c, expires) {
		return max(ms, 1)
	}
	return 0
}

// mayBeEvicted reports whether the isolate has evicted a written counter or
// a sum that lives as long as a cell that expires at expires, or longer
// (evictKey): a cell that expires so and is missing may have been evicted.
func mayBeEvicted(c Cells, expires int64) bool {
	e, _ := c.Get(evictKey)
	return e.N != 0 && expires <= e.N
}

// evictTo is what an eviction leaves, so that the next one comes only
// after maxCells/10 new cells.
const evictTo = maxCells - maxCells/10

// bound evicts cells of an isolate that holds more than maxCells, down to
// evictTo, as memstore.NewLimited evicts identities: first the cells that
// count least per unit of time (a count over its bucket's length: a made-up
// key counted once before a client that used its minute's quota), the one
// expiring first on a tie. Listed sums are caches (an evicted one is listed
// again: behind the request for a client the isolate has counted,
// Store.evictedSum) and counters written to KV lose nothing there: if its client comes
// back, its new counter starts afresh in the isolate and writes a KV key of
// its own (evictKey), and the evicted one's key is listed with the other
// isolates' (written over by the new counter, as before 775c7ce, the
// counts were gone for every isolate until the bucket ended). Counters
// with counts not yet
// written to KV go last, and only with log, which names each and the counts
// lost: Local passes nil and leaves them to the Store. Counters with a
// write in flight or written within FlushInterval stay: the client's next
// count would write a new counter's key at once, a second write within a
// second. A counter of the previous bucket stays while its client's
// counter of the current bucket does. Markers (the clock, the sweeps,
// evictKey) are never evicted.
func bound(c Cells, ms int64, log Logger) {
	if c.Len() <= maxCells {
		return
	}
	// Each candidate as a string that sorts in eviction order: written
	// first, then by weight and expiry (16 hex digits each; a positive
	// float's bits sort as its value), then the key. Strings, so that the
	// sort is the one the Worker links already (a sort of structs cost 6 KB
	// of its gzip).
	var rank []string
	counting := map[string]bool{} // the counters with counts
	c.Sweep(ms, func(key string, cell Cell) {
		length := cellLength(key)
		if length <= 0 {
			return
		}
		counter := strings.HasPrefix(key, KeyPrefix)
		if counter && cell.N != 0 {
			counting[key] = true
		}
		writing := cell.Busy != 0 && ms-cell.Busy < staleBusy && ms >= cell.Busy
		if counter && (writing || ms-cell.At < flushMs && ms >= cell.At) {
			// Written a moment ago, or being written: its client's next
			// count would make a new counter that writes the key at once,
			// twice within a second, which KV refuses.
			return
		}
		b := make([]byte, 0, rankLen+len(key))
		switch {
		case !counter || cell.N == cell.Flushed:
			b = append(b, '0')
		case log == nil:
			return
		default:
			b = append(b, '1')
		}
		b = appendHex(b, math.Float64bits(max(float64(cell.N)/float64(length), 0)))
		b = appendHex(b, uint64(max(cell.Expires, 0)))
		rank = append(rank, string(append(b, key...)))
	})
	// A counter of the previous bucket stays while its client's counter of
	// the current one does: the isolate's own count of the previous bucket
	// is read from it, and with it evicted (and the listed sums, which go
	// first) the client read 0 there until a list behind answered
	// (Store.evictedSum), a client served by this isolate alone admitted
	// past its limit.
	kept := rank[:0]
	for _, r := range rank {
		if next, _, _, ok := nextKey(r[rankLen:]); !ok || !counting[next] {
			kept = append(kept, r)
		}
	}
	rank = kept
	n := min(c.Len()-evictTo, len(rank))
	if n <= 0 {
		return
	}
	slices.Sort(rank)
	var marked int64 // the latest Expires this eviction marks
	for i, r := range rank[:n] {
		key := r[rankLen:]
		cell, _ := c.Get(key)
		if strings.HasPrefix(key, "sum|") || strings.HasPrefix(key, KeyPrefix) && cell.At != 0 {
			marked = max(marked, cell.Expires)
		}
		c.Delete(key)
		if r[0] == '1' || i == n-1 {
			// Before each log line and at the end, not for every
			// cell: most of an eviction's cells are sums and written
			// counters, which log nothing. The marker is read each
			// time: during a line another goroutine's eviction may
			// have marked a later expiry, which a copy read before
			// wrote over.
			if e, _ := c.Get(evictKey); marked > e.N {
				c.Set(evictKey, Cell{N: marked, Expires: math.MaxInt64})
			}
		}
		// Logged once the cell is deleted and marked, not between its read
		// and its deletion: in the Worker a log line is a write to stderr
		// whose callback from JS lets the Go instance's other goroutines
		// run, and a count one of them made meanwhile went to the counter
		// being logged, deleted with it, or to one deleted a moment before
		// and not yet marked, whose new cell wrote over the KV key that
		// held the evicted one's counts.
		if r[0] == '1' {
			log.Warn("workerskv: isolate full, unwritten counts evicted", "key", key, "n", cell.N-cell.Flushed)
		}
	}
}

// flushMs is FlushInterval in Unix ms.
const flushMs = int64(FlushInterval / time.Millisecond)

// rankLen is the length of a candidate's rank before its key.
const rankLen = 1 + 16 + 16

// appendHex appends v as 16 hex digits.
func appendHex(b []byte, v uint64) []byte {
	for shift := 60; shift >= 0; shift -= 4 {
		b = append(b, "0123456789abcdef"[v>>uint(shift)&0xf])
	}
	return b
}

// cellLength returns the bucket length (ms) in the key of a counter (the
// Store's, SlotPrefix and the isolate id; Local's, localKey) or of a listed
// sum (sumKey), and 0 for any other key.
func cellLength(key string) int64 {
	var f []string
	switch {
	case strings.HasPrefix(key, "l|"):
		f = strings.SplitN(key, "|", 3)[1:]
	case strings.HasPrefix(key, KeyPrefix), strings.HasPrefix(key, "sum|"+KeyPrefix):
		f = strings.SplitN(key, ":", 5)[2:]
	}
	if len(f) < 2 {
		return 0
	}
	length, err := strconv.ParseInt(strings.SplitN(f[1], "|", 2)[0], 10, 64)
	if err != nil || length <= 0 {
		return 0
	}
	return length
}
