package workerskv

import (
	"crypto/rand"
	"strconv"
)

// maxHolders bounds the requests of an isolate that have background KV
// calls (writes, list refreshes) in flight. In the Worker each request is a
// Go instance of about 5 MB that lives until its background work ends, and
// a KV call that answers late keeps it: when KV slowed down, each client
// that counted or had its sum listed held an instance for as long as KV
// took (up to the 30 s the Worker grants), and some 20 of them filled the
// isolate's 128 MB, which Cloudflare then resets, unwritten counts and all.
// Eight are about 40 MB. A request that finds them all taken starts no
// call: its counts wait, unwritten, for the counter's next request or the
// isolate's next sweep, its stale sums are served as they are, and the
// sweep gathers the waiting writes in one request, as it does every
// stopped flush.
const maxHolders = 8

// holderKeys are the cells of the holders: Busy is when the holding
// request took the cell, N its token. A cell taken staleBusy ago is free
// again: its request's background work has been cancelled.
var holderKeys = func() (k [maxHolders]string) {
	for i := range k {
		k[i] = "hold|" + strconv.Itoa(i)
	}
	return k
}()

// newToken returns a random non-zero number that tells this request's hold
// from another's.
func newToken() int64 {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	var t int64
	for _, x := range b {
		t = t<<8 | int64(x)
	}
	return t | 1
}

// hold reports whether the calling request may start a background KV call
// at ms, and counts it: it holds a holder cell already, or takes a free
// one. Call it inside Globals.Update, and release once the call has ended.
func (s *Store) hold(c Cells, ms int64) bool {
	if s.held > 0 {
		s.held++
		return true
	}
	if key := s.freeHolder(c, ms); key != "" {
		c.Set(key, Cell{N: s.token, Busy: ms, Expires: ms + staleBusy})
		s.held, s.holder = 1, key
		return true
	}
	return false
}

// freeHolder returns the key of a holder cell the calling request may take
// at ms, or "" when every one is taken.
func (s *Store) freeHolder(c Cells, ms int64) string {
	for _, key := range holderKeys {
		h, ok := c.Get(key)
		if !ok || h.N == s.token || ms-h.Busy >= staleBusy || ms < h.Busy {
			return key
		}
	}
	return ""
}

// release ends a call counted by hold, and frees the holder cell with the
// request's last call.
func (s *Store) release(c Cells) {
	if s.held--; s.held > 0 {
		return
	}
	if h, _ := c.Get(s.holder); h.N == s.token {
		c.Delete(s.holder)
	}
}
