package httpapi

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"
)

// TestProxyUpgradeOriginGone: an upgraded connection (a WebSocket) whose
// origin closed its side, and which then refuses the client's next bytes,
// ends: the proxy's write to the origin fails, and ReverseProxy closes
// both connections. The origin's end reaches the client as a half-close
// first (ReverseProxy waits for the other direction), and a client that
// keeps sending (a heartbeat, a message crossing the origin's close) makes
// the proxy's write to the gone origin fail with EPIPE or ECONNRESET. A
// wrapper that held such a write until the connection was closed
// (d9d9153, reverted) held it for ever: ReverseProxy closes the
// connection only once that write returns, so the handler, its
// goroutines and both sockets stayed, one set per such connection.
func TestProxyUpgradeOriginGone(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		if _, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
			_, _ = io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
		}
		c.Close() // the origin goes: what comes after is refused
	}()
	p := NewProxy(&url.URL{Scheme: "http", Host: ln.Addr().String()}, nil, nil)
	done := make(chan struct{})
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(done)
		p.ServeHTTP(w, r)
	}))
	defer front.Close()
	c, err := net.Dial("tcp", front.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET /socket HTTP/1.1\r\nHost: slidegate.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err != nil || res.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("answer %v, %v; want the origin's 101", res, err)
	}
	// The origin's close comes through as the end of what the client reads.
	if _, err := io.Copy(io.Discard, br); err != nil {
		t.Fatalf("reading to the origin's end: %v", err)
	}
	// The client sends on until the proxy has closed its connection: the
	// first bytes reach the origin's closed socket, which resets the
	// connection; the proxy's next write to it fails.
	go func() {
		chunk := make([]byte, 1024)
		for {
			if _, err := c.Write(chunk); err != nil {
				return
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second): // a bound on a failure only
		t.Fatal("the proxy still holds the upgraded connection of an origin that has gone")
	}
}
