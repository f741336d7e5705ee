package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
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
