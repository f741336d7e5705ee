package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slidegate/slidegate/internal/testenv"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// built is the slidegate binary, built once for the tests that run it.
var built struct {
	once      sync.Once
	dir, path string
	err       error
}

// binary returns the path of the slidegate binary, built on first use; in
// -short mode the test is skipped instead.
func binary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	built.once.Do(func() {
		built.dir, built.err = os.MkdirTemp("", "slidegate-test-")
		if built.err != nil {
			return
		}
		built.path = filepath.Join(built.dir, "slidegate")
		if out, err := exec.Command("go", "build", "-o", built.path, ".").CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.path
}

// child is a running `slidegate serve`.
type child struct {
	cmd            *exec.Cmd
	base           string // http://127.0.0.1:port
	stdout, stderr *testenv.Buffer
	done           chan struct{} // closed when it has exited
	err            error         // cmd.Wait's, once done
}

// startBinary runs the binary's `serve --listen 127.0.0.1:0 args...` and
// returns once it listens; the test's end kills it if it still runs.
func startBinary(t *testing.T, args ...string) *child {
	t.Helper()
	return startCmd(t, exec.Command(binary(t), append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...))
}

// startCmd starts cmd, a command that runs `slidegate serve` with
// --listen 127.0.0.1:0, as startBinary does.
func startCmd(t *testing.T, cmd *exec.Cmd) *child {
	t.Helper()
	c := &child{cmd: cmd, stdout: &testenv.Buffer{}, stderr: &testenv.Buffer{}, done: make(chan struct{})}
	c.cmd.Stdout, c.cmd.Stderr = c.stdout, c.stderr
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		c.err = c.cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(func() {
		select {
		case <-c.done:
		default:
			_ = c.cmd.Process.Kill()
			<-c.done
		}
	})
	deadline := time.After(15 * time.Second)
	for {
		if m := listening.FindStringSubmatch(c.stdout.String()); m != nil {
			c.base = m[1]
			return c
		}
		select {
		case <-c.done:
			t.Fatalf("slidegate exited: %v: %s", c.err, c.stderr.String())
		case <-deadline:
			t.Fatalf("slidegate printed no address: %q", c.stdout.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// signal sends sig to the process.
func (c *child) signal(t *testing.T, sig os.Signal) {
	t.Helper()
	if err := c.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// wait returns how the process ended, failing the test if it has not
// within 15 s (more than serve's shutdown grace).
func (c *child) wait(t *testing.T) error {
	t.Helper()
	select {
	case <-c.done:
		return c.err
	case <-time.After(15 * time.Second):
		t.Fatalf("slidegate did not exit; output %q", c.stdout.String())
		return nil
	}
}

// waitOutput waits (bounded) until the process has printed s.
func (c *child) waitOutput(t *testing.T, s string) {
	t.Helper()
	waitPrinted(t, c.stdout, s)
}

// waitPrinted waits (bounded) until out, a process's standard output or
// error, holds s.
func waitPrinted(t *testing.T, out *testenv.Buffer, s string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(out.String(), s); {
		if time.Now().After(deadline) {
			t.Fatalf("slidegate did not print %q: %q", s, out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
