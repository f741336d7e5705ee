package httpapi

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/slidegate/slidegate/kvstore/memstore"
)

// TestOutageDenialNamesItsRules: a 429 of a local rule while the shared
// store fails names in violated-policies the rules that refused it, and no
// rule that was not decided. The shared rules' zero decisions (no name,
// not allowed) were listed as "" beside the local rule's.
func TestOutageDenialNamesItsRules(t *testing.T) {
	for _, tc := range []struct {
		name string
		ip   []any
	}{
		{"no ip_limits", []any{}},
		{"shared ip rule", []any{map[string]any{"name": "ip-min", "limit": 100, "window": "1m", "scope": "shared"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, burstConfig(t, tc.ip, 1), func(o *Options) { o.Local, o.Store = memstore.New(), &outage{s: memstore.New(), down: true} })
			f.do(req{})
			w := f.do(req{})
			if w.Code != 429 {
				t.Fatalf("second request: %d, want 429; logs:\n%s", w.Code, f.logs)
			}
			var body struct {
				Violated []string `json:"violated-policies"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
				t.Fatal(err)
			}
			if want := []string{"burst"}; !slices.Equal(body.Violated, want) {
				t.Errorf("violated-policies %q, want %q", body.Violated, want)
			}
		})
	}
}
