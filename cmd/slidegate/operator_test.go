package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/slidegate/slidegate/httpapi"
	"github.com/slidegate/slidegate/internal/testenv"
)

// The tests of this file run `slidegate serve` as an operator does, in
// front of an origin the test controls, and drive it over TCP: what the
// client gets and what the origin sees.

// bigKey is an API key on a plan whose quota no test uses up; anonymous
// clients and other keys get 2 requests per window.
const bigKey = "operator-big-key"

// operatorConfig writes a configuration whose window outlasts the run
// (serve reads the real clock) and returns its path. extra is added to
// the top-level object.
func operatorConfig(t *testing.T, extra string) string {
	t.Helper()
	w := testenv.FarWindow(time.Now())
	doc := fmt.Sprintf(`{"plans": {
		"free": {"limits": [{"name": "day", "limit": 2, "window": %[1]q}]},
		"big": {"limits": [{"name": "day", "limit": 100000, "window": %[1]q}]}},
		"api_keys": {%[2]q: "big"}%[3]s}`, w, httpapi.HashKey(bigKey), extra)
	p := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// frontOf starts `slidegate serve` in process, in front of origin,
// and returns the host:port it listens on.
func frontOf(t *testing.T, origin http.Handler, extra string) (addr string, logs *testenv.Buffer) {
	t.Helper()
	o := httptest.NewServer(origin)
	t.Cleanup(o.Close)
	logs = &testenv.Buffer{}
	base, _ := serveLogging(t, logs, "--config", operatorConfig(t, extra), "--origin", o.URL)
	return strings.TrimPrefix(base, "http://"), logs
}

// wire is one client connection to the server, read and written raw.
type wire struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

// dial connects to addr; every read and write must be done within 10 s
// (a hang is the failure those tests look for).
func dial(t *testing.T, addr string) *wire {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return &wire{t: t, c: c, r: bufio.NewReader(c)}
}

func (w *wire) send(s string) {
	w.t.Helper()
	if _, err := io.WriteString(w.c, s); err != nil {
		w.t.Fatalf("write: %v", err)
	}
}

// response reads one response to a request of method and its whole body.
func (w *wire) response(method string) (*http.Response, string) {
	w.t.Helper()
	res, err := http.ReadResponse(w.r, &http.Request{Method: method})
	if err != nil {
		w.t.Fatalf("reading the response: %v", err)
	}
	b, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		w.t.Fatalf("reading the body (%d bytes so far): %v", len(b), err)
	}
	return res, string(b)
}

// get sends a GET of path with the given header lines and returns the
// answer.
func (w *wire) get(path, lines string) (*http.Response, string) {
	w.t.Helper()
	w.send("GET " + path + " HTTP/1.1\r\nHost: front.test\r\n" + lines + "\r\n")
	return w.response("GET")
}

// TestServeStreamsAnswers: an origin's answer that comes in pieces
// (Server-Sent Events, a chunked body of unknown length) reaches the
// client piece by piece: the origin sends its second event only after the
// client has read the first through slidegate, so an answer held back
// until the end never completes.
func TestServeStreamsAnswers(t *testing.T) {
	read := make(chan string, 1)
	origin := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", r.URL.Query().Get("type"))
		w.Header().Set("Cache-Control", "no-cache")
		for i := 1; i <= 3; i++ {
			fmt.Fprintf(w, "data: event %d\n\n", i)
			if err := http.NewResponseController(w).Flush(); err != nil {
				t.Errorf("origin flush: %v", err)
				return
			}
			if i == 3 {
				return
			}
			select {
			case got := <-read: // the client has it: go on
				if want := fmt.Sprintf("data: event %d\n", i); got != want {
					t.Errorf("the client read %q, want %q", got, want)
				}
			case <-r.Context().Done():
				return
			case <-time.After(10 * time.Second):
				t.Errorf("%s: the client did not get event %d while the origin waited: the answer is held back", r.URL.Query().Get("type"), i)
				return
			}
		}
	})
	addr, _ := frontOf(t, origin, "")
	for _, typ := range []string{"text/event-stream", "text/plain", "application/x-ndjson"} {
		t.Run(typ, func(t *testing.T) {
			w := dial(t, addr)
			w.send("GET /events?type=" + typ + " HTTP/1.1\r\nHost: front.test\r\nX-API-Key: " + bigKey + "\r\nAccept: text/event-stream\r\n\r\n")
			res, err := http.ReadResponse(w.r, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			if res.StatusCode != 200 || res.Header.Get("RateLimit") == "" || res.Header.Get("Content-Type") != typ {
				t.Fatalf("status %d, headers %v", res.StatusCode, res.Header)
			}
			br := bufio.NewReader(res.Body)
			for i := 1; i <= 3; i++ {
				line, err := br.ReadString('\n')
				if err != nil {
					t.Fatalf("event %d: %q, %v", i, line, err)
				}
				if blank, err := br.ReadString('\n'); blank != "\n" || err != nil {
					t.Fatalf("after event %d: %q, %v", i, blank, err)
				}
				if i < 3 {
					read <- line
				}
			}
			if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
				t.Errorf("after the last event: %q, %v", rest, err)
			}
		})
	}
}

// upgradeOrigin accepts `Upgrade: echo` on any path: it answers 101,
// sends "hello\n" and then echoes every line in upper case, until the
// client closes.
func upgradeOrigin(t *testing.T) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.EqualFold(r.Header.Get("Upgrade"), "echo") || !strings.Contains(strings.ToLower(r.Header.Get("Connection")), "upgrade") {
			http.Error(w, "upgrade required", http.StatusUpgradeRequired)
			return
		}
		c, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("origin hijack: %v", err)
			return
		}
		defer c.Close()
		_, _ = rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\nX-Origin: yes\r\n\r\nhello\n")
		_ = rw.Flush()
		for {
			line, err := rw.ReadString('\n')
			if err != nil {
				return
			}
			_, _ = rw.WriteString(strings.ToUpper(line))
			_ = rw.Flush()
		}
	})
}

// TestServeUpgrade: a protocol upgrade (WebSocket's Connection: Upgrade
// and 101) goes through to the origin, and bytes then flow both ways on
// the connection, each line answered before the next is sent.
func TestServeUpgrade(t *testing.T) {
	addr, _ := frontOf(t, upgradeOrigin(t), "")
	w := dial(t, addr)
	w.send("GET /socket HTTP/1.1\r\nHost: front.test\r\nX-API-Key: " + bigKey + "\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
	res, err := http.ReadResponse(w.r, &http.Request{Method: "GET"})
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusSwitchingProtocols || res.Header.Get("Upgrade") != "echo" || res.Header.Get("X-Origin") != "yes" || res.Header.Get("RateLimit") == "" {
		t.Fatalf("status %d, headers %v", res.StatusCode, res.Header)
	}
	if line, err := w.r.ReadString('\n'); line != "hello\n" || err != nil {
		t.Fatalf("the origin's first line: %q, %v", line, err)
	}
	for _, msg := range []string{"ping\n", "second message\n", strings.Repeat("x", 100<<10) + "\n"} {
		w.send(msg)
		if got, err := w.r.ReadString('\n'); got != strings.ToUpper(msg) || err != nil {
			t.Fatalf("echo of %d bytes: %d bytes, %v", len(msg), len(got), err)
		}
	}
}

// uploadOrigin answers every request with its body's length and SHA-256,
// as JSON.
func uploadOrigin(w http.ResponseWriter, r *http.Request) {
	h := sha256.New()
	n, err := io.Copy(h, r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"length":%d,"sha256":%q,"expect":%q}`, n, hex.EncodeToString(h.Sum(nil)), r.Header.Get("Expect"))
}

// TestServeExpectContinue: a client that sends Expect: 100-continue with a
// large upload gets 100 Continue before it sends the body, and the origin
// gets the body whole. A client slidegate refuses (429) gets the refusal
// without a 100, never sends its body, and can go on (a new connection
// when the server closes this one).
func TestServeExpectContinue(t *testing.T) {
	addr, _ := frontOf(t, http.HandlerFunc(uploadOrigin), "")
	body := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	sum := sha256.Sum256(body)

	w := dial(t, addr)
	w.send("PUT /upload HTTP/1.1\r\nHost: front.test\r\nX-API-Key: " + bigKey + "\r\nExpect: 100-continue\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n")
	line, err := w.r.ReadString('\n')
	if err != nil || line != "HTTP/1.1 100 Continue\r\n" {
		t.Fatalf("before the body: %q, %v; want 100 Continue", line, err)
	}
	if blank, err := w.r.ReadString('\n'); blank != "\r\n" || err != nil {
		t.Fatalf("after 100 Continue: %q, %v", blank, err)
	}
	if _, err := w.c.Write(body); err != nil {
		t.Fatal(err)
	}
	// The origin's own 100 Continue may follow slidegate's: a client must
	// take any number of 1xx before the answer (RFC 9110 15.2).
	res, got := w.response("PUT")
	for res.StatusCode == http.StatusContinue {
		res, got = w.response("PUT")
	}
	if want := fmt.Sprintf(`{"length":%d,"sha256":%q,"expect":"100-continue"}`, len(body), hex.EncodeToString(sum[:])); res.StatusCode != 200 || got != want {
		t.Fatalf("upload: %d %s, want 200 %s", res.StatusCode, got, want)
	}
	// The connection goes on.
	if res, got := w.get("/after", "X-API-Key: "+bigKey+"\r\n"); res.StatusCode != 200 || !strings.Contains(got, `"length":0`) {
		t.Errorf("next request on the connection: %d %s", res.StatusCode, got)
	}

	// A client over its quota: 429 at once, without 100 Continue.
	key := "X-API-Key: expect-limited\r\n"
	for range 2 {
		if res, _ := dial(t, addr).get("/x", key); res.StatusCode != 200 {
			t.Fatalf("within the quota: %d", res.StatusCode)
		}
	}
	w = dial(t, addr)
	w.send("PUT /upload HTTP/1.1\r\nHost: front.test\r\n" + key + "Expect: 100-continue\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n")
	res, got = w.response("PUT")
	if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") == "" || !strings.Contains(got, `"status":429`) {
		t.Fatalf("over the quota: %d %v %s, want 429", res.StatusCode, res.Header, got)
	}
	if res.Close {
		// The server says it closes the connection: it must, not wait for
		// the body.
		if n, err := w.r.Read(make([]byte, 1)); err != io.EOF {
			t.Errorf("after Connection: close: read %d bytes, %v; want EOF", n, err)
		}
	} else {
		// The server kept the connection: it must read a next request, not
		// take the unsent body's place.
		if res, _ := w.get("/x", "X-API-Key: "+bigKey+"\r\n"); res.StatusCode != 200 {
			t.Errorf("next request after the refused upload: %d", res.StatusCode)
		}
	}
}

// TestServeKeepAliveAfterRefusals: a 429 to a request with a body (sized,
// or chunked) leaves the connection ready for the next request: the body
// is not read as a request, and the connection neither hangs nor closes
// without saying so. (TestServeOriginFailures keeps the connection after
// a 502 and a 504.)
func TestServeKeepAliveAfterRefusals(t *testing.T) {
	addr, _ := frontOf(t, http.HandlerFunc(uploadOrigin), "")
	key := "X-API-Key: keepalive-limited\r\n"
	for range 2 {
		if res, _ := dial(t, addr).get("/x", key); res.StatusCode != 200 {
			t.Fatalf("within the quota: %d", res.StatusCode)
		}
	}
	// The body looks like a request, which a server that did not skip it
	// would answer.
	smuggled := "GET /smuggled HTTP/1.1\r\nHost: front.test\r\nX-API-Key: " + bigKey + "\r\n\r\n"
	big := strings.Repeat("z", 1<<20)
	tests := []struct {
		name, head, body string
	}{
		{"sized body", "Content-Length: " + strconv.Itoa(len(smuggled)) + "\r\n", smuggled},
		{"chunked body", "Transfer-Encoding: chunked\r\n", fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(smuggled), smuggled)},
		{"1 MiB body", "Content-Length: " + strconv.Itoa(len(big)) + "\r\n", big},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := dial(t, addr)
			w.send("POST /upload HTTP/1.1\r\nHost: front.test\r\n" + key + tt.head + "\r\n")
			// The server may answer and close before it has read a large
			// body: the write must not block the reading of the answer.
			sent := make(chan error, 1)
			go func() {
				_, err := io.WriteString(w.c, tt.body)
				sent <- err
			}()
			res, _ := w.response("POST")
			if res.StatusCode != http.StatusTooManyRequests {
				t.Fatalf("status %d, want 429", res.StatusCode)
			}
			if res.Close {
				return // said so: the client opens a new one
			}
			if err := <-sent; err != nil {
				t.Fatalf("the body of a kept connection: %v", err)
			}
			res, got := w.get("/next", "X-API-Key: "+bigKey+"\r\n")
			if res.StatusCode != 200 || !strings.Contains(got, `"length":0`) {
				t.Errorf("next request: %d %s", res.StatusCode, got)
			}
		})
	}
}

// problemOf decodes a problem+json body.
func problemOf(t *testing.T, res *http.Response, body string) (status int, detail string) {
	t.Helper()
	if ct := res.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("Content-Type %q, want application/problem+json", ct)
	}
	var p struct {
		Status int
		Detail string
	}
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		t.Errorf("body %q: %v", body, err)
	}
	return p.Status, p.Detail
}

// downOrigins returns the URLs of an origin whose port refuses
// connections and of one that takes requests and answers none until the
// test ends.
func downOrigins(t *testing.T) (refused, hanging string) {
	t.Helper()
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close() // its port refuses connections now
	hung := make(chan struct{})
	h := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hung:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(h.Close)
	t.Cleanup(func() { close(hung) }) // before h.Close, which waits for its handlers
	return closed.URL, h.URL
}

// TestServeOriginFailures: an origin that refuses connections, or closes
// them without an answer, is a 502, one that accepts the request and never answers a 504 after
// --origin-timeout (here short; the default is a minute), not a client
// left waiting. Both are problem+json with the rate-limit headers, logged
// as origin errors, and leave the client's connection usable.
func TestServeOriginFailures(t *testing.T) {
	closed, hanging := downOrigins(t)
	hangUp, err := net.Listen("tcp", "127.0.0.1:0") // accepts and closes at once
	if err != nil {
		t.Fatal(err)
	}
	defer hangUp.Close()
	go func() {
		for {
			c, err := hangUp.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()

	// Only the hanging origin is timed out: the others keep the default
	// bound (a minute), so that a connection attempt or a read that a busy
	// machine delays past a short bound does not turn their 502 into a
	// 504.
	tests := []struct {
		name, origin, timeout string
		status                int
		detail                string
	}{
		{"refused", closed, "1m", http.StatusBadGateway, "the origin did not answer"},
		{"hangs up", "http://" + hangUp.Addr().String(), "1m", http.StatusBadGateway, "the origin did not answer"},
		{"hanging", hanging, "200ms", http.StatusGatewayTimeout, "the origin did not answer in time"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs testenv.Buffer
			base, _ := serveLogging(t, &logs, "--config", operatorConfig(t, ""), "--origin", tt.origin, "--origin-timeout", tt.timeout)
			w := dial(t, strings.TrimPrefix(base, "http://"))
			for i := range 2 { // the same connection
				res, body := w.get("/items", "X-API-Key: "+bigKey+"\r\n")
				if res.StatusCode != tt.status || res.Close {
					t.Fatalf("request %d: %d (close %v), want %d on a kept connection", i+1, res.StatusCode, res.Close, tt.status)
				}
				if status, detail := problemOf(t, res, body); status != tt.status || detail != tt.detail {
					t.Errorf("problem %d %q, want %d %q", status, detail, tt.status, tt.detail)
				}
				if got, want := res.Header.Get("X-RateLimit-Remaining"), strconv.Itoa(99999-i); res.Header.Get("RateLimit") == "" || got != want {
					t.Errorf("rate-limit headers %v, want RateLimit and X-RateLimit-Remaining %s", res.Header, want)
				}
			}
			if got := logs.String(); strings.Count(got, `"level":"ERROR","msg":"origin error"`) != 2 || !strings.Contains(got, fmt.Sprintf(`"status":%d`, tt.status)) {
				t.Errorf("log %s, want two origin errors with status %d", got, tt.status)
			}
		})
	}
}

// TestServeClientGone: a client that closes its connection while the
// origin is still working is not an origin error: the origin's request is
// cancelled, and the log says the client went away, at level INFO.
func TestServeClientGone(t *testing.T) {
	arrived, cancelled := make(chan struct{}), make(chan struct{})
	origin := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-r.Context().Done()
		close(cancelled)
	})
	addr, logs := frontOf(t, origin, "")
	w := dial(t, addr)
	w.send("GET /slow HTTP/1.1\r\nHost: front.test\r\nX-API-Key: " + bigKey + "\r\n\r\n")
	wait := func(what string, ch chan struct{}) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("the origin's request was not %s", what)
		}
	}
	wait("received", arrived)
	w.c.Close()
	wait("cancelled", cancelled)
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(logs.String(), `"path":"/slow"`); {
		if time.Now().After(deadline) {
			t.Fatalf("no log line about the request: %s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := logs.String(); strings.Contains(got, "origin error") || !strings.Contains(got, `"level":"INFO","msg":"client went away before the origin answered"`) {
		t.Errorf("log %s, want an INFO line that the client went away and no origin error", got)
	}
}

// TestServeForwardingHeaders: what the origin learns about the client.
// From a client (127.0.0.1 not trusted), every header by which a proxy
// would vouch for a client address, host or scheme is its own forgery and
// does not reach the origin; the origin gets X-Forwarded-For, -Host and
// -Proto as slidegate saw them. From a trusted proxy they go on, with
// X-Forwarded-For and Forwarded chains extended by the proxy's address.
func TestServeForwardingHeaders(t *testing.T) {
	got := make(chan http.Header, 1)
	origin := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
	})
	forged := map[string]string{
		"X-Forwarded-For":          "203.0.113.7",
		"X-Forwarded-Host":         "admin.example",
		"X-Forwarded-Proto":        "https",
		"Forwarded":                "for=203.0.113.7;proto=https;host=admin.example",
		"X-Real-Ip":                "203.0.113.7",
		"X-Client-Ip":              "203.0.113.7",
		"True-Client-Ip":           "203.0.113.7",
		"X-Cluster-Client-Ip":      "203.0.113.7",
		"X-Original-Forwarded-For": "203.0.113.7",
		"Cf-Connecting-Ip":         "203.0.113.7",
		"Fastly-Client-Ip":         "203.0.113.7",
		"X-Forwarded-Port":         "443",
		"X-Forwarded-Ssl":          "on",
		"X-Forwarded-Scheme":       "https",
		"X-Forwarded-Server":       "admin.example",
		"X-Forwarded-Prefix":       "/admin",
		"X-Forwarded":              "for=203.0.113.7",
		"Front-End-Https":          "on",
		"X-Url-Scheme":             "https",
		// The URL or host before a proxy's rewrite, which some origins
		// (IIS, older Symfony and Zend) serve instead of the request line:
		// a client's would be served a path the pre-filter did not price.
		"X-Original-Url":        "/admin/export",
		"X-Rewrite-Url":         "/admin/export",
		"X-Original-Host":       "admin.example",
		"X-Host":                "admin.example",
		"X-Original-Uri":        "/admin/export",
		"X-Envoy-Original-Path": "/admin/export",
		"Client-Ip":             "203.0.113.7",
		"Cf-Connecting-Ipv6":    "2001:db8::7",
	}
	var lines strings.Builder
	for k, v := range forged {
		fmt.Fprintf(&lines, "%s: %s\r\n", k, v)
	}
	lines.WriteString("X-API-Key: " + bigKey + "\r\nX-Other: kept\r\n")
	send := func(t *testing.T, trusted string) http.Header {
		t.Helper()
		addr, _ := frontOf(t, origin, `, "identity": {"trusted_proxies": [`+trusted+`]}`)
		if res, body := dial(t, addr).get("/items", lines.String()); res.StatusCode != 200 {
			t.Fatalf("status %d %s", res.StatusCode, body)
		}
		return <-got
	}
	t.Run("from a client", func(t *testing.T) {
		h := send(t, `"10.0.0.0/8"`)
		want := map[string]string{"X-Forwarded-For": "127.0.0.1", "X-Forwarded-Host": "front.test", "X-Forwarded-Proto": "http", "X-Other": "kept"}
		for k := range forged {
			if v, ok := want[k]; ok {
				if g := strings.Join(h.Values(k), "|"); g != v {
					t.Errorf("%s %q, want %q", k, g, v)
				}
			} else if vs, ok := h[k]; ok {
				t.Errorf("the client's %s %q reached the origin", k, vs)
			}
		}
	})
	t.Run("from a trusted proxy", func(t *testing.T) {
		h := send(t, `"127.0.0.1"`)
		for k, v := range forged {
			switch k {
			case "X-Forwarded-For":
				v += ", 127.0.0.1"
			case "Forwarded":
				v += "|for=127.0.0.1"
			}
			if g := strings.Join(h.Values(k), "|"); g != v {
				t.Errorf("%s %q, want %q", k, g, v)
			}
		}
	})
}

// TestServeHeadAndOptions: HEAD through the proxy keeps the origin's
// Content-Length and sends no body, also when slidegate refuses it (the
// next answer on the connection is read right); OPTIONS on a path goes to
// the origin like any method, and OPTIONS * is the server's own answer,
// never the origin's.
func TestServeHeadAndOptions(t *testing.T) {
	var methods testenv.Buffer
	origin := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(&methods, "%s %s\n", r.Method, r.RequestURI)
		if r.Method == http.MethodOptions {
			w.Header().Set("Allow", "GET, HEAD, OPTIONS")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.Header().Set("Content-Length", "11")
		_, _ = io.WriteString(w, "hello world")
	})
	addr, _ := frontOf(t, origin, "")
	w := dial(t, addr)
	w.send("HEAD /page HTTP/1.1\r\nHost: front.test\r\nX-API-Key: " + bigKey + "\r\n\r\n")
	if res, body := w.response("HEAD"); res.StatusCode != 200 || res.ContentLength != 11 || body != "" || res.Header.Get("RateLimit") == "" {
		t.Errorf("HEAD: %d, Content-Length %d, body %q, headers %v", res.StatusCode, res.ContentLength, body, res.Header)
	}
	w.send("OPTIONS /page HTTP/1.1\r\nHost: front.test\r\nX-API-Key: " + bigKey + "\r\n\r\n")
	if res, _ := w.response("OPTIONS"); res.StatusCode != http.StatusNoContent || res.Header.Get("Allow") != "GET, HEAD, OPTIONS" {
		t.Errorf("OPTIONS /page: %d %v", res.StatusCode, res.Header)
	}
	w.send("OPTIONS * HTTP/1.1\r\nHost: front.test\r\n\r\n")
	if res, _ := w.response("OPTIONS"); res.StatusCode != 200 {
		t.Errorf("OPTIONS *: %d", res.StatusCode)
	}
	// A refused HEAD: headers, no body, and the connection goes on.
	key := "X-API-Key: head-limited\r\n"
	for range 2 {
		w.send("HEAD /page HTTP/1.1\r\nHost: front.test\r\n" + key + "\r\n")
		if res, _ := w.response("HEAD"); res.StatusCode != 200 {
			t.Fatalf("within the quota: %d", res.StatusCode)
		}
	}
	w.send("HEAD /page HTTP/1.1\r\nHost: front.test\r\n" + key + "\r\n")
	if res, body := w.response("HEAD"); res.StatusCode != http.StatusTooManyRequests || body != "" || res.Header.Get("Retry-After") == "" {
		t.Errorf("HEAD over the quota: %d %q %v", res.StatusCode, body, res.Header)
	}
	if res, body := w.get("/page", "X-API-Key: "+bigKey+"\r\n"); res.StatusCode != 200 || body != "hello world" {
		t.Errorf("GET after the refused HEAD: %d %q", res.StatusCode, body)
	}
	if got, want := methods.String(), "HEAD /page\nOPTIONS /page\nHEAD /page\nHEAD /page\nGET /page\n"; got != want {
		t.Errorf("the origin saw\n%s\nwant\n%s", got, want)
	}
}

// holdingOrigin answers /slow only when release is closed (or the request
// is cancelled), after telling arrived; other paths at once.
func holdingOrigin(t *testing.T) (o *httptest.Server, arrived chan string, release chan struct{}) {
	return holdingOriginSaying(t, func(*http.Request) string { return "" })
}

// holdingOriginSaying is holdingOrigin whose answers end with say's
// words about the request.
func holdingOriginSaying(t *testing.T, say func(*http.Request) string) (o *httptest.Server, arrived chan string, release chan struct{}) {
	arrived, release = make(chan string, 4), make(chan struct{})
	o = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			arrived <- r.URL.Path
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		}
		_, _ = io.WriteString(w, "answer of "+r.URL.Path+say(r))
	}))
	t.Cleanup(o.Close)
	return o, arrived, release
}

// awaitRefused waits (bounded) until addr refuses new connections.
func awaitRefused(t *testing.T, addr string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			return
		}
		conn.Close()
		if time.Now().After(deadline) {
			t.Fatal("new connections still accepted during the shutdown")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// awaitArrival waits (bounded) until the origin has a request.
func awaitArrival(t *testing.T, arrived chan string) {
	t.Helper()
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the request did not reach the origin")
	}
}

// TestServeGracefulShutdown: on SIGTERM the binary stops taking
// connections (a new one is refused) and closes idle kept-alive ones, but
// a request in flight at a slow origin completes; then it exits 0.
func TestServeGracefulShutdown(t *testing.T) {
	origin, arrived, release := holdingOrigin(t)
	c := startBinary(t, "--config", operatorConfig(t, ""), "--origin", origin.URL)
	addr := strings.TrimPrefix(c.base, "http://")

	idle := dial(t, addr)
	if res, body := idle.get("/fast", "X-API-Key: "+bigKey+"\r\n"); res.StatusCode != 200 || body != "answer of /fast" {
		t.Fatalf("before the signal: %d %q", res.StatusCode, body)
	}
	busy := dial(t, addr)
	busy.send("GET /slow HTTP/1.1\r\nHost: front.test\r\nX-API-Key: " + bigKey + "\r\n\r\n")
	awaitArrival(t, arrived)

	c.signal(t, syscall.SIGTERM)
	c.waitOutput(t, "shutting down")
	// The listener closes as shutdown begins.
	awaitRefused(t, addr)
	if n, err := idle.r.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("idle kept-alive connection: read %d bytes, %v; want EOF", n, err)
	}
	select {
	case <-c.done:
		t.Fatalf("exited with a request in flight: %v", c.err)
	default:
	}
	close(release)
	res, body := busy.response("GET")
	if res.StatusCode != 200 || body != "answer of /slow" {
		t.Errorf("in-flight request: %d %q", res.StatusCode, body)
	}
	if err := c.wait(t); err != nil {
		t.Errorf("exit: %v (%s)", err, c.stderr.String())
	}
	if !strings.Contains(c.stdout.String(), "slidegate: stopped") {
		t.Errorf("output %q", c.stdout.String())
	}
}

// TestServeSecondSignal: a second SIGINT or SIGTERM during the graceful
// shutdown ends the process at once, by that signal, instead of waiting
// up to the grace period for a request the origin holds.
func TestServeSecondSignal(t *testing.T) {
	for _, sigs := range [][2]syscall.Signal{{syscall.SIGTERM, syscall.SIGINT}, {syscall.SIGINT, syscall.SIGINT}, {syscall.SIGTERM, syscall.SIGTERM}} {
		t.Run(fmt.Sprintf("%v then %v", sigs[0], sigs[1]), func(t *testing.T) {
			origin, arrived, _ := holdingOrigin(t)
			c := startBinary(t, "--config", operatorConfig(t, ""), "--origin", origin.URL)
			busy := dial(t, strings.TrimPrefix(c.base, "http://"))
			busy.send("GET /slow HTTP/1.1\r\nHost: front.test\r\nX-API-Key: " + bigKey + "\r\n\r\n")
			awaitArrival(t, arrived)
			c.signal(t, sigs[0])
			c.waitOutput(t, "shutting down")
			c.signal(t, sigs[1])
			err := c.wait(t)
			var ee *exec.ExitError
			if !errors.As(err, &ee) {
				t.Fatalf("exit: %v, want the end by %v", err, sigs[1])
			}
			if ws := ee.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != sigs[1] {
				t.Errorf("exit: %v (%s), want the end by %v", err, c.stderr.String(), sigs[1])
			}
		})
	}
}

// TestServeSecondSignalAsPID1: as process 1 of its PID namespace (a
// container without an init), the kernel gives SIGINT and SIGTERM no
// default action, from inside the namespace or out (docker stop, kill).
// The second signal still ends serve at once rather than waiting out the
// grace for the request the origin holds (and exiting 1): once serve
// stops listening for them, Go's runtime handles them, raises the signal
// with its default action, and when that does not end the process, exits
// with status 2.
func TestServeSecondSignalAsPID1(t *testing.T) {
	// As root a PID namespace needs nothing else; otherwise a user
	// namespace of its own (unprivileged user namespaces).
	ns := []string{"--pid", "--fork"}
	if exec.Command("unshare", append(ns, "true")...).Run() != nil {
		ns = []string{"--user", "--map-root-user", "--pid", "--fork"}
		if err := exec.Command("unshare", append(ns, "true")...).Run(); err != nil {
			testenv.Require(t, fmt.Errorf("unshare --pid (util-linux; root or unprivileged user namespaces): %v", err))
		}
	}
	origin, arrived, _ := holdingOrigin(t)
	args := append(ns, "--kill-child", binary(t), "serve", "--listen", "127.0.0.1:0", "--config", operatorConfig(t, ""), "--origin", origin.URL)
	c := startCmd(t, exec.Command("unshare", args...))
	// unshare's child is the namespace's process 1: serve.
	kids, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", c.cmd.Process.Pid, c.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(kids)))
	if err != nil {
		t.Fatalf("unshare's children %q: %v", kids, err)
	}
	busy := dial(t, strings.TrimPrefix(c.base, "http://"))
	busy.send("GET /slow HTTP/1.1\r\nHost: front.test\r\nX-API-Key: " + bigKey + "\r\n\r\n")
	awaitArrival(t, arrived)
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	c.waitOutput(t, "shutting down")
	if err := syscall.Kill(pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err = c.wait(t)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Errorf("exit: %v (%s), want status 2 (Go's, for a signal that could not end the process)", err, c.stderr.String())
	}
}

// TestServeOversizedHeaders: a client's header past the server's bound
// (64 KiB), in one long line, in many small ones, or never ended, gets a
// 431 and a closed connection at once, not a hang and not the origin;
// headers within the bound all reach the origin.
func TestServeOversizedHeaders(t *testing.T) {
	got := make(chan int, 8)
	origin := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- len(r.Header.Values("X-Many"))
	})
	addr, _ := frontOf(t, origin, "")
	many := func(n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "X-Many: value-%05d\r\n", i)
		}
		return b.String()
	}
	key := "X-API-Key: " + bigKey + "\r\n"
	tests := []struct {
		name, request string
		status        int
		many          int // X-Many lines the origin must get
	}{
		{"within the bound", "GET /x HTTP/1.1\r\nHost: front.test\r\n" + key + many(2000) + "\r\n", 200, 2000},
		{"one long line", "GET /x HTTP/1.1\r\nHost: front.test\r\n" + key + "X-Long: " + strings.Repeat("a", 80<<10) + "\r\n\r\n", 431, 0},
		{"many lines", "GET /x HTTP/1.1\r\nHost: front.test\r\n" + key + many(5000) + "\r\n", 431, 0},
		{"never ended", "GET /x HTTP/1.1\r\nHost: front.test\r\n" + key + "X-Long: " + strings.Repeat("a", 80<<10), 431, 0},
		{"long request line", "GET /" + strings.Repeat("a", 80<<10) + " HTTP/1.1\r\nHost: front.test\r\n" + key + "\r\n", 431, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := dial(t, addr)
			w.send(tt.request)
			res, _ := w.response("GET")
			if res.StatusCode != tt.status {
				t.Fatalf("status %d, want %d", res.StatusCode, tt.status)
			}
			if tt.status == 200 {
				if n := <-got; n != tt.many {
					t.Errorf("the origin got %d X-Many lines, want %d", n, tt.many)
				}
				return
			}
			if !res.Close {
				t.Error("the connection is kept after a 431")
			}
			if n, err := w.r.Read(make([]byte, 1)); err != io.EOF {
				t.Errorf("after the 431: read %d bytes, %v; want EOF", n, err)
			}
		})
	}
	select {
	case n := <-got:
		t.Errorf("a refused request reached the origin (%d X-Many lines)", n)
	default:
	}
}

// TestServeFullDuplex: an origin that answers while the client is still
// sending (a streaming upload with a streamed answer, each line echoed
// before the next is sent) works through slidegate as it does directly.
// Go's HTTP/1 server reads the rest of a request body before an answer's
// header goes out unless told otherwise, and the client, waiting for the
// echo, never sends it.
func TestServeFullDuplex(t *testing.T) {
	origin := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if err := rc.EnableFullDuplex(); err != nil {
			t.Errorf("origin: %v", err)
		}
		w.Header().Set("Content-Type", "text/plain")
		br := bufio.NewReader(r.Body)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				fmt.Fprintf(w, "end: %v\n", err)
				return
			}
			fmt.Fprintf(w, "got %s", line)
			if err := rc.Flush(); err != nil {
				t.Errorf("origin flush: %v", err)
				return
			}
		}
	})
	addr, _ := frontOf(t, origin, "")
	w := dial(t, addr)
	w.send("POST /duplex HTTP/1.1\r\nHost: front.test\r\nX-API-Key: " + bigKey + "\r\nTransfer-Encoding: chunked\r\n\r\n")
	var br *bufio.Reader
	for i := 1; i <= 3; i++ {
		line := fmt.Sprintf("line %d\n", i)
		w.send(fmt.Sprintf("%x\r\n%s\r\n", len(line), line))
		if i == 1 {
			res, err := http.ReadResponse(w.r, nil)
			if err != nil {
				t.Fatalf("no answer while the body is being sent: %v", err)
			}
			defer res.Body.Close()
			if res.StatusCode != 200 || res.Header.Get("RateLimit") == "" {
				t.Fatalf("status %d, headers %v", res.StatusCode, res.Header)
			}
			br = bufio.NewReader(res.Body)
		}
		if got, err := br.ReadString('\n'); got != "got "+line || err != nil {
			t.Fatalf("echo of line %d: %q, %v", i, got, err)
		}
	}
	w.send("0\r\n\r\n")
	if rest, err := io.ReadAll(br); string(rest) != "end: EOF\n" || err != nil {
		t.Errorf("the end: %q, %v", rest, err)
	}
}

// TestServeUnreadBody: a request whose body nobody read to its end (the
// origin was down, or answered first) gets its answer, and the connection
// is closed after it; one whose body the origin read stays alive. In full
// duplex, Go's server read the rest of the body after the handler and
// panicked on its next read of the kept connection ("invalid concurrent
// Body.Read call", golang/go#68560): a WARN with a stack, and the
// connection cut. Reading the rest in the handler instead made a client
// that waits for the answer before it sends its body (Expect:
// 100-continue, a stream) wait for ever. The deadline of dial only bounds
// a hang; no timing is asserted.
func TestServeUnreadBody(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String()
	ln.Close()
	early := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).EnableFullDuplex()
		w.Header().Set("Content-Length", "0")
		w.WriteHeader(http.StatusRequestEntityTooLarge) // without reading the body
		_ = http.NewResponseController(w).Flush()
	}))
	t.Cleanup(early.Close)
	reads := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%d bytes", len(b))
	}))
	t.Cleanup(reads.Close)
	for _, tt := range []struct {
		name, origin, head string // head: the request's framing headers and what is sent of its body
		status             int
		keep               bool // the connection stays alive
	}{
		{"origin down", down, "Content-Length: 3\r\n\r\na=1", http.StatusBadGateway, false},
		{"origin down, 100-continue", down, "Expect: 100-continue\r\nContent-Length: 3\r\n\r\n", http.StatusBadGateway, false},
		{"origin answers first, stream", early.URL, "Transfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n", http.StatusRequestEntityTooLarge, false},
		{"origin reads the body", reads.URL, "Content-Length: 3\r\n\r\na=1", http.StatusOK, true},
		{"origin reads the stream", reads.URL, "Transfer-Encoding: chunked\r\n\r\n3\r\na=1\r\n0\r\n\r\n", http.StatusOK, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			logs := &testenv.Buffer{}
			base, _ := serveLogging(t, logs, "--config", operatorConfig(t, ""), "--origin", tt.origin)
			addr := strings.TrimPrefix(base, "http://")
			w := dial(t, addr)
			w.send("POST /upload HTTP/1.1\r\nHost: front.test\r\nX-API-Key: " + bigKey + "\r\n" + tt.head)
			res, body := w.response("POST")
			if res.StatusCode != tt.status || res.Close == tt.keep {
				t.Fatalf("%d %q, connection closed %t; want %d, closed %t", res.StatusCode, body, res.Close, tt.status, !tt.keep)
			}
			next := w
			if !tt.keep {
				next = dial(t, addr)
			}
			next.send("GET /after HTTP/1.1\r\nHost: front.test\r\nX-API-Key: " + bigKey + "\r\n\r\n")
			if res, body := next.response("GET"); res.StatusCode != tt.status && res.StatusCode != http.StatusOK {
				t.Errorf("the next request: %d %q", res.StatusCode, body)
			}
			if strings.Contains(logs.String(), "panic") {
				t.Errorf("the server panicked:\n%s", logs)
			}
		})
	}
}

// TestServeUnderscoreHeaders: to an origin that reads headers CGI-style
// (WSGI, Rack, PHP), X_API_KEY is X-API-Key. slidegate does not read it
// as a key, so a client whose key has used its quota could send it so,
// be counted as an anonymous IP (a new quota per address) and still be
// served as the key; or forge X_Real_IP. No header whose name holds an
// underscore reaches the origin, from a client or a trusted proxy.
func TestServeUnderscoreHeaders(t *testing.T) {
	got := make(chan http.Header, 1)
	origin := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
	})
	for _, trusted := range []string{`"10.0.0.0/8"`, `"127.0.0.1"`} {
		t.Run(trusted, func(t *testing.T) {
			addr, _ := frontOf(t, origin, `, "identity": {"trusted_proxies": [`+trusted+`]}`)
			res, body := dial(t, addr).get("/items", "X-API-Key: "+bigKey+"\r\nX_API_KEY: spent-key\r\nx_api_key: spent-key\r\nX_Real_IP: 203.0.113.7\r\nX_Forwarded_For: 203.0.113.7\r\nSome_Header: v\r\nX-Other: kept\r\n")
			if res.StatusCode != 200 {
				t.Fatalf("status %d %s", res.StatusCode, body)
			}
			h := <-got
			for k, v := range h {
				if strings.Contains(k, "_") {
					t.Errorf("%s %q reached the origin", k, v)
				}
			}
			if h.Get("X-Api-Key") != bigKey || h.Get("X-Other") != "kept" {
				t.Errorf("the origin got %v, want X-API-Key and X-Other as sent", h)
			}
		})
	}
}

// TestServePriorKnowledgePreface: a client that opens with HTTP/2's
// connection preface over cleartext ("PRI * HTTP/2.0", h2c with prior
// knowledge: grpc-go with insecure credentials, curl
// --http2-prior-knowledge) gets a 505, and that is all: net/http's server
// hands the preface to the handler as a request (for a handler that would
// take the connection over), and the pre-filter counted it against the
// client's address and sent the origin a "PRI /*" nobody asked for, its
// body announced chunked.
func TestServePriorKnowledgePreface(t *testing.T) {
	seen := make(chan string, 4)
	origin := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Method + " " + r.URL.Path
	})
	addr, _ := frontOf(t, origin, "")
	w := dial(t, addr)
	w.send("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
	res, body := w.response("PRI")
	if status, _ := problemOf(t, res, body); res.StatusCode != http.StatusHTTPVersionNotSupported || status != res.StatusCode || !res.Close {
		t.Fatalf("the preface got %d, Close %t: %s; want a 505 problem that closes the connection", res.StatusCode, res.Close, body)
	}
	if k := res.Header.Get("X-RateLimit-Remaining"); k != "" {
		t.Errorf("the 505 has X-RateLimit-Remaining %q: it was counted", k)
	}
	// Anonymous clients have 2 requests: the preface took none of them.
	for i := range 2 {
		if res, body := dial(t, addr).get("/after", ""); res.StatusCode != http.StatusOK {
			t.Fatalf("request %d after the preface: %d %s", i+1, res.StatusCode, body)
		}
		if got := <-seen; got != "GET /after" {
			t.Fatalf("the origin got %q, want GET /after", got)
		}
	}
}
