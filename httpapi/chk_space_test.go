package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// TestCheckKeyUnicodeSpace: the check API drops what the pre-filter drops
// around a key (trimKey): a service that passes on the key header it read,
// "<pro key>\u00a0", asked about a fresh default-plan identity while the
// pre-filter counted the pro key, used up; and "\u3000" alone, no key to
// the pre-filter, was a client of its own. A key of only such characters
// is a 400 naming key, as one of only spaces is.
func TestCheckKeyUnicodeSpace(t *testing.T) {
	for _, tt := range []struct {
		name, key string
		status    int
	}{
		{"no-break space after", proKey + "\u00a0", http.StatusOK},
		{"ideographic space before", "\u3000" + proKey, http.StatusOK},
		{"next line and line separator", "\u0085" + proKey + "\u2028", http.StatusOK},
		{"only a no-break space", "\u00a0", http.StatusBadRequest},
		{"only em spaces", "\u2003\u2003", http.StatusBadRequest},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, testConfig(t, nil), nil)
			for i := range 10 { // pro
				if w := f.do(req{header: map[string]string{"X-API-Key": proKey}}); w.Code != http.StatusOK {
					t.Fatalf("request %d: status %d", i, w.Code)
				}
			}
			body, err := json.Marshal(map[string]any{"key": tt.key})
			if err != nil {
				t.Fatal(err)
			}
			w := f.do(req{method: http.MethodPost, path: CheckPath, body: string(body)})
			if w.Code != tt.status {
				t.Fatalf("key %q: status %d %s, want %d", tt.key, w.Code, w.Body, tt.status)
			}
			if tt.status != http.StatusOK {
				return
			}
			var resp checkResponse
			if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil {
				t.Fatal(err)
			}
			if resp.Allowed || resp.Plan != "pro" {
				t.Errorf("check of %q after the pre-filter used the pro key up: %s; want denied on the pro plan", tt.key, w.Body)
			}
		})
	}
}

// TestCheckKeyOfWhiteSpaceSaysSo: a check key of only white space is
// refused as such, not as a key that is missing: the caller sent one.
func TestCheckKeyOfWhiteSpaceSaysSo(t *testing.T) {
	for _, tc := range []struct{ key, reason string }{
		{"", "required"},
		{" \t", "white space"},
	} {
		t.Run(strconv.Quote(tc.key), func(t *testing.T) {
			f := newFixture(t, testConfig(t, nil), nil)
			body, err := json.Marshal(map[string]any{"key": tc.key})
			if err != nil {
				t.Fatal(err)
			}
			w := f.do(req{method: http.MethodPost, path: CheckPath, body: string(body)})
			var p problem
			if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
				t.Fatal(err)
			}
			if w.Code != http.StatusBadRequest || len(p.InvalidParams) != 1 || p.InvalidParams[0].Name != "key" || !strings.Contains(p.InvalidParams[0].Reason, tc.reason) {
				t.Errorf("status %d, invalid-params %+v; want 400 naming key, %q", w.Code, p.InvalidParams, tc.reason)
			}
		})
	}
}
