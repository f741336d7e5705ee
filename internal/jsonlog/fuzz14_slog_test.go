package jsonlog_test

import (
	"errors"
	"testing"
	"time"
)

// FuzzLikeSlog: whatever strings a record carries (a client's path and
// method, an error's text), jsonlog writes one line of JSON with the
// members slog's JSONHandler writes for it.
func FuzzLikeSlog(f *testing.F) {
	f.Add("denied", "path", "/v1/<x>&\u2028\n", int64(-3), "\xff\x00\"\\", true)
	f.Add("", "k", "", int64(0), "", false)
	f.Fuzz(func(t *testing.T, msg, key, s string, n int64, e string, b bool) {
		if key == "" {
			return // slog drops an attribute of an empty key and value; slidegate names every one
		}
		likeSlog(t, msg, []any{key, s, "n", n, "d", time.Duration(n), "error", errors.New(e), "b", b, "nil", nil, key})
	})
}
