package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/slidegate/slidegate/config"
)

// TestProxyUntrustedChainEndingWithPeer: with trusted_proxies set, a client
// that is not one of them and sends an X-Forwarded-For chain ending with
// its own address does not get its forged entries to the origin: the
// origin sees the client's address alone.
func TestProxyUntrustedChainEndingWithPeer(t *testing.T) {
	var got []string
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Values("X-Forwarded-For")
	}))
	defer origin.Close()
	u, err := url.Parse(origin.URL)
	if err != nil {
		t.Fatal(err)
	}
	p := NewProxy(u, nil, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")})
	for _, in := range []string{"6.6.6.6, 198.51.100.9", "6.6.6.6,198.51.100.9"} {
		t.Run(in, func(t *testing.T) {
			r := httptest.NewRequest("GET", "http://slidegate.test/v1/items", nil)
			r.RemoteAddr = "198.51.100.9:5000"
			r.Header.Set("X-Forwarded-For", in)
			w := httptest.NewRecorder()
			p.ServeHTTP(w, r)
			if w.Code != http.StatusOK {
				t.Fatalf("status %d", w.Code)
			}
			if v := strings.Join(got, "|"); v != "198.51.100.9" {
				t.Errorf("origin got X-Forwarded-For %q, want %q (the forged chain dropped)", v, "198.51.100.9")
			}
		})
	}
}

// TestProxyRefusedOriginIs502: an origin that refuses the connection is a
// 502 "did not answer", not the 504 of an origin that timed out, and not
// logged as a timeout.
func TestProxyRefusedOriginIs502(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // nothing listens there now: connections are refused
	p := NewProxy(&url.URL{Scheme: "http", Host: addr}, nil, nil)
	w := httptest.NewRecorder()
	p.ServeHTTP(w, httptest.NewRequest("GET", "http://slidegate.test/v1/items", nil))
	if w.Code != http.StatusBadGateway {
		t.Errorf("refused origin: status %d, want 502: %s", w.Code, w.Body)
	}
	if strings.Contains(w.Body.String(), "in time") {
		t.Errorf("refused origin described as a timeout: %s", w.Body)
	}
}

// TestProxyFailureLogsClientPath: the log line of a request whose origin
// failed gives the path the client asked for, as its denied and
// store-error lines do, not the path it was sent to: with an origin URL
// holding a path (serve --origin http://api/base, the Lambda's OriginUrl),
// that was "/base/v1/items" for a client's "/v1/items".
func TestProxyFailureLogsClientPath(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // connections are refused: an origin error
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	front := httptest.NewServer(NewProxy(&url.URL{Scheme: "http", Host: addr, Path: "/base"}, log, nil))
	defer front.Close()
	res, err := front.Client().Get(front.URL + "/v1/it%65ms?q=1")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	front.Close() // its handler has returned
	var m map[string]any
	if err := json.Unmarshal(logs.Bytes(), &m); err != nil {
		t.Fatalf("log %q: %v", logs.String(), err)
	}
	if res.StatusCode != http.StatusBadGateway || m["msg"] != "origin error" || m["path"] != "/v1/items" {
		t.Errorf("status %d, log %s; want a 502 and an origin error with the path /v1/items", res.StatusCode, logs.String())
	}
}

// TestSwitchingProtocolsKeepsFields: an in-process origin (Options.Next)
// that answers 101 Switching Protocols gives its final answer: the
// pre-filter's rate-limit fields go out on it, as on any other.
func TestSwitchingProtocolsKeepsFields(t *testing.T) {
	f := newFixture(t, config.Default(), func(o *Options) {
		o.Next = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Upgrade", "websocket")
			w.WriteHeader(http.StatusSwitchingProtocols)
		})
	})
	w := f.do(req{method: "GET", path: "/v1/items", remote: "198.51.100.1:1234"})
	if w.Code != http.StatusSwitchingProtocols {
		t.Fatalf("status %d, want 101", w.Code)
	}
	res := w.Result()
	for _, k := range []string{"X-Ratelimit-Limit", "X-Ratelimit-Remaining", "Ratelimit", "Ratelimit-Policy"} {
		if res.Header.Get(k) == "" {
			t.Errorf("101 without %s: %v", k, res.Header)
		}
	}
}

// TestLastHop: LastHop reads the last hop as clientAddr reads a hop. A
// proxy on a dual-stack socket writes an IPv4 peer as ::ffff:a.b.c.d, some
// write a port (Azure's gateways) or brackets, and a trailing comma is an
// empty element: each is the peer's hop, which is not appended to the chain
// a second time. (Read with netip.ParseAddr alone, the last three were
// other hops, and the proxy wrote the peer twice.) The peer's own form does
// not matter either: an IPv4 peer seen as IPv4-mapped IPv6 (a dual-stack
// listener) or an IPv6 peer with a zone is the hop that names its address
// (hand mutations that compared the peer as given went unseen).
func TestLastHop(t *testing.T) {
	v4 := netip.MustParseAddr("203.0.113.7")
	v6 := netip.MustParseAddr("2001:db8::7")
	for _, c := range []struct {
		xff  []string
		peer netip.Addr
		want bool
	}{
		{[]string{"198.51.100.1, ::ffff:203.0.113.7"}, v4, true},
		{[]string{"198.51.100.1", "::ffff:203.0.113.7"}, v4, true},
		{[]string{"203.0.113.7"}, v4, true},
		{[]string{"198.51.100.1, 203.0.113.7:51234"}, v4, true},
		{[]string{"198.51.100.1, [2001:db8::7]:443"}, v6, true},
		{[]string{"[2001:db8::7]"}, v6, true},
		{[]string{"198.51.100.1, 203.0.113.7, "}, v4, true},
		{[]string{"198.51.100.1, 203.0.113.7", " "}, v4, true},
		{[]string{"203.0.113.7, 198.51.100.1"}, v4, false},
		{[]string{"203.0.113.7, 198.51.100.1:80"}, v4, false},
		{[]string{"203.0.113.7, unknown"}, v4, false},
		{[]string{" , "}, v4, false},
		{nil, v4, false},
		{[]string{"198.51.100.1, 203.0.113.7"}, netip.MustParseAddr("::ffff:203.0.113.7"), true},
		{[]string{"198.51.100.1, fe80::7"}, netip.MustParseAddr("fe80::7%eth0"), true},
	} {
		if got := LastHop(c.xff, c.peer); got != c.want {
			t.Errorf("LastHop(%q, %s) = %t, want %t", c.xff, c.peer, got, c.want)
		}
	}
}

// timeoutErr is a net.Error that says whether it is a timeout.
type timeoutErr bool

func (e timeoutErr) Error() string   { return "i/o" }
func (e timeoutErr) Timeout() bool   { return bool(e) }
func (e timeoutErr) Temporary() bool { return false }

// TestOriginFailedStatus: the first net.Error of the chain decides 504
// (it timed out) or 502, however deep the proxy wrapped it.
func TestOriginFailedStatus(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"deadline", context.DeadlineExceeded, http.StatusGatewayTimeout},
		{"url.Error of a deadline", &url.Error{Op: "Get", URL: "http://o", Err: context.DeadlineExceeded}, http.StatusGatewayTimeout},
		{"wrapped twice", fmt.Errorf("proxy: %w", &url.Error{Op: "Get", URL: "http://o", Err: &net.OpError{Op: "read", Err: timeoutErr(true)}}), http.StatusGatewayTimeout},
		{"not a timeout", &net.OpError{Op: "dial", Err: timeoutErr(false)}, http.StatusBadGateway},
		{"first net.Error decides", &net.OpError{Op: "dial", Err: fmt.Errorf("x: %w", context.DeadlineExceeded)}, http.StatusBadGateway},
		{"no net.Error", errors.New("boom"), http.StatusBadGateway},
		{"canceled", context.Canceled, http.StatusBadGateway},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			OriginFailed(nil, w, httptest.NewRequest("GET", "/", nil), tt.err)
			if w.Code != tt.want {
				t.Errorf("%v: %d, want %d", tt.err, w.Code, tt.want)
			}
		})
	}
}

// TestOriginErrorLineBounded: the error of a failed origin is cut in its
// log line as the client's path is: a fetch error that quotes the URL
// would carry the client's path of up to 64 KiB past Logged's cut.
func TestOriginErrorLineBounded(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	long := "fetch failed: https://origin.example/" + strings.Repeat("p", 4000)
	OriginFailed(log, httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil), errors.New(long))
	var m map[string]any
	if err := json.Unmarshal(logs.Bytes(), &m); err != nil {
		t.Fatalf("log %q: %v", logs.String(), err)
	}
	if got, _ := m["error"].(string); got != long[:512]+"…" {
		t.Errorf("error of %d bytes logged, want the first 512 and …", len(got))
	}
}

// failingBody is a client's body that gives "ab", then fails with err.
type failingBody struct {
	sent bool
	err  error
}

func (b *failingBody) Read(p []byte) (int, error) {
	if !b.sent {
		b.sent = true
		return copy(p, "ab"), nil
	}
	return 0, b.err
}

// TestProxyClientBodyFault: a request whose client's body fails while the
// proxy sends it on (a read that timed out at the server's bound, a body
// cut short, a malformed chunked one) is the client's fault: a 408 for
// the timeout, else a 400, the connection closed, and an INFO line saying
// so, not the origin's 502 or 504 and its ERROR line. The origin got part
// of the body. An origin that fails while the body reads fine is still
// the origin's.
func TestProxyClientBodyFault(t *testing.T) {
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hangup" {
			c, _, _ := http.NewResponseController(w).Hijack()
			c.Close()
			return
		}
		_, _ = io.ReadAll(r.Body)
	}))
	t.Cleanup(origin.Close)
	u, _ := url.Parse(origin.URL)
	tests := []struct {
		name, path string
		err        error
		status     int
		level, msg string
	}{
		{"client timed out", "/upload", &net.OpError{Op: "read", Net: "tcp", Err: timeoutErr(true)}, http.StatusRequestTimeout, "INFO", "client failed to send its request body"},
		{"body cut short", "/upload", io.ErrUnexpectedEOF, http.StatusBadRequest, "INFO", "client failed to send its request body"},
		{"malformed chunked", "/upload", errors.New("invalid byte in chunk length"), http.StatusBadRequest, "INFO", "client failed to send its request body"},
		{"origin hung up", "/hangup", io.EOF, http.StatusBadGateway, "ERROR", "origin error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			p := NewProxy(u, slog.New(slog.NewJSONHandler(&logs, nil)), nil)
			w := httptest.NewRecorder()
			p.ServeHTTP(w, httptest.NewRequest("POST", "http://slidegate.test"+tt.path, &failingBody{err: tt.err}))
			if w.Code != tt.status {
				t.Errorf("status %d, want %d: %s", w.Code, tt.status, w.Body)
			}
			if got, want := w.Header().Get("Connection") == "close", tt.status < 500; got != want {
				t.Errorf("Connection: close %v, want %v", got, want)
			}
			var m map[string]any
			if err := json.Unmarshal(logs.Bytes(), &m); err != nil {
				t.Fatalf("log %q: %v", logs.String(), err)
			}
			if m["level"] != tt.level || m["msg"] != tt.msg || m["status"] != float64(tt.status) {
				t.Errorf("log %s, want %s %q with status %d", logs.String(), tt.level, tt.msg, tt.status)
			}
		})
	}
}

// roundTripFunc is an http.RoundTripper of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestProxyBodyReadAfterTransportClose: a read of the body that the
// transport makes after it closed it fails (ReverseProxy's "invalid Read
// on closed Body"), with nothing wrong with the client: HTTP/2's transport
// closes the body from another goroutine when the origin resets the
// stream, and its writer may read once more before it notices. The
// origin's failure stays the origin's: a 502 and an ERROR line, not a 400
// logged at INFO as the client's.
func TestProxyBodyReadAfterTransportClose(t *testing.T) {
	var logs bytes.Buffer
	p := NewProxy(&url.URL{Scheme: "http", Host: "origin.test"}, slog.New(slog.NewJSONHandler(&logs, nil)), nil)
	p.Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		_, _ = r.Body.Read(make([]byte, 2))
		_ = r.Body.Close() // the stream reset, seen by the connection's reader
		if _, err := r.Body.Read(make([]byte, 2)); err == nil {
			t.Error("a read after Close succeeded: the test no longer stands for HTTP/2's")
		}
		return nil, errors.New("stream error: stream ID 1; INTERNAL_ERROR; received from peer")
	})
	w := httptest.NewRecorder()
	p.ServeHTTP(w, httptest.NewRequest("POST", "http://slidegate.test/upload", strings.NewReader("abcd")))
	if w.Code != http.StatusBadGateway || strings.Contains(logs.String(), "client") || !strings.Contains(logs.String(), `"level":"ERROR","msg":"origin error"`) {
		t.Errorf("status %d, log %s; want a 502 and an ERROR origin error", w.Code, logs.String())
	}
}

// TestClientBodyCloseDuringRead: the transport's Close may land while a
// read of the body is on its way into ReverseProxy's wrapper, which fails
// a read once closed ("invalid Read on closed Body"): clientBody must not
// keep that failure as the client's. It did when its Close closed the
// wrapper too: the read, begun before the Close, then failed in the
// wrapper with nothing wrong with the client, the origin reset's 400 of
// TestProxyBodyReadAfterTransportClose in a window of a few instructions.
func TestClientBodyCloseDuringRead(t *testing.T) {
	b := &clientBody{}
	b.ReadCloser = &closingReader{before: func() { _ = b.Close() }} // another goroutine's Close, in the window
	_, _ = b.Read(make([]byte, 2))
	if err := b.err.Load(); err != nil {
		t.Errorf("kept %q as the client's error: a read the transport's Close overtook is no client's failure", *err)
	}
	if _, err := b.Read(make([]byte, 2)); err == nil {
		t.Error("a read after Close succeeded")
	}
	if err := b.err.Load(); err != nil {
		t.Errorf("kept %q as the client's error after Close", *err)
	}
}

// closingReader reads as ReverseProxy's wrapper of a request body does,
// a read failing once Close is called, and calls before, if set, at the
// start of each read, before it looks whether it is closed.
type closingReader struct {
	before func()
	closed bool
}

func (c *closingReader) Read(p []byte) (int, error) {
	if f := c.before; f != nil {
		c.before = nil
		f()
	}
	if c.closed {
		return 0, errors.New("ReverseProxy does an invalid Read on closed Body")
	}
	return copy(p, "ab"), nil
}

func (c *closingReader) Close() error {
	c.closed = true
	return nil
}

// TestProxyOriginResetOverHTTP2: an HTTP/2 origin that resets the stream
// of an upload it has begun to read is an origin error, each time: a 502
// and an ERROR line. About one in ten was a 400 logged at INFO as the
// client's failure (TestProxyBodyReadAfterTransportClose's read, as it
// happens). The origin is on 127.0.0.1; 40 uploads of 1 MiB.
func TestProxyOriginResetOverHTTP2(t *testing.T) {
	origin := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadFull(r.Body, make([]byte, 64<<10))
		panic(http.ErrAbortHandler) // RST_STREAM, INTERNAL_ERROR
	}))
	var logs bytes.Buffer
	p := h2Proxy(t, origin, slog.New(slog.NewJSONHandler(&logs, nil)))
	body := make([]byte, 1<<20)
	for i := range 40 {
		logs.Reset()
		w := httptest.NewRecorder()
		p.ServeHTTP(w, httptest.NewRequest("POST", "http://slidegate.test/upload", bytes.NewReader(body)))
		if w.Code != http.StatusBadGateway || !strings.Contains(logs.String(), `"level":"ERROR","msg":"origin error"`) {
			t.Fatalf("upload %d: status %d, log %s; want a 502 and an ERROR origin error", i, w.Code, logs.String())
		}
	}
}
