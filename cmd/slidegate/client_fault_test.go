package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// lineLog is a log writer that hands each line to the test as it is
// written, so a test can wait for a line rather than for time to pass.
type lineLog chan string

func (l lineLog) Write(p []byte) (int, error) {
	for line := range strings.SplitSeq(strings.TrimSuffix(string(p), "\n"), "\n") {
		l <- line
	}
	return len(p), nil
}

// next returns the next log line, failing the test after 10 s without
// one (a hang is the failure).
func (l lineLog) next(t *testing.T) map[string]any {
	t.Helper()
	select {
	case line := <-l:
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		return rec
	case <-time.After(10 * time.Second):
		t.Fatal("no log line after 10 s")
	}
	return nil
}

// frontOfReader starts `slidegate serve --client-timeout d` in front of an
// origin that reads each request's body and reports how the read ended on
// read, and returns the host:port it listens on and its log.
func frontOfReader(t *testing.T, d time.Duration) (addr string, logs lineLog, read <-chan error) {
	t.Helper()
	done := make(chan error, 1)
	o := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		done <- err
	}))
	t.Cleanup(o.Close)
	logs = make(lineLog, 16)
	base, _ := serveLogging(t, logs, "--config", operatorConfig(t, ""), "--origin", o.URL, "--client-timeout", d.String())
	return strings.TrimPrefix(base, "http://"), logs, done
}

// TestServeClientBodyFault: an admitted request whose client fails while
// its body is being proxied (it goes silent past --client-timeout, sends
// less than its Content-Length, or a malformed chunked body) is the
// client's fault: a 408 for the silence (RFC 9110 §15.5.9), a 400 for a
// body cut short or malformed, problem+json, the connection closed, and
// one INFO line that says the client failed, not an origin error. Before,
// ReverseProxy's error handler took it for the origin's: a 504 or 502
// ("the origin did not answer") and an ERROR "origin error" line per
// request, at the will of any client. The origin got part of the body;
// it reports what it read. No timing is asserted: the silent client's
// answer comes after --client-timeout, within the dial deadline (10 s).
func TestServeClientBodyFault(t *testing.T) {
	const key = "X-API-Key: " + bigKey + "\r\n"
	for _, tt := range []struct {
		name, request string
		closeWrite    bool // the client ends its side after the request
		status        int
		detail        string
	}{
		{"silent", "POST /upload HTTP/1.1\r\nHost: front.test\r\n" + key + "Content-Length: 100\r\n\r\nab", false, 408, "in time"},
		{"short", "POST /upload HTTP/1.1\r\nHost: front.test\r\n" + key + "Content-Length: 100\r\n\r\nab", true, 400, "cut short"},
		{"bad chunked", "POST /upload HTTP/1.1\r\nHost: front.test\r\n" + key + "Transfer-Encoding: chunked\r\n\r\n2\r\nab\r\nzz\r\n", false, 400, "malformed"},
		{"silent chunked", "POST /upload HTTP/1.1\r\nHost: front.test\r\n" + key + "Transfer-Encoding: chunked\r\n\r\n2\r\nab\r\n", false, 408, "in time"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			addr, logs, read := frontOfReader(t, clientTimeout)
			w := dial(t, addr)
			w.send(tt.request)
			if tt.closeWrite {
				if err := w.c.(*net.TCPConn).CloseWrite(); err != nil {
					t.Fatal(err)
				}
			}
			res, body := w.response("POST")
			if res.StatusCode != tt.status || res.Header.Get("Content-Type") != "application/problem+json" ||
				!strings.Contains(body, tt.detail) || strings.Contains(body, "origin") {
				t.Errorf("answer %d %s %s, want a %d problem saying %q", res.StatusCode, res.Header.Get("Content-Type"), body, tt.status, tt.detail)
			}
			if !res.Close {
				t.Error("the connection is kept open after a body that failed")
			}
			if got := res.Header.Get("X-RateLimit-Remaining"); got != "99999" {
				t.Errorf("X-RateLimit-Remaining %q, want 99999: the request stays counted", got)
			}
			rec := logs.next(t)
			if rec["level"] != "INFO" || !strings.Contains(rec["msg"].(string), "client") || rec["status"] != float64(tt.status) ||
				rec["method"] != "POST" || rec["path"] != "/upload" {
				t.Errorf("log %v, want an INFO line about the client with status %d", rec, tt.status)
			}
			if line, _ := json.Marshal(rec); bytes.Contains(line, []byte(bigKey)) {
				t.Errorf("log %s holds the raw key", line)
			}
			originLetGo(t, read, "reading the body")
		})
	}
}

// TestServeClientGoneMidUpload: a client that closes its connection in the
// middle of its upload is logged at INFO, as it was before (then as a
// client that went away, since the server cancels the request when its
// connection fails), not as an origin error.
func TestServeClientGoneMidUpload(t *testing.T) {
	addr, logs, read := frontOfReader(t, time.Hour)
	w := dial(t, addr)
	w.send("POST /upload HTTP/1.1\r\nHost: front.test\r\nX-API-Key: " + bigKey + "\r\nContent-Length: 100\r\n\r\nab")
	w.c.Close()
	if rec := logs.next(t); rec["level"] != "INFO" || !strings.Contains(rec["msg"].(string), "client") {
		t.Errorf("log %v, want an INFO line about the client", rec)
	}
	originLetGo(t, read, "reading the body")
}

// TestServeClientBodyFaultAfterAnswerBegan: when the origin's answer has
// begun (it answers as it reads, in full duplex) before the client's body
// fails, nothing can be said to the client: its answer is cut (a chunked
// one ends without its last chunk). Nothing is logged at ERROR: at most
// ReverseProxy's WARN line about the copy it stopped, when the transport
// closed the origin's connection before the server cancelled the request
// (else it logs nothing). Any line comes before the connection is closed.
func TestServeClientBodyFaultAfterAnswerBegan(t *testing.T) {
	read := make(chan error, 1)
	o := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).EnableFullDuplex()
		_, _ = io.ReadFull(r.Body, make([]byte, 2))
		_, _ = io.WriteString(w, "began ")
		_ = http.NewResponseController(w).Flush()
		_, err := io.ReadAll(r.Body)
		read <- err
	}))
	t.Cleanup(o.Close)
	logs := make(lineLog, 16)
	base, _ := serveLogging(t, logs, "--config", operatorConfig(t, ""), "--origin", o.URL, "--client-timeout", clientTimeout.String())
	w := dial(t, strings.TrimPrefix(base, "http://"))
	w.send("POST /upload HTTP/1.1\r\nHost: front.test\r\nX-API-Key: " + bigKey + "\r\nContent-Length: 100\r\n\r\nab")
	res, err := http.ReadResponse(w.r, &http.Request{Method: "POST"})
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK || string(body) != "began " || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("answer %d %q %v, want the origin's 200 cut after its first part", res.StatusCode, body, err)
	}
	for len(logs) > 0 {
		if line := <-logs; strings.Contains(line, `"level":"ERROR"`) {
			t.Errorf("logged %s", line)
		}
	}
	originLetGo(t, read, "reading the body")
}
