//go:build !js

package httpapi

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"unsafe"
)

// TestKeyTable: every configured key is found with its plan and its
// identity ("k:" and the hex of its hash), the same string each time (the
// memory store compares an identity it holds by pointer); a key not
// configured is not, and nothing allocates.
func TestKeyTable(t *testing.T) {
	plans := map[string]*plan{"free": {name: "free"}, "pro": {name: "pro"}, "enterprise": {name: "enterprise"}}
	names := []string{"free", "pro", "enterprise"}
	keys := map[string]string{}
	for i := range 1000 {
		keys[HashKey(fmt.Sprint("key-", i))] = names[i%3]
	}
	tab, err := newKeyTable(keys, plans)
	if err != nil {
		t.Fatal(err)
	}
	if got := unsafe.Sizeof(keyRec{}); got != 64 {
		t.Errorf("a record is %d bytes, want 64 (a cache line)", got)
	}
	// A table that starts 8 bytes into a line (the malloc header) spills
	// only the pad into the next line.
	var r keyRec
	for _, end := range []uintptr{
		unsafe.Offsetof(r.sum) + unsafe.Sizeof(r.sum),
		unsafe.Offsetof(r.id) + unsafe.Sizeof(r.id),
		unsafe.Offsetof(r.plan) + unsafe.Sizeof(r.plan),
	} {
		if end > 64-8 {
			t.Errorf("a field of a record ends at byte %d, want the last 8 bytes pad", end)
		}
	}
	if n := len(tab.recs); n < 2*len(keys) || n&(n-1) != 0 {
		t.Errorf("%d records for %d keys, want a power of two at least twice as many", n, len(keys))
	}
	for i := range 1000 {
		var sum [sha256.Size]byte
		hashKey(fmt.Sprint("key-", i), &sum)
		id, p, ok := tab.find(&sum)
		if want := "k:" + hex.EncodeToString(sum[:]); !ok || id != want || p != plans[names[i%3]] {
			t.Fatalf("key-%d: find = %q, %v, %v; want %q, plan %s", i, id, p, ok, want, names[i%3])
		}
		again, _, _ := tab.find(&sum)
		if unsafe.StringData(again) != unsafe.StringData(id) {
			t.Errorf("key-%d: a second find returned another string", i)
		}
		hashKey(fmt.Sprint("other-", i), &sum)
		if id, p, ok := tab.find(&sum); ok {
			t.Fatalf("other-%d, not configured: found %q, plan %s", i, id, p.name)
		}
	}
	var sum [sha256.Size]byte
	hashKey("key-7", &sum)
	if n := testing.AllocsPerRun(100, func() { tab.find(&sum) }); n != 0 {
		t.Errorf("find: %v allocations", n)
	}
}

// TestKeyTableProbes: hashes that share their first eight bytes start at
// the same record; each is found past the others, and a missing one ends
// its search at the run's end.
func TestKeyTableProbes(t *testing.T) {
	plans := map[string]*plan{"a": {name: "a"}, "b": {name: "b"}}
	prefix := strings.Repeat("ab", 8)
	hash := func(i int) string { return prefix + fmt.Sprintf("%048x", i) }
	keys := map[string]string{}
	for i := range 5 {
		keys[hash(i)] = []string{"a", "b"}[i%2]
	}
	tab, err := newKeyTable(keys, plans)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		var sum [sha256.Size]byte
		if !decodeSum(&sum, hash(i)) {
			t.Fatalf("decodeSum(%s) failed", hash(i))
		}
		id, p, ok := tab.find(&sum)
		switch {
		case i < 5 && (!ok || id != "k:"+hash(i) || p != plans[[]string{"a", "b"}[i%2]]):
			t.Errorf("hash %d: find = %q, %v, %v", i, id, p, ok)
		case i == 5 && ok:
			t.Errorf("hash 5, not configured: found %q", id)
		}
	}
	var empty keyTable
	if _, _, ok := empty.find(new([sha256.Size]byte)); ok {
		t.Error("an empty table found a key")
	}
}

// TestKeyTableRefuses: a configuration that skipped validation gets an
// error, not a table that panics on a request; a malformed hash, which
// may be a raw key pasted by mistake, is not quoted.
func TestKeyTableRefuses(t *testing.T) {
	plans := map[string]*plan{"free": {name: "free"}}
	good := HashKey("k")
	for _, tt := range []struct {
		keys map[string]string
		want string
	}{
		{map[string]string{good: "gold"}, `api_keys: plan "gold": no such plan`},
		{map[string]string{"sk_live_LEAKCANARY": "free"}, "api_keys: a key is not a lower-case hex SHA-256"},
		{map[string]string{good[:63] + "g": "free"}, "api_keys: a key is not a lower-case hex SHA-256"},
		{map[string]string{good + "0": "free"}, "api_keys: a key is not a lower-case hex SHA-256"},
		// Upper-case hex: the Worker's map, and the map before the table,
		// never matched it; the table must not either, nor hold one sum
		// twice with two plans (map order picking which one a key gets).
		{map[string]string{strings.ToUpper(good): "free"}, "api_keys: a key is not a lower-case hex SHA-256"},
		{map[string]string{good: "free", strings.ToUpper(good): "free"}, "api_keys: a key is not a lower-case hex SHA-256"},
	} {
		if _, err := newKeyTable(tt.keys, plans); err == nil || err.Error() != tt.want {
			t.Errorf("newKeyTable(%v) = %v, want %s", tt.keys, err, tt.want)
		}
	}
}
