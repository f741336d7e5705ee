//go:build !(js && wasm)

package main

import (
	"bufio"
	"crypto/sha1"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate/edge/internal/workerd"
)

// wsKey is the handshake's Sec-WebSocket-Key (RFC 6455 1.3's example).
const wsKey = "dGhlIHNhbXBsZSBub25jZQ=="

// wsAccept is the Sec-WebSocket-Accept for key (RFC 6455 4.2.2).
func wsAccept(key string) string {
	h := sha1.Sum([]byte(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	return base64.StdEncoding.EncodeToString(h[:])
}

// wsOrigin is the test origin's WebSocket: it takes the upgrade (426
// without one), reads one text message and answers "echo:" and the
// message.
func wsOrigin(w http.ResponseWriter, r *http.Request) {
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		http.Error(w, "upgrade required", http.StatusUpgradeRequired)
		return
	}
	c, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(rw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nX-Origin-Ws: yes\r\nSec-WebSocket-Accept: %s\r\n\r\n", wsAccept(r.Header.Get("Sec-WebSocket-Key")))
	if rw.Flush() != nil {
		return
	}
	if msg, err := wsRead(rw.Reader); err == nil {
		_ = wsWrite(c, "echo:"+msg, false)
	}
}

// wsRead reads one unfragmented frame of up to 125 bytes and returns its
// payload.
func wsRead(r *bufio.Reader) (string, error) {
	var hdr [2]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return "", err
	}
	n := int(hdr[1] & 0x7f)
	if n > 125 {
		return "", fmt.Errorf("frame of %d bytes or more", n)
	}
	var mask [4]byte
	if hdr[1]&0x80 != 0 {
		if _, err := io.ReadFull(r, mask[:]); err != nil {
			return "", err
		}
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return "", err
	}
	for i := range b {
		b[i] ^= mask[i%4]
	}
	return string(b), nil
}

// wsWrite writes msg (up to 125 bytes) as a text frame, masked as a
// client's must be.
func wsWrite(w io.Writer, msg string, masked bool) error {
	b := []byte{0x81, byte(len(msg))}
	p := []byte(msg)
	if masked {
		mask := []byte{0x5a, 0x17, 0xc3, 0x08}
		b[1] |= 0x80
		b = append(b, mask...)
		for i := range p {
			p[i] ^= mask[i%4]
		}
	}
	_, err := w.Write(append(b, p...))
	return err
}

// wsHandshake sends a WebSocket handshake for path to w, with the API key
// and the Upgrade value upgrade, and returns the connection, its reader
// and the answer.
func wsHandshake(t *testing.T, w *workerd.Worker, path, key, upgrade string) (net.Conn, *bufio.Reader, *http.Response) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(w.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(30 * time.Second)) // a bound on a hang
	req, _ := http.NewRequest("GET", w.URL+path, nil)
	req.Header.Set("X-API-Key", key)
	req.Header.Set("Upgrade", upgrade)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Sec-WebSocket-Key", wsKey)
	req.Header.Set("Sec-WebSocket-Version", "13")
	if err := req.Write(c); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, req)
	if err != nil {
		t.Fatal(err)
	}
	return c, br, res
}

// TestWorkerdWebSocket: a WebSocket handshake through the Worker reaches
// the origin as one, is counted, and the client talks to the origin's
// WebSocket, as through the local server's proxy. The Worker dropped the
// Upgrade header as hop-by-hop, so the origin got a plain GET and
// answered 426; and syumai's writer cannot answer 101, which must carry
// the WebSocket.
func TestWorkerdWebSocket(t *testing.T) {
	w := slidegateWorker(t)
	c, br, res := wsHandshake(t, w, originPath+"ws", randomKey(t), "websocket")
	if res.StatusCode != http.StatusSwitchingProtocols {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("handshake: %s %q, want 101", res.Status, b)
	}
	for k, want := range map[string]string{
		"Sec-Websocket-Accept": wsAccept(wsKey), "X-Origin-Ws": "yes",
		"X-Ratelimit-Remaining": "4", "Ratelimit-Policy": fmt.Sprintf(`"day";q=5;w=%d`, int(testWindow.Seconds())),
	} {
		if got := res.Header.Get(k); got != want {
			t.Errorf("101: %s %q, want %q", k, got, want)
		}
	}
	if err := wsWrite(c, "hello", true); err != nil {
		t.Fatal(err)
	}
	if msg, err := wsRead(br); err != nil || msg != "echo:hello" {
		t.Errorf("message from the origin: %q, %v; want %q", msg, err, "echo:hello")
	}
}
