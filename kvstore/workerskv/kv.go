package workerskv

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/slidegate/slidegate/kvstore"
)

// KV is the slice of a Workers KV namespace the Store uses. Binding
// implements it over the Worker's KV binding; tests pass a fake. Its
// errors name the operation and the key or prefix, as Binding's do: the
// Store passes them on without naming them again.
type KV interface {
	// Put writes value under key with metadata {"n": n}, expiring ttl after
	// now (Workers KV's expirationTtl, at least MinTTL).
	Put(ctx context.Context, key, value string, n int64, ttl time.Duration) error
	// List returns one page of the keys under prefix, starting at cursor ("":
	// the first page), each with the n of its metadata.
	List(ctx context.Context, prefix, cursor string) (Page, error)
}

// Page is one page of a KV list.
type Page struct {
	Keys   []Key
	Cursor string // the next page's cursor; empty when Done
	Done   bool   // no more pages
}

// Key is a listed key with the count from its metadata.
type Key struct {
	Name string
	N    int64
}

// MinTTL is the shortest expirationTtl Workers KV accepts.
const MinTTL = 60 * time.Second

// KeyPrefix is the start of every KV key the Store writes.
const KeyPrefix = "sg:"

// SlotPrefix returns the KV key prefix of one slot of an identity, shared by
// every isolate's key of that slot:
// sg:{rule}:{identity hash}:{bucket length ms}:{bucket}:. The identity is
// hashed (SHA-256, 128 bits kept), so raw keys and IPs never reach KV and
// identities cannot collide with the separators.
func SlotPrefix(id string, s kvstore.Slot) string {
	h := sha256.Sum256([]byte(id))
	b := make([]byte, 0, 96)
	b = append(b, KeyPrefix...)
	b = append(b, url.QueryEscape(s.Name)...)
	b = append(b, ':')
	b = hex.AppendEncode(b, h[:16])
	b = append(b, ':')
	b = strconv.AppendInt(b, s.Length.Milliseconds(), 10)
	b = append(b, ':')
	b = strconv.AppendInt(b, s.Bucket, 10)
	b = append(b, ':')
	return string(b)
}

// nextKey returns, for an isolate's key of a slot (SlotPrefix and the
// isolate id), the key of the same counter in the bucket after it, when
// that bucket starts (Unix ms) and the bucket length (ms); ok is false for
// a key of another form.
func nextKey(key string) (next string, start, length int64, ok bool) {
	f := strings.Split(key, ":")
	if len(f) != 6 || f[0]+":" != KeyPrefix {
		return "", 0, 0, false
	}
	length, err1 := strconv.ParseInt(f[3], 10, 64)
	bucket, err2 := strconv.ParseInt(f[4], 10, 64)
	if err1 != nil || err2 != nil || length <= 0 || bucket < 0 || bucket > math.MaxInt64/length-3 {
		return "", 0, 0, false
	}
	f[4] = strconv.FormatInt(bucket+1, 10)
	return strings.Join(f, ":"), (bucket + 1) * length, length, true
}

// ttl returns the expirationTtl of a slot's key written at now: until
// expires, when the slot stops being the previous bucket, rounded up to
// whole seconds, at least MinTTL.
func ttl(expires, now time.Time) time.Duration {
	d := expires.Sub(now)
	d = (d + time.Second - 1).Truncate(time.Second)
	return max(d, MinTTL)
}

// kvKey returns the KV key the counter with cell key key (SlotPrefix and
// the isolate id) writes: key itself, or for a counter made again after an
// eviction (Cell.Gen), key and "." and its Gen, which the isolate's next
// counter of the slot, if evicted in turn, does not write over.
func kvKey(key string, c Cell) string {
	if c.Gen == 0 {
		return key
	}
	return key + "." + strconv.FormatInt(c.Gen, 10)
}
