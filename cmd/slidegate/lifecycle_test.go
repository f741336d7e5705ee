package main

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServeShutdownOutputGone: `slidegate serve ... 2>&1 | tee serve.log`
// and Ctrl-C. The terminal sends SIGINT to the whole pipeline, so tee
// ends too, and serve's output is a pipe nobody reads. serve must still
// drain: the request in flight at the origin gets its answer and serve
// exits 0. It died instead, by SIGPIPE, at its "shutting down" line
// (Go ends a program whose write to standard output or error meets a
// broken pipe), cutting the request.
func TestServeShutdownOutputGone(t *testing.T) {
	origin, arrived, release := holdingOrigin(t)
	out, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary(t), "serve", "--listen", "127.0.0.1:0", "--config", operatorConfig(t, ""), "--origin", origin.URL)
	cmd.Stdout, cmd.Stderr = w, w // 2>&1 |
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	done := make(chan struct{})
	var exit error
	go func() { exit = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("serve ended: %v", exit)
		}
	})
	var addr string
	sc := bufio.NewScanner(out)
	for addr == "" && sc.Scan() {
		if m := listening.FindStringSubmatch(sc.Text()); m != nil {
			addr = strings.TrimPrefix(m[1], "http://")
		}
	}
	if addr == "" {
		t.Fatalf("no address printed: %v", sc.Err())
	}
	busy := dial(t, addr)
	busy.send("GET /slow HTTP/1.1\r\nHost: front.test\r\nX-API-Key: " + bigKey + "\r\n\r\n")
	awaitArrival(t, arrived)

	out.Close() // the reader of the pipeline ended
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	// The listener closes once serve has printed "shutting down" and
	// begun the drain (or died).
	awaitRefused(t, addr)
	close(release)
	if res, body := busy.response("GET"); res.StatusCode != 200 || body != "answer of /slow" {
		t.Errorf("in-flight request: %d %q, want 200 from the origin", res.StatusCode, body)
	}
	select {
	case <-done:
		if exit != nil {
			t.Errorf("exit: %v, want status 0 after the drain", exit)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not exit")
	}
}
