//go:build !(js && wasm)

package main

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/slidegate/slidegate/httpapi"
	"github.com/slidegate/slidegate/internal/parity"
)

// TestWorkerdKeySpace: the Worker in workerd (its Wasm build, with
// keylines_js.go) and the local server count a key with Unicode white
// space or a byte order mark around it as the key within, and the Worker's
// origin gets the key header as it came, the local server's trimmed
// (README, identity); a lone byte 0xA0 is U+FFFD to the Worker, another
// client, where the local server counts the key. What the Worker's origin
// gets is what workerdHeader, the model of the in-process parity tests,
// says.
func TestWorkerdKeySpace(t *testing.T) {
	w := slidegateWorker(t)
	client := passClient(t)
	k := randomKey(t)
	clock := parity.NewClock(time.Now())
	local := parity.LocalOf(t, parity.Config{Text: testConfig}, clock)
	for i, tc := range []struct {
		key string
		// remaining of the free plan's 5 a day on each platform (-1: a 429)
		local, worker int
	}{
		{k, 4, 4},
		{k + "\u00a0", 3, 3},
		{"\u3000" + k, 2, 2},
		{k + "\ufeff", 1, 1},
		{"\ufeff" + k + "\u2028", 0, 0},
		{k + "\xa0", -1, 4}, // "<k>\ufffd" to the Worker: a client of its own
	} {
		req, _ := http.NewRequest("GET", w.URL+originPath+"echo", nil)
		req.Header["X-Api-Key"] = []string{tc.key}
		res, body := send(t, client, req)
		lo, err := local.Do(&parity.Request{Method: "GET", Target: originPath + "echo", Client: parity.Clients[0],
			Header: []parity.Field{{Name: "X-API-Key", Value: tc.key}}})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []struct {
			name      string
			status    int
			remaining string
			want      int
		}{
			{"worker", res.StatusCode, res.Header.Get("X-RateLimit-Remaining"), tc.worker},
			{"local", lo.Status, lo.Header.Get("X-RateLimit-Remaining"), tc.local},
		} {
			switch {
			case p.want < 0 && p.status != http.StatusTooManyRequests:
				t.Errorf("request %d, key %q: %s answered %d, want 429", i+1, tc.key, p.name, p.status)
			case p.want >= 0 && (p.status != http.StatusOK || p.remaining != strconv.Itoa(p.want)):
				t.Errorf("request %d, key %q: %s answered %d with %q left, want 200 with %d", i+1, tc.key, p.name, p.status, p.remaining, p.want)
			}
		}
		var e echo
		if res.StatusCode == http.StatusOK {
			if err := json.Unmarshal(body, &e); err != nil {
				t.Fatalf("request %d: %q: %v", i+1, body, err)
			}
			if got, want := e.Header["X-Api-Key"], []string{workerdHeader(tc.key)}; !slices.Equal(got, want) {
				t.Errorf("request %d, key %q: the Worker's origin got %q, want %q (as it came)", i+1, tc.key, got, want)
			}
		}
		if lo.Seen != nil {
			if got, want := lo.Seen.Header["X-Api-Key"], []string{httpapi.TrimKey(tc.key)}; !slices.Equal(got, want) {
				t.Errorf("request %d, key %q: the local server's origin got %q, want %q (trimmed)", i+1, tc.key, got, want)
			}
		}
	}
}
