package main

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/slidegate/slidegate/internal/parity"
	"github.com/slidegate/slidegate/kvstore"
	"github.com/slidegate/slidegate/kvstore/memstore"
)

// virtualClock is a clock that stands still until the test advances it,
// and the clock of the deadlines of the connections its listener accepts
// (virtualConn). A test of --client-timeout decides with it when a
// client's silence passes the bound, instead of sleeping in real time
// under a bound in real time: a busy machine's scheduler stretched such
// sleeps (50 ms ones woke 570 to 880 ms late on two cores under 16 busy
// loops) past the bound, and the server, rightly, let the client go.
// Safe for concurrent use.
type virtualClock struct {
	t *parity.Clock
	// mu orders the clock's moves and the connections' deadlines, and
	// guards the connections' state.
	mu      sync.Mutex
	conns   []*virtualConn
	changed chan struct{} // closed, and replaced, at each change of a connection
}

func newVirtualClock() *virtualClock {
	return &virtualClock{t: parity.NewClock(time.Now()), changed: make(chan struct{})}
}

// Now is the clock's time, serve's clock for the client's deadlines.
func (k *virtualClock) Now() time.Time { return k.t.Now() }

// advance moves the clock d on: a deadline it reaches fails the I/O
// waiting for it, as a socket's deadline would.
func (k *virtualClock) advance(d time.Duration) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.t.Advance(d)
	for _, c := range k.conns {
		_ = c.applyLocked()
	}
}

// notifyLocked wakes the waits on a connection's state (await).
func (k *virtualClock) notifyLocked() {
	close(k.changed)
	k.changed = make(chan struct{})
}

// await waits until cond, called with k.mu held, holds; a hang (10 s)
// fails the test, on which what is awaited.
func (k *virtualClock) await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	hang := time.NewTimer(10 * time.Second)
	defer hang.Stop()
	for {
		k.mu.Lock()
		ok, changed := cond(), k.changed
		k.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-changed:
		case <-hang.C:
			t.Fatalf("not %s after 10 s", what)
		}
	}
}

// virtualListener accepts connections whose deadlines are kept on clock.
type virtualListener struct {
	net.Listener
	clock *virtualClock
}

func (l virtualListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	v := &virtualConn{Conn: c, clock: l.clock}
	l.clock.mu.Lock()
	l.clock.conns = append(l.clock.conns, v)
	l.clock.notifyLocked()
	l.clock.mu.Unlock()
	return v, nil
}

// virtualConn is a TCP connection whose deadlines are on a virtualClock:
// on the socket, a deadline still ahead of the clock is none, and one the
// clock reached is long past, so that the I/O waiting, or the next one,
// fails at once with a timeout. The server's own deadlines (time.Now plus
// its ReadHeaderTimeout, IdleTimeout) are read on the same clock: they
// start at the real time and lie seconds ahead of it, which the tests
// never advance the clock by. The net.Conn embedded hides *net.TCPConn's
// WriteTo and ReadFrom, which would move bytes past Read; CloseWrite is
// passed on, as the server and the proxy use it.
type virtualConn struct {
	net.Conn
	clock *virtualClock
	// Guarded by clock.mu.
	rd, wd  time.Time
	reading int   // Reads in progress
	read    int64 // bytes read
	closed  bool
}

func (c *virtualConn) SetDeadline(t time.Time) error {
	c.clock.mu.Lock()
	defer c.clock.mu.Unlock()
	c.rd, c.wd = t, t
	return c.applyLocked()
}

func (c *virtualConn) SetReadDeadline(t time.Time) error {
	c.clock.mu.Lock()
	defer c.clock.mu.Unlock()
	c.rd = t
	return c.applyLocked()
}

func (c *virtualConn) SetWriteDeadline(t time.Time) error {
	c.clock.mu.Lock()
	defer c.clock.mu.Unlock()
	c.wd = t
	return c.applyLocked()
}

// applyLocked sets c's deadlines on the socket as the clock stands.
func (c *virtualConn) applyLocked() error {
	onSocket := func(d time.Time) time.Time {
		if d.IsZero() || c.clock.Now().Before(d) {
			return time.Time{}
		}
		return time.Unix(1, 0)
	}
	if err := c.Conn.SetReadDeadline(onSocket(c.rd)); err != nil {
		return err
	}
	return c.Conn.SetWriteDeadline(onSocket(c.wd))
}

func (c *virtualConn) Read(p []byte) (int, error) {
	c.clock.mu.Lock()
	c.reading++
	c.clock.notifyLocked()
	c.clock.mu.Unlock()
	n, err := c.Conn.Read(p)
	c.clock.mu.Lock()
	c.reading--
	c.read += int64(n)
	c.clock.notifyLocked()
	c.clock.mu.Unlock()
	return n, err
}

func (c *virtualConn) Close() error {
	c.clock.mu.Lock()
	c.closed = true
	c.clock.notifyLocked()
	c.clock.mu.Unlock()
	return c.Conn.Close()
}

func (c *virtualConn) CloseWrite() error {
	return c.Conn.(*net.TCPConn).CloseWrite()
}

// clockFront is `slidegate serve --client-timeout clientTimeout` in front
// of an origin, its handler and server built as serve builds them, on a
// virtualClock.
type clockFront struct {
	clock *virtualClock
	addr  string
}

// frontOnClock starts a clockFront in front of origin, on the operators'
// configuration and a memory store.
func frontOnClock(t *testing.T, origin http.Handler) *clockFront {
	t.Helper()
	return frontOnClockWith(t, origin, operatorConfig(t, ""), memstore.New())
}

// frontOnClockWith starts a clockFront in front of origin, on the
// configuration at path and store.
func frontOnClockWith(t *testing.T, origin http.Handler, path string, store kvstore.Store) *clockFront {
	t.Helper()
	o := httptest.NewServer(origin)
	t.Cleanup(o.Close)
	u, err := parseOrigin(o.URL)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := loadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	clock := newVirtualClock()
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	b := &builder{origin: u, log: log, store: store, local: memstore.New(),
		originTimeout: defaultOriginTimeout, clientTimeout: clientTimeout, now: clock.Now}
	h, err := b.build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := frontServer(h, log, clientTimeout, clock.Now)
	go func() { _ = srv.Serve(virtualListener{ln, clock}) }()
	t.Cleanup(func() { srv.Close() })
	return &clockFront{clock: clock, addr: ln.Addr().String()}
}

// clockClient is a client connection to a clockFront.
type clockClient struct {
	*wire
	clock *virtualClock
	srv   *virtualConn // the server's end
	sent  int64
}

// dial opens a client connection to f.
func (f *clockFront) dial(t *testing.T) *clockClient {
	t.Helper()
	w := dial(t, f.addr)
	c := &clockClient{wire: w, clock: f.clock}
	local := w.c.LocalAddr().String()
	f.clock.await(t, "accepted", func() bool {
		for _, s := range f.clock.conns {
			if s.RemoteAddr().String() == local {
				c.srv = s
				return true
			}
		}
		return false
	})
	return c
}

func (c *clockClient) send(s string) {
	c.t.Helper()
	c.wire.send(s)
	c.sent += int64(len(s))
}

// silence keeps the client silent for d: once the server has read all it
// sent and waits on it for more (under whatever deadline it set for that
// wait), the clock moves d on. A server that closed the connection
// instead fails the test. Only reads are seen: before a silence the test
// takes what the server has to write by then (a part of an answer), or
// the clock could pass a write deadline the server set for a write still
// on its way, a wait that was the server's, not the client's.
func (c *clockClient) silence(d time.Duration) {
	c.t.Helper()
	var closed bool
	c.clock.await(c.t, "waiting on the client", func() bool {
		closed = c.srv.closed
		return closed || c.srv.reading > 0 && c.srv.read == c.sent
	})
	if closed {
		c.t.Fatalf("the server closed the connection, %d of the %d bytes sent read", c.srv.read, c.sent)
	}
	c.clock.advance(d)
}
