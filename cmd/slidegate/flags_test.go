package main

import (
	"context"
	"errors"
	"io"
	"testing"
)

// TestServeFlagEdges: --endpoint without --store dynamodb is refused (the
// operator meant DynamoDB and would have got a memory store, counting per
// process), and --max-identities 0, documented as no bound, is taken.
func TestServeFlagEdges(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		usage bool
	}{
		{[]string{"serve", "--listen", "127.0.0.1:0", "--endpoint", "http://127.0.0.1:4567"}, true},
		{[]string{"serve", "--listen", "127.0.0.1:0", "--store", "memory", "--endpoint", "http://127.0.0.1:4567"}, true},
		{[]string{"serve", "--listen", "127.0.0.1:0", "--max-identities", "0"}, false},
	} {
		// Cancelled: a serve that starts returns at once, with no error.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		err := run(ctx, tc.args, io.Discard, io.Discard)
		if got := errors.Is(err, errUsage); got != tc.usage || !tc.usage && err != nil {
			t.Errorf("run(%q) = %v; want a usage error %v, else nil", tc.args, err, tc.usage)
		}
	}
}
