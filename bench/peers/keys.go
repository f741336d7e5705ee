package peers

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
)

// Keys returns n distinct identities shaped like the ones slidegate's HTTP
// layer passes to the limiter: "k:" and the SHA-256 of an API key in hex.
func Keys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		sum := sha256.Sum256([]byte("api-key-" + strconv.Itoa(i)))
		keys[i] = "k:" + hex.EncodeToString(sum[:])
	}
	return keys
}

// Picker chooses key indices in [0, n) with a xorshift generator: a few
// register operations, so key choice costs next to nothing and is the same
// for every peer. The zero value is not usable; call NewPicker. A Picker is
// not safe for concurrent use: give each goroutine its own.
type Picker struct {
	x, n uint64
}

// NewPicker returns a Picker over [0, n) whose sequence is fixed by seed.
// n must be in [1, 2³²).
func NewPicker(seed uint64, n int) Picker {
	// splitmix64 spreads small, consecutive seeds; xorshift needs x != 0.
	x := seed + 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	x ^= x >> 31
	if x == 0 {
		x = 1
	}
	return Picker{x: x, n: uint64(n)}
}

// Next returns the next index.
func (p *Picker) Next() int {
	p.x ^= p.x << 13
	p.x ^= p.x >> 7
	p.x ^= p.x << 17
	// Lemire's multiply-shift maps the top 32 bits onto [0, n) without a
	// division.
	return int((p.x >> 32) * p.n >> 32)
}
