package main

import (
	"bufio"
	"context"
	"hash/crc32"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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

// slowDynamoDB is a DynamoDB endpoint on 127.0.0.1 that answers reads (the
// table check) with no item and holds every write until its client gives
// up; it returns its URL.
func slowDynamoDB(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if strings.HasSuffix(r.Header.Get("X-Amz-Target"), ".UpdateItem") {
			<-r.Context().Done()
			return
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.Header().Set("X-Amz-Crc32", strconv.FormatUint(uint64(crc32.ChecksumIEEE([]byte("{}"))), 10))
		_, _ = io.WriteString(w, "{}")
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestServeSlowStoreOutlastsClientTimeout: --client-timeout bounds the
// client's silences, not the time slidegate takes to decide. With a
// store_timeout longer than it, a store that does not answer still gets
// the client its answer per on_store_error (the 503 under deny, the check
// API's store_error under allow), marked Slidegate-Store. The answer was
// lost instead: the write deadline was set when the request came, and
// had passed when the answer went out, so the client saw its connection
// closed.
func TestServeSlowStoreOutlastsClientTimeout(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "") // loopback: NewClient's local credentials
	endpoint := slowDynamoDB(t)
	origin := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(origin.Close)
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
			doc := `{"store_timeout": "300ms", "on_store_error": "` + tt.policy + `"}`
			if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
				t.Fatal(err)
			}
			base, _ := serveInProcess(t, "--config", cfg, "--origin", origin.URL, "--client-timeout", "100ms",
				"--store", "dynamodb", "--table", "t", "--endpoint", endpoint)
			w := dial(t, strings.TrimPrefix(base, "http://"))
			w.send(tt.request)
			res, err := http.ReadResponse(w.r, &http.Request{Method: tt.method})
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
