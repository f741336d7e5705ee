//go:build !(js && wasm)

package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slidegate/slidegate/httpapi"
)

// TestWorkerdWebSocketRefused: an origin that refuses the upgrade (a plain
// answer to a handshake) is passed back as it answered.
func TestWorkerdWebSocketRefused(t *testing.T) {
	w := slidegateWorker(t)
	for _, tc := range []struct {
		name, path string
		want       int
		body       string
	}{
		{"200", originPath + "cookies", http.StatusOK, "cookies"},
		{"403", originPath + "status?code=403", http.StatusForbidden, "status 403"},
		{"426", originPath + "status?code=426", http.StatusUpgradeRequired, "status 426"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, res := wsHandshake(t, w, tc.path, steadyKey, "websocket")
			b, _ := io.ReadAll(res.Body)
			if res.StatusCode != tc.want || string(b) != tc.body {
				t.Errorf("%s %q, want %d %q", res.Status, b, tc.want, tc.body)
			}
		})
	}
}

// TestWorkerdWebSocketCounted: a WebSocket is counted once, its count
// reaches KV, and once the plan's limit is used up its handshake gets the
// pre-filter's 429, not the origin's 101.
func TestWorkerdWebSocketCounted(t *testing.T) {
	w := slidegateWorker(t)
	key := randomKey(t)
	id := sha256.Sum256([]byte("k:" + sha256Hex(key)))
	prefix := "sg:day:" + hex.EncodeToString(id[:16]) + ":"
	c, br, res := wsHandshake(t, w, originPath+"ws", key, "websocket")
	if res.StatusCode != http.StatusSwitchingProtocols || res.Header.Get("X-Ratelimit-Remaining") != "4" {
		t.Fatalf("handshake: %s, X-RateLimit-Remaining %q; want 101, 4", res.Status, res.Header.Get("X-Ratelimit-Remaining"))
	}
	if err := wsWrite(c, "hi", true); err != nil {
		t.Fatal(err)
	}
	if msg, err := wsRead(br); err != nil || msg != "echo:hi" {
		t.Fatalf("message: %q, %v", msg, err)
	}
	var inKV int64
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		inKV = 0
		for _, k := range debugState(t, w, prefix).Keys {
			inKV += k.N
		}
		if inKV == 1 {
			break
		}
	}
	if inKV != 1 {
		t.Errorf("KV holds %d for the WebSocket's client, want 1", inKV)
	}
	client := passClient(t)
	for i := range 4 {
		res, _ := get(t, client, w.URL+originPath+"echo", key)
		if want := strings.Repeat("x", 3-i); res.StatusCode != http.StatusOK || res.Header.Get("X-Ratelimit-Remaining") != string(rune('0'+len(want))) {
			t.Fatalf("request %d after the WebSocket: %s, X-RateLimit-Remaining %q, want 200, %d", i+2, res.Status, res.Header.Get("X-Ratelimit-Remaining"), len(want))
		}
	}
	_, _, res = wsHandshake(t, w, originPath+"ws", key, "websocket")
	if res.StatusCode != http.StatusTooManyRequests {
		t.Errorf("handshake over the limit: %s, want 429", res.Status)
	}
}

// TestWorkerdWebSocketUpgradeForms: a handshake whose Upgrade names
// websocket in another case reaches the origin's WebSocket. (One that
// lists websocket among other protocols reaches the Worker, or leaves it,
// without Upgrade under wrangler dev: the origin gets a plain GET.)
func TestWorkerdWebSocketUpgradeForms(t *testing.T) {
	w := slidegateWorker(t)
	for _, upgrade := range []string{"WebSocket", "WEBSOCKET"} {
		t.Run(upgrade, func(t *testing.T) {
			c, br, res := wsHandshake(t, w, originPath+"ws", steadyKey, upgrade)
			if res.StatusCode != http.StatusSwitchingProtocols {
				b, _ := io.ReadAll(res.Body)
				t.Fatalf("handshake: %s %q, want 101", res.Status, b)
			}
			if err := wsWrite(c, "hi", true); err != nil {
				t.Fatal(err)
			}
			if msg, err := wsRead(br); err != nil || msg != "echo:hi" {
				t.Errorf("message: %q, %v", msg, err)
			}
		})
	}
}

// TestWorkerdUploadAborted: an upload of a declared length that the
// client abandons half way reaches the origin as a cut body (a read
// error), never as a whole one, and the Worker goes on answering. (A
// chunked upload cut off after a whole chunk reaches the origin as whole
// under wrangler dev, a JavaScript Worker's too: the runtime gives the
// Worker no error to pass on.)
func TestWorkerdUploadAborted(t *testing.T) {
	type seen struct {
		n   int
		err error
	}
	got, arrived := make(chan seen, 1), make(chan struct{})
	var once sync.Once
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { close(arrived) })
		b, err := io.ReadAll(r.Body)
		got <- seen{len(b), err}
	}))
	defer origin.Close()
	w := workerWith(t, freeWorkerToml("slidegate-abort", origin.URL))
	c, err := net.Dial("tcp", strings.TrimPrefix(w.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.WriteString(c, "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 1048576\r\n\r\n")
	_, _ = c.Write(bytes.Repeat([]byte("x"), 1<<14))
	// The client leaves once the origin has the request.
	select {
	case <-arrived:
	case <-time.After(20 * time.Second):
		t.Fatal("the upload did not reach the origin")
	}
	c.Close()
	select {
	case s := <-got:
		if s.err == nil {
			t.Errorf("the origin read %d bytes as a whole body, want a read error", s.n)
		}
	case <-time.After(30 * time.Second):
		t.Error("the origin got no request")
	}
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{}}
	req, _ := http.NewRequest("GET", w.URL+httpapi.HealthPath, nil)
	if res, body := send(t, client, req); res.StatusCode != http.StatusOK {
		t.Fatalf("after the abandoned upload: health check %s %q", res.Status, body)
	}
}

// TestWorkerdWebSocketsOpen: WebSockets held open together all keep
// talking to the origin, and the Worker keeps answering.
func TestWorkerdWebSocketsOpen(t *testing.T) {
	w := slidegateWorker(t)
	const n = 60
	type sock struct {
		c  net.Conn
		br *bufio.Reader
	}
	socks := make([]sock, n)
	for i := range socks {
		c, br, res := wsHandshake(t, w, originPath+"ws", steadyKey, "websocket")
		if res.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("handshake %d: %s", i+1, res.Status)
		}
		socks[i] = sock{c, br}
	}
	for i, s := range socks {
		if err := wsWrite(s.c, "hi", true); err != nil {
			t.Fatalf("socket %d: %v", i+1, err)
		}
		if msg, err := wsRead(s.br); err != nil || msg != "echo:hi" {
			t.Fatalf("socket %d: %q, %v", i+1, msg, err)
		}
	}
	if !strings.Contains(w.Log(), "restarted") {
		return
	}
	t.Errorf("the Worker restarted")
}

// untypedMore lets the test origin's untyped stream go on.
var untypedMore = make(chan struct{})

// TestWorkerdUntypedStream: an untyped answer streamed by the origin gets
// the type of its first chunk, and that chunk reaches the client before
// the origin sends more (sniffing waits for no 512 bytes).
func TestWorkerdUntypedStream(t *testing.T) {
	w := slidegateWorker(t)
	client := passClient(t)
	req, _ := http.NewRequest("GET", w.URL+originPath+"untyped?as=stream", nil)
	req.Header.Set("X-API-Key", steadyKey)
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); ct != "text/plain; charset=utf-8" {
		t.Errorf("Content-Type %q, want text/plain; charset=utf-8", ct)
	}
	first := make([]byte, len("data: 1\n\n"))
	if _, err := io.ReadFull(res.Body, first); err != nil || string(first) != "data: 1\n\n" {
		t.Fatalf("first chunk %q, %v", first, err)
	}
	untypedMore <- struct{}{}
	if rest, err := io.ReadAll(res.Body); err != nil || string(rest) != "data: 2\n\n" {
		t.Errorf("rest %q, %v", rest, err)
	}
}

// TestWorkerdOriginRefusesUpload: an origin that answers an upload without
// reading it (413) is passed back, and the Worker goes on answering.
func TestWorkerdOriginRefusesUpload(t *testing.T) {
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "too large", http.StatusRequestEntityTooLarge)
	}))
	defer origin.Close()
	w := workerWith(t, freeWorkerToml("slidegate-refuse", origin.URL))
	for _, tc := range []struct {
		name string
		body func() io.Reader // a MultiReader has no length: chunked
	}{
		{"1 MiB", func() io.Reader { return bytes.NewReader(bytes.Repeat([]byte("x"), 1<<20)) }},
		{"1 MiB chunked", func() io.Reader { return io.MultiReader(bytes.NewReader(bytes.Repeat([]byte("x"), 1<<20))) }},
		{"200 KiB", func() io.Reader { return bytes.NewReader(bytes.Repeat([]byte("x"), 200<<10)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{}}
			req, _ := http.NewRequest("PUT", w.URL+"/upload", tc.body())
			if res, err := client.Do(req); err == nil {
				t.Logf("upload: %s", res.Status)
				res.Body.Close()
			} else {
				t.Logf("upload: %v", err)
			}
			client = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{}}
			req, _ = http.NewRequest("GET", w.URL+httpapi.HealthPath, nil)
			if res, body := send(t, client, req); res.StatusCode != http.StatusOK {
				t.Fatalf("after the refused upload: health check %s %q", res.Status, body)
			}
		})
	}
}

// hugeLen is the length of the test origin's huge untyped answer: more than
// the buffers between the origin and a client that reads none of it.
const hugeLen = 48 << 20

// hugeStall is how long the test origin's write of a chunk of its huge
// answer may wait for the Worker to read before the origin gives up: the
// Worker has stopped reading. A busy machine can only make it give up
// early, never make the test fail.
const hugeStall = 2 * time.Second

// hugeEnd is how the test origin's huge untyped answer ended: the bytes
// its writes took, and nil when it was sent whole.
type hugeEnd struct {
	sent int
	err  error
}

// untypedHuge receives how the test origin's huge untyped answer ended.
var untypedHuge = make(chan hugeEnd, 1)

// TestWorkerdUntypedBackpressure: the body of an untyped answer of a
// declared length, which goes through Go to be sniffed, is read from the
// origin no faster than the client reads it, and keeps its Content-Length.
// syumai's writer filled the FixedLengthStream of such a body without
// waiting: the Worker read all 48 MiB from the origin for a client that
// had read 64 KiB, and kept what the client had not read in the isolate
// (800 MB of workerd's memory for 96 MB to a slow client; Cloudflare
// resets an isolate past 128 MB). Now the origin's writes stall once the
// buffers in between are full, and it gives up.
func TestWorkerdUntypedBackpressure(t *testing.T) {
	w := slidegateWorker(t)
	host := strings.TrimPrefix(w.URL, "http://")
	conn, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := fmt.Fprintf(conn, "GET %suntyped?as=huge HTTP/1.1\r\nHost: %s\r\nX-API-Key: %s\r\n\r\n", originPath, host, steadyKey); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "application/octet-stream" || res.ContentLength != hugeLen {
		t.Errorf("%s, Content-Type %q, Content-Length %d; want 200, application/octet-stream, %d",
			res.Status, res.Header.Get("Content-Type"), res.ContentLength, hugeLen)
	}
	if _, err := io.ReadFull(res.Body, make([]byte, 64<<10)); err != nil {
		t.Fatal(err)
	}
	// The client reads no more, and stays.
	select {
	case end := <-untypedHuge:
		// A stall of hugeStall in a Worker that reads ahead (a loaded
		// machine) could end the answer early too: the bytes sent tell
		// the two apart, the buffers in between (13 to 26 MB measured,
		// wrangler's proxy among them) against more than 3/4 of hugeLen.
		t.Logf("the origin's writes took %d bytes, then %v", end.sent, end.err)
		if end.err == nil || end.sent > hugeLen*3/4 {
			t.Errorf("the origin sent %d of %d bytes (%v) to a client that read 64 KiB: the Worker read ahead of the client", end.sent, hugeLen, end.err)
		}
	case <-time.After(2 * time.Minute): // a hang limit: the origin's answer ends either way
		t.Fatal("the origin's answer did not end")
	}
}
