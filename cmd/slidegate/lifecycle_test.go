package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/slidegate/slidegate/kvstore"
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

// deadEndpoint is a TCP listener on 127.0.0.1 that takes connections and
// never answers, as a frozen DynamoDB endpoint does; it returns its URL.
func deadEndpoint(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	conns := make(chan net.Conn, 64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			select {
			case conns <- c:
			default:
				c.Close()
			}
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		for {
			select {
			case c := <-conns:
				c.Close()
			default:
				return
			}
		}
	})
	return "http://" + ln.Addr().String()
}

// TestServeCreateTableBounded: serve --create-table against an endpoint
// that never answers stops with an error naming --create-table and the
// table, as the table check does for serve without it. It waited for
// ever, printing nothing, until it was killed.
func TestServeCreateTableBounded(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "") // loopback: NewClient's local credentials
	defer func(d time.Duration) { tableCreateTimeout = d }(tableCreateTimeout)
	tableCreateTimeout = 100 * time.Millisecond
	endpoint := deadEndpoint(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--listen", "127.0.0.1:0", "--store", "dynamodb", "--table", "slidegate-new",
			"--endpoint", endpoint, "--create-table"}, io.Discard, io.Discard)
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "--create-table") || !strings.Contains(err.Error(), `"slidegate-new"`) {
			t.Errorf("serve = %v, want an error naming --create-table and the table", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve --create-table still waiting on an endpoint that never answers")
	}
}

// heldStore is a store whose every call waits until release is closed
// (or its context ends) and then fails, each call first said on called: a
// store that takes as long as the test wants to fail.
type heldStore struct{ called, release chan struct{} }

var errHeld = errors.New("heldStore: failed after the wait")

func (s heldStore) wait(ctx context.Context) error {
	s.called <- struct{}{}
	select {
	case <-s.release:
	case <-ctx.Done():
	}
	return errHeld
}

func (s heldStore) Load(ctx context.Context, _ string, _ []kvstore.Slot, _ []int64) error {
	return s.wait(ctx)
}

func (s heldStore) Add(ctx context.Context, _ string, _ []kvstore.Slot, _ []int64) error {
	return s.wait(ctx)
}

// TestServeSlowStoreOutlastsClientTimeout: --client-timeout bounds the
// client's silences, not the time slidegate takes to decide. A store that
// takes 8/5 of the bound to fail (on the clock of the client's deadlines,
// frontOnClock; store_timeout is longer) still gets the client its answer
// per on_store_error (the 503 under deny, the check API's store_error
// under allow), marked Slidegate-Store. The answer was lost instead: the
// write deadline was set when the request came, and had passed when the
// answer went out, so the client saw its connection closed. The store
// fails when the test has moved the clock, not after a store_timeout in
// real time shorter than a wait for the answer in real time, which only a
// machine fast enough kept in that order.
func TestServeSlowStoreOutlastsClientTimeout(t *testing.T) {
	tests := []struct {
		policy, request, method string
		status                  int
		mark                    string
	}{
		{"deny", "GET /x HTTP/1.1\r\nHost: front.test\r\n\r\n", "GET", http.StatusServiceUnavailable, "error-denied"},
		{"allow", "POST /v1/check HTTP/1.1\r\nHost: front.test\r\nContent-Length: 11\r\n\r\n{\"key\":\"k\"}", "POST", http.StatusOK, "error-allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.policy, func(t *testing.T) {
			cfg := filepath.Join(t.TempDir(), "config.json")
			doc := `{"store_timeout": "30s", "on_store_error": "` + tt.policy + `"}`
			if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
				t.Fatal(err)
			}
			store := heldStore{called: make(chan struct{}, 16), release: make(chan struct{})}
			c := frontOnClockWith(t, http.NotFoundHandler(), cfg, store).dial(t)
			c.send(tt.request)
			select {
			case <-store.called:
			case <-time.After(10 * time.Second):
				t.Fatal("no call to the store after 10 s")
			}
			c.silence(clientTimeout * 8 / 5) // the client waits for the answer
			close(store.release)
			res, err := http.ReadResponse(c.r, &http.Request{Method: tt.method})
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			res.Body.Close()
			if res.StatusCode != tt.status || res.Header.Get("Slidegate-Store") != tt.mark {
				t.Errorf("answer %d, Slidegate-Store %q; want %d, %q", res.StatusCode, res.Header.Get("Slidegate-Store"), tt.status, tt.mark)
			}
		})
	}
}
