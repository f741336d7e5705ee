package main

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slidegate/slidegate/kvstore/memstore"
)

// pipeListener hands the server one end of a net.Pipe per connection. A
// pipe holds no byte: each write waits until the client reads it, as a
// write waits on a socket whose buffers are full of answers the client did
// not read (a client that pipelines requests and reads nothing), without
// filling megabytes of buffers first.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	// wrote, if set before dial, is called by the server's end of the
	// pipe after each of its writes, in the server's goroutine.
	wrote func()
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	select {
	case <-l.done:
	default:
		close(l.done)
	}
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

// dial returns the client's end of a new connection, and the server's,
// which tells when the server closes it.
func (l *pipeListener) dial(t *testing.T) (net.Conn, *pipeConn) {
	t.Helper()
	client, server := net.Pipe()
	t.Cleanup(func() { client.Close() })
	s := &pipeConn{Conn: server, closed: make(chan struct{}), wrote: l.wrote}
	select {
	case l.conns <- s:
	case <-time.After(10 * time.Second):
		t.Fatal("the server accepted no connection in 10 s")
	}
	_ = client.SetDeadline(time.Now().Add(10 * time.Second))
	return client, s
}

// pipeConn is the server's end of a pipe.
type pipeConn struct {
	net.Conn
	once   sync.Once
	closed chan struct{}
	wrote  func()
}

func (c *pipeConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if c.wrote != nil {
		c.wrote()
	}
	return n, err
}

func (c *pipeConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "192.0.2.1:1234" }

// frontOnPipes starts serve's handler and server (--client-timeout
// clientTimeout) in front of an origin that reads the request's body and
// answers 204, on a pipeListener; the client's deadlines are read from
// now.
func frontOnPipes(t *testing.T, now func() time.Time) *pipeListener {
	t.Helper()
	o := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(o.Close)
	return frontOfOnPipes(t, now, o.URL, nil)
}

// frontOfOnPipes is frontOnPipes in front of the origin at originURL,
// through tr if not nil (serve's bounded transport if nil).
func frontOfOnPipes(t *testing.T, now func() time.Time, originURL string, tr http.RoundTripper) *pipeListener {
	t.Helper()
	u, err := parseOrigin(originURL)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := loadConfig(operatorConfig(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	b := &builder{origin: u, log: log, store: memstore.New(), local: memstore.New(),
		originTimeout: defaultOriginTimeout, clientTimeout: clientTimeout, now: now, transport: tr}
	h, err := b.build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln := newPipeListener()
	srv := frontServer(h, log, clientTimeout, now)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return ln
}

// TestServeServerAnswersBounded: the answers Go's server writes itself (a
// 400 for a malformed request, a 431 for a header too large, a 417 for an
// Expect it does not know, a 501 for a transfer coding it does not know)
// and its 100 Continue have --client-timeout to go out, as every other
// answer does. They were written with no deadline: the server clears the
// write deadline after each answer, and sets none before the next request.
// A client that pipelined requests and read none of their answers, until
// the socket's buffers were full, then sent one of those held its
// connection, a goroutine and a file descriptor for ever (with 100
// Continue, the request's handler too). The pipes make any unread answer such a wait; the client's clock is
// an hour behind the real one, so each deadline the server sets on it has
// passed already and a bounded write fails at once: the connection is
// closed, where the unbounded one hung (the pipe's 10 s deadline). The same
// requests from a client that reads get their answers.
func TestServeServerAnswersBounded(t *testing.T) {
	for _, tt := range []struct {
		name, request, status string
	}{
		{"malformed", "GET / HTTP/1.1\r\nHost: front.test\r\nno colon\r\n\r\n", "400"},
		{"header too large", "GET / HTTP/1.1\r\nHost: front.test\r\nX-Big: " + strings.Repeat("a", maxKeyBytes+1) + "\r\n\r\n", "431"},
		{"unknown expectation", "GET / HTTP/1.1\r\nHost: front.test\r\nExpect: later\r\n\r\n", "417"},
		{"unknown transfer coding", "POST / HTTP/1.1\r\nHost: front.test\r\nTransfer-Encoding: zstd\r\n\r\n", "501"},
		{"100 Continue, check API", "POST /v1/check HTTP/1.1\r\nHost: front.test\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n", "100"},
	} {
		t.Run(tt.name+", not read", func(t *testing.T) {
			behind := func() time.Time { return time.Now().Add(-time.Hour) }
			c, srv := frontOnPipes(t, behind).dial(t)
			go func() { _, _ = io.WriteString(c, tt.request) }() // the server may stop reading it
			select {
			case <-srv.closed:
			case <-time.After(10 * time.Second):
				t.Fatalf("the server still holds the connection after 10 s, its %s answer unread", tt.status)
			}
		})
		t.Run(tt.name+", read", func(t *testing.T) {
			// An hour ahead: however late the client reads, no bound has
			// passed (on the real clock, 500 ms of a loaded machine would
			// cut it).
			ahead := func() time.Time { return time.Now().Add(time.Hour) }
			c, _ := frontOnPipes(t, ahead).dial(t)
			go func() { _, _ = io.WriteString(c, tt.request) }()
			line, err := bufio.NewReader(c).ReadString('\n')
			if !strings.HasPrefix(line, "HTTP/1.1 "+tt.status+" ") {
				t.Fatalf("the client read %q (%v), want %q", line, err, tt.status)
			}
		})
	}
}

// TestServePipelinedServerAnswerBounded: the server's own answer to a
// request that came in the same read as the one before it (pipelined, as
// a client that sends requests without reading their answers sends them)
// is bounded too (by the idle timeout and --client-timeout, as the
// connection went idle before it was read). The server reads such a request from
// its buffer, not from the connection, and so does not call ConnState with
// StateActive for it: the bound set there was never set, and the 400 to
// the malformed request held the connection for ever. The client reads the
// first answer, the origin's 204, on a clock an hour ahead (no bound cuts
// it); once it is written, the clock is an hour behind, so a bound set for
// the 400 has passed already: the connection is closed at once, where the
// unbounded write hung.
func TestServePipelinedServerAnswerBounded(t *testing.T) {
	var behind atomic.Bool
	now := func() time.Time {
		if behind.Load() {
			return time.Now().Add(-time.Hour)
		}
		return time.Now().Add(time.Hour)
	}
	ln := frontOnPipes(t, now)
	ln.wrote = func() { behind.Store(true) }
	c, srv := ln.dial(t)
	go func() {
		_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: front.test\r\n\r\nGET / HTTP/1.1\r\nHost: front.test\r\nno colon\r\n\r\n")
	}()
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || res.StatusCode != http.StatusNoContent {
		t.Fatalf("the first request got %v (%v), want the origin's 204", res, err)
	}
	select {
	case <-srv.closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the server still holds the connection after 10 s, its 400 to the pipelined request unread")
	}
}

// TestServeLateContinueNotCut: a 100 Continue that goes out long after its
// request came has the bound from when it is written, not from when the
// request came: the wait was the origin's, not the client's. Here the
// origin does not answer the Expect (an HTTP/1.0 server, or one that
// ignores it): the proxy sends the body after its own wait for the
// origin's 100 Continue (a second), and the server writes its 100 Continue
// to the client then, as the proxy reads the body. The client's clock is
// an hour behind the real one when the request comes, and an hour ahead
// once the proxy has written the request's header to the origin (it reads
// the body only after, in the same goroutine; set when the origin read the
// header, the clock raced the proxy's second): a deadline set from the
// request's coming has passed, one set from the write has not.
func TestServeLateContinueNotCut(t *testing.T) {
	var ahead atomic.Bool
	now := func() time.Time {
		if ahead.Load() {
			return time.Now().Add(time.Hour)
		}
		return time.Now().Add(-time.Hour)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		r := bufio.NewReader(c)
		req, err := http.ReadRequest(r)
		if err != nil {
			t.Errorf("origin: %v", err)
			return
		}
		if _, err := io.ReadAll(req.Body); err != nil {
			t.Errorf("origin: reading the body: %v", err)
			return
		}
		_, _ = io.WriteString(c, "HTTP/1.1 204 No Content\r\n\r\n")
	}()
	tr := http.DefaultTransport.(*http.Transport).Clone() // as httpapi.NewProxy's
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return aheadOnWrite{c, &ahead}, nil
	}
	t.Cleanup(tr.CloseIdleConnections)
	c, _ := frontOfOnPipes(t, now, "http://"+ln.Addr().String(), tr).dial(t)
	if _, err := io.WriteString(c, "POST /upload HTTP/1.1\r\nHost: front.test\r\nX-API-Key: "+bigKey+"\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	res, err := http.ReadResponse(r, nil)
	if err != nil || res.StatusCode != http.StatusContinue {
		t.Fatalf("got %v (%v), want a 100 Continue", res, err)
	}
	if _, err := io.WriteString(c, "ok"); err != nil {
		t.Fatal(err)
	}
	if res, err = http.ReadResponse(r, nil); err != nil || res.StatusCode != http.StatusNoContent {
		t.Fatalf("got %v (%v), want the origin's 204", res, err)
	}
}

// aheadOnWrite is a connection to the origin that sets ahead once it has
// written.
type aheadOnWrite struct {
	net.Conn
	ahead *atomic.Bool
}

func (c aheadOnWrite) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.ahead.Store(true)
	return n, err
}

// TestServeKeepAliveServerAnswerAfterIdle: a client that keeps its
// connection open longer than --client-timeout (the server keeps it for
// IdleTimeout, 2 minutes) and then sends a request the server refuses
// itself gets the server's answer. The bound set as the connection went
// idle (for a pipelined request, TestServePipelinedServerAnswerBounded)
// was d from then: the request came in one read, which the server takes
// from its buffer with no StateActive, and its 400 met a deadline passed
// while the client was silent between requests, a wait counted by the
// idle timeout, not this bound. The connection was closed with no answer.
// Here the clock is an hour ahead for the first request, then, once its
// answer is written, clientTimeout and a second behind the real one: the
// client has been idle past the bound when the next request comes.
func TestServeKeepAliveServerAnswerAfterIdle(t *testing.T) {
	var idle atomic.Bool
	now := func() time.Time {
		if idle.Load() {
			return time.Now().Add(-clientTimeout - time.Second)
		}
		return time.Now().Add(time.Hour)
	}
	ln := frontOnPipes(t, now)
	ln.wrote = func() { idle.Store(true) }
	c, _ := ln.dial(t)
	go func() { _, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: front.test\r\n\r\n") }()
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err != nil || res.StatusCode != http.StatusNoContent {
		t.Fatalf("the first request got %v (%v), want the origin's 204", res, err)
	}
	go func() { _, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: front.test\r\nno colon\r\n\r\n") }()
	line, err := br.ReadString('\n')
	if !strings.HasPrefix(line, "HTTP/1.1 400 ") {
		t.Fatalf("the request after the idle time got %q (%v), want the server's 400", line, err)
	}
}

// TestServeFarClientTimeoutAnswersAfterIdle: a --client-timeout within the
// idle timeout of the largest duration the flag takes (2562047h47m16s,
// a bound meant as none) gives the server's own answers after an idle
// time a deadline ahead too. The idle timeout and it added overflowed to
// a deadline in the past, set as the connection went idle: the 400 (or
// 417, 501) to the next request, read with the Peek of the idle
// connection, was never written and the connection was closed with none.
func TestServeFarClientTimeoutAnswersAfterIdle(t *testing.T) {
	for _, d := range []time.Duration{math.MaxInt64, math.MaxInt64 - time.Minute, time.Minute} {
		srv, cli := net.Pipe()
		answersBounded(d, 2*time.Minute, time.Now)(srv, http.StateIdle)
		go func() { _, _ = io.Copy(io.Discard, cli) }()
		if _, err := io.WriteString(srv, "HTTP/1.1 400 Bad Request\r\n\r\n"); err != nil {
			t.Errorf("--client-timeout %s: the answer after an idle time: %v, want it written", d, err)
		}
		srv.Close()
		cli.Close()
	}
}
