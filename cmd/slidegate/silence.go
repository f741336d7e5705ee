package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/http/httputil"
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
// the client's wait. d <= 0 means no bound. Deadlines are d from now()
// (time.Now in serve), which tests replace: whether a silence passed the
// bound is then theirs to decide, not the machine's scheduler's.
func boundSilence(next http.Handler, d time.Duration, now func() time.Time) http.Handler {
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
			_ = rc.SetWriteDeadline(now().Add(d))
			return
		}
		// Also bounds the server's own read of a body the handler left.
		_ = rc.SetReadDeadline(now().Add(d))
		b := &silentBody{ReadCloser: r.Body, rc: rc, d: d, now: now}
		// The server writes its 100 Continue on the first read, maybe
		// long after answersBounded's deadline (the origin asks for the
		// body when it is ready): d from then.
		b.cont.Store(r.Header.Get("Expect") != "")
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
		_ = rc.SetWriteDeadline(now().Add(d))
	})
}

// answersBounded returns the server's ConnState hook that gives the
// answers Go's server writes itself d from now() to go out: its 400, 431,
// 417 and 501 to a request it refuses before any handler, and (with
// silentBody) its 100 Continue. The server clears the write deadline after
// each answer and sets none before the next request (no WriteTimeout: it
// would cut long answers), so those went out with none: a client that
// pipelined requests and read none of their answers, until the socket's
// buffers were full, and then sent such a request held its connection, a
// goroutine and a file descriptor for ever (with 100 Continue, the
// request's handler too). The hook runs once a request's first bytes are read,
// before any of those writes; the handlers' own answers move the deadline
// as they go (boundSilence, boundWrites). It runs too as the connection
// goes idle after an answer: a request the server had already read with
// the one before (pipelined, as such a client sends them) is taken from
// its buffer, with no StateActive, and its 400 went out with no deadline.
// There the bound is idle (the server's IdleTimeout) and d: so is a
// request that comes in one read after the client kept the connection
// idle, which the server takes from its buffer too, and d from the idle
// start closed it with no answer when the client waited longer than d
// between requests. d <= 0 means no bound: nil.
func answersBounded(d, idle time.Duration, now func() time.Time) func(net.Conn, http.ConnState) {
	if d <= 0 {
		return nil
	}
	return func(c net.Conn, s http.ConnState) {
		switch s {
		case http.StateActive:
			_ = c.SetWriteDeadline(now().Add(d))
		case http.StateIdle:
			// A d within idle of the largest the flag takes overflows
			// the sum to a deadline in the past: d is past any wait.
			b := idle + d
			if b < d {
				b = d
			}
			_ = c.SetWriteDeadline(now().Add(b))
		}
	}
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
	now  func() time.Time
	end  atomic.Bool // read by the transport's goroutine, maybe after the handler
	done atomic.Bool // the handler returned: the connection may serve another request
	used atomic.Bool // read at all: by the handler, or a transport maybe still reading
	cont atomic.Bool // a 100 Continue may be written by the next read
}

func (b *silentBody) Read(p []byte) (int, error) {
	b.used.Store(true)
	if b.end.Load() || b.done.Load() {
		return b.ReadCloser.Read(p)
	}
	_ = b.rc.SetReadDeadline(b.now().Add(b.d))
	if b.cont.Load() && b.cont.CompareAndSwap(true, false) {
		_ = b.rc.SetWriteDeadline(b.now().Add(b.d))
	}
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
// means no bound. Deadlines are d from now(), as boundSilence's.
func boundWrites(next http.Handler, d time.Duration, now func() time.Time) http.Handler {
	if d <= 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&silentWriter{ResponseWriter: w, rc: http.NewResponseController(w), d: d, now: now}, r)
	})
}

// silentWriter is boundWrites' ResponseWriter.
type silentWriter struct {
	http.ResponseWriter
	rc  *http.ResponseController
	d   time.Duration
	now func() time.Time
}

func (w *silentWriter) extend() { _ = w.rc.SetWriteDeadline(w.now().Add(w.d)) }

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
//
// p's Transport must be the *http.Transport of httpapi.NewProxy, set up
// (TLS) before: it is wrapped (pacedTransport) for the waits that are no
// write to the connection.
func boundOrigin(p *httputil.ReverseProxy, d time.Duration) {
	tr := p.Transport.(*http.Transport)
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
	p.Transport = pacedTransport{tr, d}
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
	until atomic.Int64 // the write deadline set, since epoch
}

// Write moves the deadline on by the monotonic clock, as the deadline
// itself runs: kept in wall-clock nanoseconds, a step of the wall clock
// back by X left the check X behind a deadline that passed, and the next
// write on a pooled connection failed (a POST's 504, a WebSocket cut).
func (c *originConn) Write(p []byte) (int, error) {
	if now := time.Since(epoch); time.Duration(c.until.Load())-now < c.d {
		u := now + c.d + c.d/4
		c.until.Store(int64(u))
		_ = c.Conn.SetWriteDeadline(epoch.Add(u))
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

// pacedTransport bounds to d each wait of its Transport for the origin to
// take the next part of a request's body: from each time the transport
// had a part of the body from the client (its waits for the client not
// counted) until it has sent the whole body, or the answer began. Over
// HTTP/2 (an https origin that offers it) that wait is no write to the
// connection, which originConn bounds, but the stream's flow control: an
// origin that stopped reading held an upload, its client and the stream
// for ever. Past d the request is cancelled, and the transport's error is
// errOriginSlow, a timeout: the client gets the 504.
type pacedTransport struct {
	*http.Transport
	d time.Duration
}

// RoundTrip sends r through the Transport, bounded as pacedTransport
// says.
func (t pacedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return t.Transport.RoundTrip(r)
	}
	ctx, cancel := context.WithCancelCause(r.Context())
	b := &pacedBody{ReadCloser: r.Body, d: t.d}
	// Until the transport first reads the body, it connects, sends the
	// header or waits for 100 Continue, each bounded on its own.
	b.reading.Store(true)
	b.timer = time.AfterFunc(farBound, func() { b.check(cancel) })
	b.timer.Reset(t.d)
	// Once the whole body is sent, the wait for the answer to begin is
	// the transport's own (ResponseHeaderTimeout). The body's Close
	// would not tell: HTTP/2 closes it when the stream ends.
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(httptrace.WroteRequestInfo) { b.stop() },
	})
	r = r.WithContext(ctx) // a copy, for its own Body
	r.Body = b
	res, err := t.Transport.RoundTrip(r)
	if !b.stop() {
		// The bound passed, maybe as the answer came.
		if err == nil {
			res.Body.Close()
		}
		return nil, fmt.Errorf("slidegate: %w", errOriginSlow)
	}
	return res, err
}

// epoch is the origin of pacedBody's times: durations since it are read
// from the monotonic clock.
var epoch = time.Now()

// pacedBody is the request body pacedTransport gives the transport.
type pacedBody struct {
	io.ReadCloser
	d       time.Duration
	timer   *time.Timer
	last    atomic.Int64 // when the last Read returned, since epoch
	reading atomic.Bool  // in a Read: waiting for the client, not the origin
	state   atomic.Int32 // pacing, paceStopped or paceFired
}

const (
	pacing int32 = iota
	paceStopped
	paceFired
)

func (b *pacedBody) Read(p []byte) (int, error) {
	b.reading.Store(true)
	n, err := b.ReadCloser.Read(p)
	b.last.Store(int64(time.Since(epoch)))
	b.reading.Store(false)
	return n, err
}

// stop ends the pacing and reports whether the bound had not passed.
func (b *pacedBody) stop() bool {
	b.state.CompareAndSwap(pacing, paceStopped)
	b.timer.Stop()
	return b.state.Load() != paceFired
}

// check runs when the bound may have passed: it cancels the request with
// errOriginSlow if the transport has waited d on the origin since it had
// the last part of the body, else looks again when it would have.
func (b *pacedBody) check(cancel context.CancelCauseFunc) {
	wait := b.d
	if !b.reading.Load() {
		if idle := time.Since(epoch) - time.Duration(b.last.Load()); idle < b.d {
			wait = b.d - idle
		} else if b.state.CompareAndSwap(pacing, paceFired) {
			cancel(errOriginSlow)
			return
		}
	}
	if b.state.Load() == pacing {
		b.timer.Reset(wait)
	}
}

// errOriginSlow is the error of a request whose origin did not take the
// next part of its body in time: a timeout (net.Error), as a write past
// its deadline is, so that the client gets a 504.
var errOriginSlow error = originSlowError{}

type originSlowError struct{}

func (originSlowError) Error() string   { return "the origin took no part of the request body in time" }
func (originSlowError) Timeout() bool   { return true }
func (originSlowError) Temporary() bool { return true }
