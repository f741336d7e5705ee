package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestServeStandardLogIsJSON: what Go's HTTP transport writes to the
// standard logger reaches serve's log as a JSON WARN line, its message cut
// at 512 bytes, like every other line on standard error. An origin that
// sends more than its Content-Length says makes the transport log
// "Unsolicited response received on idle HTTP channel" with up to 4 KiB of
// it quoted: that was a plain line among the JSON ones, carrying the
// origin's bytes whole.
func TestServeStandardLogIsJSON(t *testing.T) {
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi"+strings.Repeat("x", 2000))
		_, _ = brw.ReadByte() // until slidegate closes the connection
	}))
	t.Cleanup(origin.Close)
	c := startBinary(t, "--config", operatorConfig(t, ""), "--origin", origin.URL)
	if res, body := dial(t, strings.TrimPrefix(c.base, "http://")).get("/items", "X-API-Key: "+bigKey+"\r\n"); res.StatusCode != http.StatusOK || body != "hi" {
		t.Fatalf("answer %d %q", res.StatusCode, body)
	}
	waitPrinted(t, c.stderr, "Unsolicited response") // the line about the origin's extra bytes
	for line := range strings.Lines(c.stderr.String()) {
		var m struct{ Level, Msg string }
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Errorf("not a JSON line: %.200q", line)
			continue
		}
		if strings.Contains(m.Msg, "Unsolicited") && (m.Level != "WARN" || len(m.Msg) > 512+len("…")) {
			t.Errorf("level %s, message of %d bytes; want WARN, at most 512 and …", m.Level, len(m.Msg))
		}
	}
}
