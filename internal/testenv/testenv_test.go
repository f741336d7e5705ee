package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/slidegate/slidegate/window"
)

type fakeTB struct{ fatal, skip string }

func (f *fakeTB) Helper()                        {}
func (f *fakeTB) Fatalf(format string, a ...any) { f.fatal = fmt.Sprintf(format, a...) }
func (f *fakeTB) Skipf(format string, a ...any)  { f.skip = fmt.Sprintf(format, a...) }

func TestRequire(t *testing.T) {
	missing := fmt.Errorf("wrangler: %w", ErrMissing)
	for _, tc := range []struct {
		ci               string
		err              error
		wantFail, wantSk bool
	}{
		{"true", missing, true, false},
		{"", missing, false, true},
		{"false", missing, false, true},
		{"true", nil, false, false},
	} {
		t.Run(fmt.Sprintf("CI=%q/err=%v", tc.ci, tc.err != nil), func(t *testing.T) {
			t.Setenv("CI", tc.ci)
			var f fakeTB
			Require(&f, tc.err)
			if (f.fatal != "") != tc.wantFail || (f.skip != "") != tc.wantSk {
				t.Errorf("fatal=%q skip=%q, want fail=%v skip=%v", f.fatal, f.skip, tc.wantFail, tc.wantSk)
			}
		})
	}
}

func TestBin(t *testing.T) {
	if _, err := Bin("no-such-tool-here"); !errors.Is(err, ErrMissing) {
		t.Errorf("Bin(missing) = %v, want ErrMissing", err)
	}
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "internal", "testenv", "testenv.go")); err != nil {
		t.Errorf("Root() = %q does not hold this package: %v", root, err)
	}
}

func TestBufferKeepsTheTail(t *testing.T) {
	b := Buffer{Max: 5}
	for _, s := range []string{"abc", "def", "gh"} {
		if n, err := b.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", s, n, err)
		}
	}
	if got, want := b.String(), "defgh"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

// TestFarWindow: whenever a run starts (every 10 minutes of a week here),
// its window's bucket ends at least 3 hours later.
func TestFarWindow(t *testing.T) {
	start := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	for now := start; now.Before(start.Add(7 * 24 * time.Hour)); now = now.Add(10 * time.Minute) {
		w := FarWindow(now)
		if left := window.Start(window.Index(now, w)+1, w).Sub(now); w < 24*time.Hour || w > 30*time.Hour || left < 3*time.Hour {
			t.Fatalf("at %v: window %v, its bucket ends in %v", now, w, left)
		}
	}
}
