//go:build !(js && wasm)

package main

import (
	"net/http"
	"testing"
	"time"
)

// TestWorkerdUnreturnedInstancesFreed: the Go instance of a proxied answer
// whose body the runtime takes from fetch's stream, or of a WebSocket,
// never returns from serve: syumai's Done closes when the runtime has read
// syumai's own body, which such an answer leaves unread. Nothing reachable
// refers to such an instance, and V8 collects it (debugReport.Freed), each
// WebSocket still talking to the origin. Held, 160 of them (about 5 MiB
// each) would be several times an isolate's 128 MB, which Cloudflare then
// resets with the requests in flight on it; wrangler dev does not.
func TestWorkerdUnreturnedInstancesFreed(t *testing.T) {
	w := slidegateWorker(t)
	const n = 80
	start := debugState(t, w, "")
	for i := range n {
		c, br, res := wsHandshake(t, w, originPath+"ws", randomKey(t), "websocket")
		if res.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("WebSocket %d: %s, want 101", i+1, res.Status)
		}
		if err := wsWrite(c, "hi", true); err != nil {
			t.Fatal(err)
		}
		if msg, err := wsRead(br); err != nil || msg != "echo:hi" {
			t.Fatalf("WebSocket %d: message %q, %v; want %q", i+1, msg, err, "echo:hi")
		}
		c.Close()
	}
	client := passClient(t)
	for i := range n {
		if res, body := get(t, client, w.URL+originPath+"echo", randomKey(t)); res.StatusCode != http.StatusOK {
			t.Fatalf("GET %d: %s %q, want 200", i+1, res.Status, body)
		}
	}
	if res, body := get(t, client, w.URL+"/healthz", ""); res.StatusCode != http.StatusOK {
		t.Errorf("GET /healthz: %s %q, want 200", res.Status, body)
	}
	var rep debugReport
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if rep = debugState(t, w, ""); rep.Freed-start.Freed >= 2*n {
			break
		}
	}
	live, freed := rep.Live-start.Live, rep.Freed-start.Freed
	t.Logf("%d of %d Go instances did not return from serve; %d unreturned instances were collected meanwhile", live, 2*n, freed)
	if freed < n { // all, once V8 has collected; half leaves room for a late collection
		t.Errorf("%d of %d Go instances collected, want them all: each holds about 5 MiB of the isolate's 128 MB", freed, 2*n)
	}
}
