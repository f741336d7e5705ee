package main

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate/httpapi"
	"github.com/slidegate/slidegate/internal/testenv"
)

// halfCloseOrigin takes `Upgrade: tcp` (as Docker's attach and exec do):
// it answers 101, reads what the client sends until the client ends its
// side (a half-close), and only then answers with the count of bytes it
// read, and closes.
func halfCloseOrigin(t *testing.T) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("origin hijack: %v", err)
			return
		}
		defer c.Close()
		_, _ = rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n")
		_ = rw.Flush()
		b, err := io.ReadAll(rw)
		if err != nil {
			return
		}
		_, _ = fmt.Fprintf(rw, "read %d bytes\n", len(b))
		_ = rw.Flush()
	})
}

// TestServeUpgradeHalfClose: a client of an upgraded connection that
// ends its side once it has sent everything (shutdown for writing, as
// Docker's client does when its standard input ends) still gets the
// origin's answer to it: the half-close reaches the origin as one, and
// the connection stays open the other way until the origin ends it. With
// --origin-timeout the connection to the origin was wrapped in a type
// without CloseWrite, so ReverseProxy could not pass the half-close on:
// it closed both connections at once, and the client got nothing.
func TestServeUpgradeHalfClose(t *testing.T) {
	for _, d := range []string{"1m", "0"} {
		t.Run(d, func(t *testing.T) {
			o := frontOrigin(t, halfCloseOrigin(t), "--origin-timeout", d)
			w := dial(t, o)
			w.send("GET /attach HTTP/1.1\r\nHost: front.test\r\nX-API-Key: " + bigKey + "\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n")
			res, err := http.ReadResponse(w.r, &http.Request{Method: "GET"})
			if err != nil {
				t.Fatal(err)
			}
			if res.StatusCode != http.StatusSwitchingProtocols {
				t.Fatalf("status %d", res.StatusCode)
			}
			w.send("input")
			if err := w.c.(*net.TCPConn).CloseWrite(); err != nil {
				t.Fatal(err)
			}
			if got, err := io.ReadAll(w.r); string(got) != "read 5 bytes\n" || err != nil {
				t.Errorf("after the half-close the client read %q, %v; want the origin's answer %q", got, err, "read 5 bytes\n")
			}
		})
	}
}

// frontOrigin starts `slidegate serve` in process in front of origin,
// with the flags given, and returns the host:port it listens on.
func frontOrigin(t *testing.T, origin http.Handler, flags ...string) string {
	t.Helper()
	o := httptest.NewServer(origin)
	t.Cleanup(o.Close)
	base, _ := serveInProcess(t, append([]string{"--config", operatorConfig(t, ""), "--origin", o.URL}, flags...)...)
	return strings.TrimPrefix(base, "http://")
}

// TestOriginH2StopsReadingUpload: an HTTP/2 origin (https, the protocol
// Go's transport takes when the origin offers it) whose handler stops
// taking a request's body gets the client the 504 of --origin-timeout,
// as an HTTP/1 origin does. The bound was on each write to the
// connection, which never waits here: HTTP/2's flow control holds the
// upload once the origin's window is full, and the client, its
// connection and the stream waited for ever. A client-side bound of 10 s
// stands for the failure; no timing is asserted.
func TestOriginH2StopsReadingUpload(t *testing.T) {
	release := make(chan struct{})
	var protos testenv.Buffer
	o := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(&protos, r.Proto)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	o.EnableHTTP2 = true
	o.StartTLS()
	t.Cleanup(o.Close)
	t.Cleanup(func() { close(release) }) // first: lets a held request end
	u, err := url.Parse(o.URL)
	if err != nil {
		t.Fatal(err)
	}
	var logs testenv.Buffer
	p := httpapi.NewProxy(u, slog.New(slog.NewJSONHandler(&logs, nil)), nil)
	p.Transport.(*http.Transport).TLSClientConfig = o.Client().Transport.(*http.Transport).TLSClientConfig
	boundOrigin(p, 200*time.Millisecond)
	r := httptest.NewRequest("POST", "http://front.test/upload", io.LimitReader(zeros{}, 64<<20))
	r.ContentLength = 64 << 20
	w := httptest.NewRecorder()
	done := make(chan struct{})
	go func() { defer close(done); p.ServeHTTP(w, r) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("no answer in 10 s to an upload the %s origin stopped taking (--origin-timeout 200ms)", protos.String())
	}
	if protos.String() != "HTTP/2.0" {
		t.Errorf("the origin saw %q, want HTTP/2.0", protos.String())
	}
	res := w.Result()
	timedOut(t, res, w.Body.String())
	if got := logs.String(); !strings.Contains(got, `"msg":"origin error"`) || !strings.Contains(got, `"status":504`) {
		t.Errorf("log %s, want an origin error with status 504", got)
	}
}
