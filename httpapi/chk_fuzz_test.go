package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzCheckKeyIsHeaderKey: a key header value the local server can
// receive (a field value: no controls but tab, no white space around it),
// sent once through the pre-filter, and the same value given to the check
// API as a read (cost 0), are one identity: the check finds the request
// counted (pro: 9 of 10 left; an unlisted key: 2 of 3) exactly when the
// pre-filter took the value for a key; a value it took for no key (a
// signature) is a 400 naming key at the check API, not a fresh client.
func FuzzCheckKeyIsHeaderKey(f *testing.F) {
	for _, s := range []string{proKey, "Bearer  abc", "bearer abc", "Basic QQ==", "Basic QR==", "a , b", "AWS4-HMAC-SHA256 Credential=x",
		"OAuth oauth_nonce=1", "OAuth t", "k\u00a0", "Bearer\u3000x", "\ufeffk", "Digest u", "x\ty"} {
		f.Add(s, false)
		f.Add(s, true)
	}
	cfg := testConfig(f, nil)
	f.Fuzz(func(t *testing.T, key string, auth bool) {
		if !utf8.ValidString(key) || key != strings.Trim(key, " \t") || strings.ContainsFunc(key, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }) {
			return // not a field value as the server hands it on
		}
		name := "X-Api-Key"
		if auth {
			name = "Authorization"
		}
		fx := newFixture(t, cfg, nil)
		r := httptest.NewRequest(http.MethodGet, "/api", nil)
		r.RemoteAddr = "192.0.2.1:51000"
		r.Header[name] = []string{key}
		fx.h.ServeHTTP(httptest.NewRecorder(), r)
		var sum [32]byte
		counted := fx.h.apiKey(r, &sum)
		body, err := json.Marshal(map[string]any{"key": key, "cost": 0})
		if err != nil {
			t.Fatal(err)
		}
		w := fx.do(req{method: http.MethodPost, path: CheckPath, body: string(body)})
		if !counted {
			if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), `"key"`) {
				t.Fatalf("%s %q is no key to the pre-filter; the check API answers %d %s", name, key, w.Code, w.Body)
			}
			return
		}
		var resp checkResponse
		if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil || w.Code != http.StatusOK {
			t.Fatalf("%s %q counted as a key; the check API answers %d %s", name, key, w.Code, w.Body)
		}
		want := int64(2)
		if key == proKey {
			want = 9
		}
		if resp.Remaining != want {
			t.Fatalf("%s %q counted once by the pre-filter; the check API finds %d left, want %d: another identity", name, key, resp.Remaining, want)
		}
	})
}
