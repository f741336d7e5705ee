package main

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/slidegate/slidegate/internal/testenv"
)

// deafOrigin returns the address of an origin that takes connections and
// never reads from them: a hung application whose kernel still accepts
// (a full worker pool, a stopped process).
func deafOrigin(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				break
			}
			conns = append(conns, c)
		}
		for _, c := range conns {
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return ln.Addr().String()
}

// TestServeOriginStopsReadingUpload: an origin that stops taking a
// request's body (hung with the connection open) gets the client a 504
// once --origin-timeout passes with nothing taken, as a request without
// a body gets one when the answer does not begin in time. The bound
// started only once the whole request was written: an upload larger than
// the sockets hold (64 MiB here; a few MiB to a remote origin) was never
// written, and the client, its connection and the origin connection
// waited for ever, --client-timeout or not (the client was not silent:
// slidegate no longer read). The dial deadline (10 s) bounds the wait; no
// timing is asserted.
func TestServeOriginStopsReadingUpload(t *testing.T) {
	var logs testenv.Buffer
	base, _ := serveLogging(t, &logs, "--config", operatorConfig(t, ""), "--origin", "http://"+deafOrigin(t), "--origin-timeout", "200ms")
	for _, tt := range []struct{ name, framing string }{
		{"sized", fmt.Sprintf("Content-Length: %d\r\n", 64<<20)},
		{"chunked", "Transfer-Encoding: chunked\r\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := dial(t, strings.TrimPrefix(base, "http://"))
			w.send("POST /upload HTTP/1.1\r\nHost: front.test\r\nX-API-Key: " + bigKey + "\r\n" + tt.framing + "\r\n")
			go func() {
				chunk := []byte(strings.Repeat("z", 64<<10))
				if strings.HasPrefix(tt.framing, "Transfer") {
					chunk = []byte(fmt.Sprintf("%x\r\n%s\r\n", len(chunk), chunk))
				}
				for range 64 << 20 / (64 << 10) {
					if _, err := w.c.Write(chunk); err != nil {
						return // the answer came and the connection closed
					}
				}
			}()
			res, body := w.response("POST")
			timedOut(t, res, body)
		})
	}
	if got := logs.String(); strings.Count(got, `"msg":"origin error"`) != 2 || strings.Count(got, `"status":504`) != 2 {
		t.Errorf("log %s, want two origin errors with status 504", got)
	}
}

// TestServeOriginHandshakeBounded: an https origin that takes the
// connection and never answers the TLS handshake (a hung TLS terminator)
// gets the client a 504 once --origin-timeout has passed, not after the
// transport's own 10 s. The dial deadline (10 s) bounds the wait; no
// timing is asserted.
func TestServeOriginHandshakeBounded(t *testing.T) {
	base, _ := serveInProcess(t, "--config", operatorConfig(t, ""), "--origin", "https://"+deafOrigin(t), "--origin-timeout", "200ms")
	getTimedOut(t, base)
}

// getTimedOut sends a GET to serve at base and expects the 504 of an
// origin that did not answer in time.
func getTimedOut(t *testing.T, base string) {
	t.Helper()
	res, body := dial(t, strings.TrimPrefix(base, "http://")).get("/items", "X-API-Key: "+bigKey+"\r\n")
	timedOut(t, res, body)
}

// timedOut expects res and its body to be the 504 problem of an origin
// that did not answer in time.
func timedOut(t *testing.T, res *http.Response, body string) {
	t.Helper()
	if status, detail := problemOf(t, res, body); res.StatusCode != http.StatusGatewayTimeout || status != http.StatusGatewayTimeout || detail != "the origin did not answer in time" {
		t.Errorf("answer %d, problem %d %q; want the 504 of an origin that did not answer in time", res.StatusCode, status, detail)
	}
}

// TestServeOriginTimeoutHuge: an --origin-timeout far beyond any wait (a
// bound meant as none, up to the largest duration the flag takes) lets
// requests through.
func TestServeOriginTimeoutHuge(t *testing.T) {
	o := httptest.NewServer(http.HandlerFunc(uploadOrigin))
	t.Cleanup(o.Close)
	for _, d := range []string{"87600h", "2000000h", "2500000h", "2562047h"} {
		t.Run(d, func(t *testing.T) {
			base, _ := serveInProcess(t, "--config", operatorConfig(t, ""), "--origin", o.URL, "--origin-timeout", d)
			w := dial(t, strings.TrimPrefix(base, "http://"))
			for i := range 2 { // a new connection to the origin, then the same one
				w.send("POST /upload HTTP/1.1\r\nHost: front.test\r\nX-API-Key: " + bigKey + "\r\nContent-Length: 3\r\n\r\nabc")
				if res, body := w.response("POST"); res.StatusCode != http.StatusOK || !strings.Contains(body, `"length":3`) {
					t.Fatalf("request %d: %d %s", i+1, res.StatusCode, body)
				}
			}
		})
	}
}
