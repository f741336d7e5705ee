package httpapi

import (
	"bufio"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// closeSignal is a connection that reports its Close.
type closeSignal struct {
	net.Conn
	closed chan struct{}
}

func (c *closeSignal) Close() error {
	select {
	case <-c.closed:
	default:
		close(c.closed)
	}
	return c.Conn.Close()
}

// TestProxyTLSOriginAnswersBeforeBody: an https origin that answers an
// upload before reading it and resets the connection, while the client's
// body is still coming (the transport is not writing), has its connection
// closed, and its answer passed on or a 502: Go's transport returns the
// first of the answer and the failed write of the body (README,
// golang/go#51109), so wanting the 413 alone failed about one run in
// twenty.
// crypto/tls's Close sends a close_notify alert when no write is in
// flight; written to a connection the origin reset, that write fails. A
// connection wrapper that held such failed writes until the connection
// was closed (d9d9153, reverted) held it in that very Close: the
// transport's reader stayed in it for ever, holding the connection's
// lock, and the writer after it.
func TestProxyTLSOriginAnswersBeforeBody(t *testing.T) {
	p, tr := rawTLSProxy(t, func(_ int, c net.Conn, tc *tls.Conn) {
		_, _ = io.WriteString(tc, "HTTP/1.1 413 Content Too Large\r\nConnection: close\r\nContent-Length: 9\r\n\r\ntoo large")
		// The upload unread, the kernel resets the connection (made
		// sure of here: the first part may have been read with the
		// header).
		_ = c.(*net.TCPConn).SetLinger(0)
	})
	conns := make(chan *closeSignal, 1)
	dial := tr.DialContext
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		cs := &closeSignal{Conn: c, closed: make(chan struct{})}
		conns <- cs
		return cs, nil
	}
	// The client sends a first part of its upload, then nothing until the
	// answer has come.
	pr, pw := io.Pipe()
	go func() { _, _ = pw.Write(make([]byte, 1024)) }()
	w := httptest.NewRecorder()
	p.ServeHTTP(w, httptest.NewRequest("POST", "http://slidegate.test/upload", pr))
	pw.Close()
	if w.Code != http.StatusRequestEntityTooLarge && w.Code != http.StatusBadGateway {
		t.Fatalf("%d %q, want the origin's 413 (or a 502)", w.Code, w.Body)
	}
	c := <-conns
	select {
	case <-c.closed:
	case <-time.After(10 * time.Second): // a bound on a failure only
		buf := make([]byte, 1<<20)
		t.Fatalf("the connection to the origin is still open\n%s", buf[:runtime.Stack(buf, true)])
	}
}

// writeSignal is a connection that reports each Write once watch is set.
type writeSignal struct {
	net.Conn
	watch  *atomic.Bool
	writes chan struct{}
}

func (c *writeSignal) Write(p []byte) (int, error) {
	if c.watch.Load() {
		select {
		case c.writes <- struct{}{}:
		default:
		}
	}
	return c.Conn.Write(p)
}

// TestProxyTLSIdleConnReset: an https origin that resets a kept-alive
// connection while it is idle (a balancer's idle timeout, a restart)
// leaves the proxy able to send the next request. The transport's reader
// sees the reset and closes the connection; crypto/tls's Close writes its
// close_notify alert, which fails. A wrapper that held that write until
// the connection was closed (d9d9153, reverted) held it for ever, since
// it was that Close that waited. The reader kept the
// connection's lock for ever, the connection stayed among the idle ones,
// and the next request, which asks an idle connection whether it is
// broken under the transport's idle lock, waited for ever, and every
// request to the origin after it.
func TestProxyTLSIdleConnReset(t *testing.T) {
	reset := make(chan struct{})
	p, tr := rawTLSProxy(t, func(n int, c net.Conn, tc *tls.Conn) {
		_, _ = io.WriteString(tc, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		if n == 0 {
			<-reset
			_ = c.(*net.TCPConn).SetLinger(0) // Close resets the connection
		}
	})
	var watch atomic.Bool
	writes := make(chan struct{}, 1)
	dial := tr.DialContext
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &writeSignal{Conn: c, watch: &watch, writes: writes}, nil
	}
	get := func() *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		p.ServeHTTP(w, httptest.NewRequest("GET", "http://slidegate.test/", nil))
		return w
	}
	if w := get(); w.Code != http.StatusOK {
		t.Fatalf("first request: %d %q", w.Code, w.Body)
	}
	// The connection is idle; the origin resets it, and the transport,
	// seeing that, closes it: crypto/tls writes its alert.
	watch.Store(true)
	close(reset)
	<-writes
	done := make(chan *httptest.ResponseRecorder)
	go func() { done <- get() }()
	select {
	case w := <-done:
		if w.Code != http.StatusOK {
			t.Fatalf("second request: %d %q, want the origin's 200", w.Code, w.Body)
		}
	case <-time.After(10 * time.Second): // a bound on a failure only
		buf := make([]byte, 1<<20)
		t.Fatalf("the request after an idle connection's reset did not end\n%s", buf[:runtime.Stack(buf, true)])
	}
}

// rawTLSProxy starts an https origin on a loopback port whose each
// connection is answer's, given the raw connection and the TLS one over
// it after the request's header was read, and returns a proxy (HTTP/1)
// to it, its transport set to trust the origin's certificate.
func rawTLSProxy(t *testing.T, answer func(n int, c net.Conn, tc *tls.Conn)) (*httputil.ReverseProxy, *http.Transport) {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for n := 0; ; n++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			tc := tls.Server(c, &tls.Config{Certificates: srv.TLS.Certificates})
			if _, err := http.ReadRequest(bufio.NewReader(tc)); err == nil {
				answer(n, c, tc)
			}
			c.Close()
		}
	}()
	p := NewProxy(&url.URL{Scheme: "https", Host: ln.Addr().String()}, nil, nil)
	tr := p.Transport.(*http.Transport)
	tr.TLSClientConfig = srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	tr.ForceAttemptHTTP2 = false
	return p, tr
}
