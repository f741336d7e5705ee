//go:build !(js && wasm)

package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/slidegate/slidegate/httpapi"
	"github.com/slidegate/slidegate/internal/testenv"
)

// TestWorkerdOriginDownUpload: an upload to an origin that is down gets its
// 502, and the Worker goes on answering. The Worker had marked the body as
// the subrequest's and left it unread when fetch failed; the client's
// upload stalled half read, and the next request, on a new connection, was
// answered after about 70 s (the client below gives up after 30 s: a
// bound on a hang, not a measurement). A JavaScript Worker passing
// request.body to the same fetch did not stall.
func TestWorkerdOriginDownUpload(t *testing.T) {
	port, err := testenv.FreePort() // nothing listens there
	if err != nil {
		t.Fatal(err)
	}
	toml := freeWorkerToml("slidegate-down", fmt.Sprintf("http://127.0.0.1:%d", port))
	w := workerWith(t, toml)
	for _, tc := range []struct {
		name string
		body func() io.Reader // a MultiReader has no length: chunked
	}{
		{"64 KiB", func() io.Reader { return bytes.NewReader(bytes.Repeat([]byte("x"), 64<<10)) }},
		// Within drain's maxDiscard: handed to fetch as the client's own
		// stream (for its length, 0bfc7b1), the upload could no longer be
		// read once fetch failed, and the Worker stalled again.
		{"200 KiB", func() io.Reader { return bytes.NewReader(bytes.Repeat([]byte("x"), 200<<10)) }},
		{"200 KiB chunked", func() io.Reader { return io.MultiReader(bytes.NewReader(bytes.Repeat([]byte("x"), 200<<10))) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i := range 2 {
				// A client per request, so that no request waits on
				// another's connection.
				client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{}}
				req, _ := http.NewRequest("POST", w.URL+"/upload", tc.body())
				res, body := send(t, client, req)
				if res.StatusCode != http.StatusBadGateway || res.Header.Get("Content-Type") != "application/problem+json" {
					t.Errorf("upload %d: %s %q, want a 502 problem", i+1, res.Status, body)
				}
				client = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{}}
				req, _ = http.NewRequest("GET", w.URL+httpapi.HealthPath, nil)
				if res, body := send(t, client, req); res.StatusCode != http.StatusOK {
					t.Fatalf("after upload %d: health check %s %q", i+1, res.Status, body)
				}
			}
		})
	}
}

// freeWorkerToml is the wrangler.toml of a Worker named name in front of
// origin, whose clients have 1,000 requests a minute.
func freeWorkerToml(name, origin string) string {
	return fmt.Sprintf(`name = %q
main = "build/worker.mjs"
compatibility_date = "2026-04-01"

[[kv_namespaces]]
binding = "SLIDEGATE_KV"
id = "test"

[vars]
ORIGIN_URL = %q
SLIDEGATE_CONFIG = '{"plans": {"free": {"limits": [{"name": "minute", "limit": 1000, "window": "1m"}]}}, "default_plan": "free", "store_timeout": "10s"}'
`, name, origin)
}
