// Package testenv is what slidegate's integration harnesses share: finding
// the repository and its pinned npm tools, the rule that a missing real
// component fails under CI and skips elsewhere, free loopback ports, and a
// bounded log buffer for a child process's output, and gzip for origins
// that compress.
package testenv

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/slidegate/slidegate/window"
)

// ErrMissing is wrapped by Bin when a tool is not installed.
var ErrMissing = errors.New("testenv: not installed (run npm ci at the repository root)")

// Root returns the repository root: the nearest directory at or above the
// working directory that holds go.mod and package.json (tests run in their
// package's directory).
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("testenv: %w", err)
	}
	for {
		if isFile(filepath.Join(dir, "go.mod")) && isFile(filepath.Join(dir, "package.json")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("testenv: no repository root (go.mod and package.json) above the working directory")
		}
		dir = parent
	}
}

// Bin returns the path of the pinned npm tool name
// (node_modules/.bin/name at the repository root).
func Bin(name string) (string, error) {
	root, err := Root()
	if err != nil {
		return "", err
	}
	p := filepath.Join(root, "node_modules", ".bin", name)
	if !isFile(p) {
		return "", fmt.Errorf("%s: %w", name, ErrMissing)
	}
	return p, nil
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// TB is the part of testing.TB that Require and Gunzip use.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Skipf(format string, args ...any)
}

// Require reports a real component that could not be had: a failure when
// CI=true (CI must run every integration test), a skip with the reason
// otherwise. A nil err does nothing.
func Require(t TB, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%v (CI=true: integration tests must run, not skip)", err)
		return
	}
	t.Skipf("%v; skipping outside CI", err)
}

// FreePort returns a loopback TCP port that is free now.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("testenv: free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Buffer keeps the last Max bytes written to it (all of them when Max is
// zero). It is safe for concurrent use, so a process's stdout and stderr
// and the test can share one.
type Buffer struct {
	Max int
	mu  sync.Mutex
	buf []byte
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if b.Max > 0 && len(b.buf) > b.Max {
		b.buf = append(b.buf[:0], b.buf[len(b.buf)-b.Max:]...)
	}
	return len(p), nil
}

// String returns what the buffer holds.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// Gzip returns s gzip-compressed, as an origin behind a compressing
// middleware sends it. Writing to memory cannot fail.
func Gzip(s string) []byte {
	var b bytes.Buffer
	z := gzip.NewWriter(&b)
	_, _ = z.Write([]byte(s))
	_ = z.Close()
	return b.Bytes()
}

// FarWindow returns, of the windows of 24 to 30 whole hours, the one whose
// next bucket boundary (buckets are aligned to the Unix epoch) is farthest
// from now: at least 3 hours away, so that a test against a server that
// reads the real clock sees no bucket roll over, whenever it runs.
func FarWindow(now time.Time) time.Duration {
	best, left := time.Duration(0), time.Duration(0)
	for w := 24 * time.Hour; w <= 30*time.Hour; w += time.Hour {
		if d := window.Start(window.Index(now, w)+1, w).Sub(now); d > left {
			best, left = w, d
		}
	}
	return best
}

// Gunzip returns the content of the gzip stream b, failing tb when b is
// not one (an answer labelled gzip whose body is not, or is cut short).
func Gunzip(tb TB, b []byte) []byte {
	tb.Helper()
	z, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		tb.Fatalf("testenv: gzip body (%d bytes, %.40q): %v", len(b), b, err)
	}
	out, err := io.ReadAll(z)
	if err != nil {
		tb.Fatalf("testenv: gzip body (%d bytes): %v", len(b), err)
	}
	return out
}
