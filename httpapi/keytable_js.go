//go:build js

package httpapi

import "crypto/sha256"

// keyTable holds the configured keys (api_keys) by the hex SHA-256 of the
// key, each with its plan and its storage identity. The Worker keeps a
// map: its Go instance serves one request, so the host's table
// (keytable.go), whose records keep a key's lookup to two cache lines
// over thousands of requests, would only cost the bundle bytes.
type keyTable map[string]keyEntry

type keyEntry struct {
	// Not comparable, so that the Worker's bundle carries no equality
	// function for it (docs/edge.md, "Size").
	_ [0]func()

	plan *plan
	id   string
}

// newKeyTable returns the table of keys, which map lower-case hex hashes
// (validated: config's api_keys) to the names of plans. It never fails:
// the Worker's configuration was validated once per isolate, and a check
// of what validation guarantees would cost the bundle bytes.
func newKeyTable(keys map[string]string, plans map[string]*plan) (keyTable, error) {
	t := make(keyTable, len(keys))
	for hash, name := range keys {
		t[hash] = keyEntry{plan: plans[name], id: keyPrefix + hash}
	}
	return t, nil
}

// find returns the identity and the plan of the configured key whose
// SHA-256 is sum, and whether there is one.
func (t keyTable) find(sum *[sha256.Size]byte) (string, *plan, bool) {
	var hash [2 * sha256.Size]byte
	hexSum(hash[:], sum)
	k, ok := t[string(hash[:])]
	return k.id, k.plan, ok
}
