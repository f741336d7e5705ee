package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestHashKeyUnicodeSpace: hash-key hashes a key as the pre-filter and
// the check API count it, without the Unicode white space around it that
// they drop (e450851, 4928531): the hash of "k\u00a0" (a key copied from
// a page) matched no request, and its client got the default plan.
func TestHashKeyUnicodeSpace(t *testing.T) {
	for _, tt := range []struct{ arg, stdin, key string }{
		{arg: "k\u00a0", key: "k"},
		{arg: "\u3000Bearer abc\u2028", key: "bearer abc"},
		{arg: "k\xa0", key: "k"}, // a Latin-1 no-break space
		{arg: "-", stdin: "k\u00a0\n", key: "k"},
	} {
		t.Run(fmt.Sprintf("%q", tt.arg+tt.stdin), func(t *testing.T) {
			var out, errOut strings.Builder
			if err := hashKey([]string{tt.arg}, strings.NewReader(tt.stdin), &out, &errOut); err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256([]byte(tt.key))
			if got, want := out.String(), hex.EncodeToString(sum[:])+"\n"; got != want {
				t.Errorf("stdout %q, want %q, the hash of %q", got, want, tt.key)
			}
			if !strings.Contains(errOut.String(), "white space") {
				t.Errorf("stderr %q, want a warning about white space", errOut.String())
			}
		})
	}
	var out, errOut strings.Builder
	if err := hashKey([]string{"\u00a0\u2003"}, strings.NewReader(""), &out, &errOut); !errors.Is(err, errUsage) {
		t.Errorf("a KEY of only white space: error %v, want a usage error; stdout %q", err, out.String())
	}
}
