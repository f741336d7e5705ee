package httpapi

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"testing"
	"time"

	"github.com/slidegate/slidegate/internal/testenv"
)

// TestProxyOriginAnswersBeforeBody: an origin that refuses an upload
// before reading it (a 413 over its body limit, a 401 on the header) and
// closes the connection, as nginx and most frameworks do, gets its answer
// to the client, each time. The origin's kernel resets a connection closed
// with the upload unread, and the proxy's next write to it fails: Go's
// transport returned that write error when it came before the answer it
// had read, about one request in two, and the client got a 502 "the origin
// did not answer" with an ERROR line, for an answer the origin gave.
func TestProxyOriginAnswersBeforeBody(t *testing.T) {
	before := runtime.NumGoroutine()
	addr, stop, err := testenv.EarlyOrigin("HTTP/1.1 413 Content Too Large\r\nConnection: close\r\nContent-Length: 9\r\n\r\ntoo large")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	var logs bytes.Buffer
	p := NewProxy(&url.URL{Scheme: "http", Host: addr}, slog.New(slog.NewJSONHandler(&logs, nil)), nil)
	upload := make([]byte, 8<<20) // more than the sockets hold
	for i := range 20 {
		w := httptest.NewRecorder()
		p.ServeHTTP(w, httptest.NewRequest("POST", "http://slidegate.test/upload", bytes.NewReader(upload)))
		if w.Code != http.StatusRequestEntityTooLarge || w.Body.String() != "too large" {
			t.Fatalf("request %d: %d %q, want the origin's 413; log %s", i+1, w.Code, w.Body, logs.String())
		}
	}
	// An origin that resets the connection without an answer is still
	// the 502 of one that did not answer, not a wait.
	silent, stopSilent, err := testenv.EarlyOrigin("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stopSilent)
	q := NewProxy(&url.URL{Scheme: "http", Host: silent}, slog.New(slog.NewJSONHandler(&logs, nil)), nil)
	w := httptest.NewRecorder()
	q.ServeHTTP(w, httptest.NewRequest("POST", "http://slidegate.test/upload", bytes.NewReader(upload)))
	if w.Code != http.StatusBadGateway {
		t.Errorf("reset without an answer: %d %q, want the 502", w.Code, w.Body)
	}
	// No write is left waiting for a connection nobody closes.
	p.Transport.(*http.Transport).CloseIdleConnections()
	q.Transport.(*http.Transport).CloseIdleConnections()
	for deadline := time.Now().Add(10 * time.Second); runtime.NumGoroutine() > before+2; {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		runtime.Gosched()
	}
}
