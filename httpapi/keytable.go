//go:build !js

package httpapi

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"
)

// keyTable holds the configured keys (api_keys) by the SHA-256 of the key,
// each with its plan and its storage identity ("k:" and the hex of the
// hash), for the lookup every keyed request makes: a record's fields lie
// in one cache line, and the hash is compared in it. (A table of 16 to 256
// records gets Go's 8-byte malloc header and starts 8 bytes into a line;
// the 8 bytes of each record that then spill into the next line are its
// trailing pad, which TestKeyTable holds.)
//
// It replaced a map from the hex hash to the plan and the identity: with
// a thousand keys in turn, a lookup there missed the cache on the map's
// slot and then on the hex string it compared, an allocation of its own,
// before the limiter and the store read the identity's bytes (another
// miss, which remains). The identities stay strings of their own, not
// bytes of the table: the limiter's deny cache keeps a refused key's
// identity for as long as its denial lasts, and a string into the table
// would keep the whole table alive, one per configuration reloaded.
type keyTable struct {
	recs []keyRec // a power of two of them, at most half in use; nil: no key
}

// keyRec is one configured key; plan is nil in a free record.
type keyRec struct {
	sum  [sha256.Size]byte
	id   string
	plan *plan
	_    [64 - sha256.Size - unsafe.Sizeof("") - unsafe.Sizeof((*plan)(nil))]byte
}

// newKeyTable returns the table of keys, which map lower-case hex hashes
// (validated: config's api_keys) to the names of plans. It fails on what
// validation would have refused and the table relies on, a plan that does
// not exist or a hash that is not lower-case hex (New with Validated set;
// the Worker's map checks neither).
func newKeyTable(keys map[string]string, plans map[string]*plan) (keyTable, error) {
	if len(keys) == 0 {
		return keyTable{}, nil
	}
	n := 2
	for n < 2*len(keys) {
		n *= 2
	}
	t := keyTable{recs: make([]keyRec, n)}
	for hash, name := range keys {
		p := plans[name]
		if p == nil {
			return keyTable{}, fmt.Errorf("api_keys: plan %q: no such plan", name)
		}
		var sum [sha256.Size]byte
		if !decodeSum(&sum, hash) {
			// Not quoted: a raw key pasted there by mistake stays out of
			// the error, as config's validation keeps it out of its own.
			return keyTable{}, errors.New("api_keys: a key is not a lower-case hex SHA-256")
		}
		r := t.free(&sum)
		r.sum, r.id, r.plan = sum, keyIdentity(&sum), p
	}
	return t, nil
}

// decodeSum decodes the hex h into sum, and reports whether h is exactly
// that: 2*len(sum) lower-case hex digits. Upper case is refused, not
// decoded: config's validation refuses it, the Worker's map never matches
// it, and "AB…" beside "ab…" would be one sum in two records.
func decodeSum(sum *[sha256.Size]byte, h string) bool {
	if len(h) != 2*len(sum) {
		return false
	}
	for i := range sum {
		if !lowerHex(h[2*i]) || !lowerHex(h[2*i+1]) {
			return false
		}
		sum[i] = unhex(h[2*i])<<4 | unhex(h[2*i+1])
	}
	return true
}

func lowerHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' }

// home is the first record of sum's probe sequence. The table's keys are
// the operator's, so a client cannot lengthen the runs its lookups walk.
func (t *keyTable) home(sum *[sha256.Size]byte) int {
	return int(binary.LittleEndian.Uint64(sum[:8]) & uint64(len(t.recs)-1))
}

// free returns the first free record of sum's probe sequence.
func (t *keyTable) free(sum *[sha256.Size]byte) *keyRec {
	mask := len(t.recs) - 1
	for i := t.home(sum); ; i = (i + 1) & mask {
		if r := &t.recs[i]; r.plan == nil {
			return r
		}
	}
}

// find returns the identity and the plan of the configured key whose
// SHA-256 is sum, and whether there is one.
func (t *keyTable) find(sum *[sha256.Size]byte) (string, *plan, bool) {
	if len(t.recs) == 0 {
		return "", nil, false
	}
	mask := len(t.recs) - 1
	for i := t.home(sum); ; i = (i + 1) & mask {
		r := &t.recs[i]
		switch {
		case r.plan == nil:
			return "", nil, false
		case r.sum == *sum:
			return r.id, r.plan, true
		}
	}
}
