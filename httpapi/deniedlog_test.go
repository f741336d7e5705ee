package httpapi

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestDeniedLogNamesTheDecidingIdentity: the "denied" line of a request
// the ip rules refused names the IP they counted, not the API key's
// identity, whose plan did not decide (found by the store-failure review:
// the line named the key, and an operator looking for the flooding IP
// found a client within its plan).
func TestDeniedLogNamesTheDecidingIdentity(t *testing.T) {
	cfg := testConfig(t, func(m map[string]any) {
		m["ip_limits"] = []any{map[string]any{"name": "ip-min", "limit": 1, "window": "1m", "scope": "local"}}
		m["costs"] = []any{}
	})
	f := newFixture(t, cfg, nil)
	key := map[string]string{"X-API-Key": "sk_live_someone"}
	for i, want := range []int{200, 429} {
		if w := f.do(req{header: key}); w.Code != want {
			t.Fatalf("request %d: %d, want %d", i+1, w.Code, want)
		}
	}
	var line map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSpace(f.logs.String())), &line); err != nil {
		t.Fatalf("%v: %s", err, f.logs)
	}
	if line["msg"] != "denied" || line["rule"] != "ip-min" || line["identity"] != "ip:192.0.2.1" {
		t.Errorf("log line %v, want the ip rule's denial of ip:192.0.2.1", line)
	}
}
