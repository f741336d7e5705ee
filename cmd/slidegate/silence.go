package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// defaultClientTimeout bounds each silence of a client within a request,
// as nginx's client_body_timeout and send_timeout do (60 s there).
const defaultClientTimeout = time.Minute

// boundSilence bounds each wait on the client of a request once its
// header has come, to d: for the next part of its body, and, with
// boundWrites around the origin, for the client to take the next part of
// the answer. Past it the read or write fails and the connection is
// closed. Nothing bounded those waits: Go's server reads what is left of
// a body (up to 256 KiB) before it sends an answer the handler wrote
// without reading it (a 429, the health check's), so a client that sent a
// header announcing a body and then nothing held its connection, a
// goroutine and a file descriptor for ever, even for a request counted
// nowhere; an admitted one held an origin connection and the origin's
// worker waiting for the body too, and so did a client that stopped
// reading a long answer. The server's ReadTimeout and WriteTimeout would
// bound a whole request or answer, cutting uploads and answers (Server-Sent
// Events) that are merely long; this bounds only silence, and only the
// client's: a handler or origin slow to read the body or to answer is not
// the client's wait. d <= 0 means no bound.
func boundSilence(next http.Handler, d time.Duration) http.Handler {
	if d <= 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		// The answers the handler writes itself (a 429, a 503, the check
		// API's) are buffered and go out when it returns: d from then,
		// set below (the server clears the deadline after them). Set when
		// the request came, it counted slidegate's own wait for the store
		// as the client's, and an answer decided after d (a store_timeout
		// longer than it, a refund after a check) was lost: the client
		// saw its connection closed. An upgraded connection is closed by
		// the time the proxy returns: a deadline on it does nothing.
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			_ = rc.SetWriteDeadline(time.Now().Add(d))
			return
		}
		// Also bounds the server's own read of a body the handler left.
		_ = rc.SetReadDeadline(time.Now().Add(d))
		b := &silentBody{ReadCloser: r.Body, rc: rc, d: d}
		defer b.done.Store(true)
		r = r.WithContext(r.Context()) // a copy, for its own Body
		r.Body = b
		next.ServeHTTP(w, r)
		if !b.used.Load() && r.ContentLength < maxUnreadBody && r.Header.Get("Expect") == "" &&
			w.Header().Get("Connection") != "close" {
			// A body nobody read (a refused request's): the server reads
			// what is left of it (up to 256 KiB) before it answers, at
			// the read deadline set above, so a client still uploading in
			// time lost its 429. Read here, the deadline moves with each
			// part; the answer then has d to go out. The server reads
			// none, and neither does this, of a body announced at
			// 256 KiB or more, of one a client holds back until 100
			// Continue, or when the answer closes the connection
			// (fullDuplex's, to a request the origin did not read).
			_, _ = io.CopyN(io.Discard, b, maxUnreadBody+1)
		}
		_ = rc.SetWriteDeadline(time.Now().Add(d))
	})
}

// maxUnreadBody is how much of a body nobody read Go's server reads
// before it answers (net/http's maxPostHandlerReadBytes); past it, it
// closes the connection after the answer.
const maxUnreadBody = 256 << 10

// silentBody moves the connection's read deadline d ahead before each read
// of a request body, until the body's end: there the server starts its
// own read of the connection (to learn that the client went away), which
// must not time out while the origin takes its time to answer.
type silentBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	d    time.Duration
	end  atomic.Bool // read by the transport's goroutine, maybe after the handler
	done atomic.Bool // the handler returned: the connection may serve another request
	used atomic.Bool // read at all: by the handler, or a transport maybe still reading
}

func (b *silentBody) Read(p []byte) (int, error) {
	b.used.Store(true)
	if b.end.Load() || b.done.Load() {
		return b.ReadCloser.Read(p)
	}
	_ = b.rc.SetReadDeadline(time.Now().Add(b.d))
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.end.Store(true)
	}
	return n, err
}

// boundWrites moves the connection's write deadline d ahead before each
// write of an answer through next (the origin's: they may be long), so
// that a client that stops taking the answer is let go after d; it
// clears the deadlines of a connection handed over to an upgrade. d <= 0
// means no bound.
func boundWrites(next http.Handler, d time.Duration) http.Handler {
	if d <= 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&silentWriter{ResponseWriter: w, rc: http.NewResponseController(w), d: d}, r)
	})
}

// silentWriter is boundWrites' ResponseWriter.
type silentWriter struct {
	http.ResponseWriter
	rc *http.ResponseController
	d  time.Duration
}

func (w *silentWriter) extend() { _ = w.rc.SetWriteDeadline(time.Now().Add(w.d)) }

// WriteHeader extends the deadline: an informational answer (103) is
// written at once, and a final one may come long after the request.
func (w *silentWriter) WriteHeader(code int) {
	w.extend()
	w.ResponseWriter.WriteHeader(code)
}

func (w *silentWriter) Write(p []byte) (int, error) {
	w.extend()
	return w.ResponseWriter.Write(p)
}

// FlushError extends the deadline and flushes; http.ResponseController
// finds it.
func (w *silentWriter) FlushError() error {
	w.extend()
	return w.rc.Flush()
}

// Hijack hands the connection over without deadlines: an upgraded
// connection (WebSocket) may be quiet for long, and its deadlines are the
// upgrade's to set (Go's proxy sets none).
func (w *silentWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := w.rc.Hijack()
	if err == nil {
		_ = c.SetDeadline(time.Time{})
	}
	return c, brw, err
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *silentWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// boundOrigin bounds each wait of tr on the origin to d, as
// --origin-timeout promises: to connect and to end the TLS handshake (the
// transport's own bounds are 30 s and 10 s: an origin host that dropped
// connection attempts held every request 30 s), for the origin to take
// the next part of a request (as nginx's proxy_send_timeout does), and for
// its answer to begin once the request is sent (ResponseHeaderTimeout).
// Only the last was bounded: an origin that stopped reading (hung, its
// connections open) held an upload larger than the sockets hold, its
// client and the origin connection for ever. Past the bound the
// transport fails with a timeout, and the client gets a 504. d <= 0 means
// no bound beyond the transport's own.
func boundOrigin(tr *http.Transport, d time.Duration) {
	tr.ResponseHeaderTimeout = d
	if d <= 0 {
		return
	}
	if d < tr.TLSHandshakeTimeout {
		tr.TLSHandshakeTimeout = d
	}
	if d >= farBound {
		// No write waits that long, and the connection attempt has its
		// 30 s; a deadline d and a quarter ahead would overflow.
		return
	}
	dial := tr.DialContext
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		ctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &originConn{Conn: c, d: d}, nil
	}
}

// farBound is an --origin-timeout past any wait: a bound meant as none (the
// flag takes up to 2562047h).
const farBound = 100 * 365 * 24 * time.Hour

// originConn is a connection to the origin whose writes each have at
// least d to go out (boundOrigin). The deadline is moved only when less
// than d is left, to d and a quarter ahead: a clock read per write, and a
// new deadline at most every d/4, rather than one per write on the path
// of every request.
type originConn struct {
	net.Conn
	d     time.Duration
	until atomic.Int64 // the write deadline set, in Unix nanoseconds
}

func (c *originConn) Write(p []byte) (int, error) {
	if now := time.Now(); c.until.Load()-now.UnixNano() < int64(c.d) {
		t := now.Add(c.d + c.d/4)
		c.until.Store(t.UnixNano())
		_ = c.Conn.SetWriteDeadline(t)
	}
	return c.Conn.Write(p)
}

// CloseWrite ends the writing side of the connection (TCP's half-close),
// which ReverseProxy passes on from the client of an upgraded connection
// (a WebSocket, Docker's `Upgrade: tcp`) that ended its own. Without it,
// the wrapper hid *net.TCPConn's, and ReverseProxy closed both
// connections at once: the origin's answer to the client's last bytes
// was lost.
func (c *originConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return fmt.Errorf("slidegate: close write of the origin connection: %w", http.ErrNotSupported)
}
