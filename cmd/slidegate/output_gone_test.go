package main

import (
	"context"
	"errors"
	"io"
	"syscall"
	"testing"
)

// goneWriter is a standard output nobody reads any more: with SIGPIPE
// ignored (9e62cca), a write to it fails with EPIPE.
type goneWriter struct{}

func (goneWriter) Write([]byte) (int, error) { return 0, syscall.EPIPE }

// TestCommandOutputGone: hash-key and check-config, whose output is their
// whole point, fail when it cannot be written. With SIGPIPE ignored,
// `slidegate hash-key KEY | consumer` whose consumer had exited (or a full
// disk under > file) printed nothing and exited 0, where SIGPIPE had ended
// it with a failure a script's pipefail saw: a script writing api_keys
// took the missing hash for success.
func TestCommandOutputGone(t *testing.T) {
	for _, args := range [][]string{
		{"hash-key", "k"},
		{"check-config", "../../examples/config.json"},
	} {
		t.Run(args[0], func(t *testing.T) {
			if err := run(context.Background(), args, goneWriter{}, io.Discard); !errors.Is(err, syscall.EPIPE) {
				t.Errorf("run(%q) with its output gone = %v, want EPIPE", args, err)
			}
		})
	}
}
