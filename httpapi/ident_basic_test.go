package httpapi

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestBasicSpellingsAreOneClient: Basic credentials spelled in base64 with
// the spare bits of the last character set are the same credentials to
// Go's Request.BasicAuth (and to Python's and Node's decoders): 16
// spellings of a password whose base64 ends "==". Counted as written, a
// client whose quota was used up sent the next spelling and was a fresh
// client, served by the origin as itself.
func TestBasicSpellingsAreOneClient(t *testing.T) {
	const canonical = "dXNlcjpwYXNzMQ==" // user:pass1
	spellings := []string{canonical, "dXNlcjpwYXNzMR==", "dXNlcjpwYXNzMf==", "dXNlcjpwYXNzMZ=="}
	f := newFixture(t, testConfig(t, nil), nil) // free: 3 a minute
	for i, s := range spellings {
		r := rawRequest("192.0.2.1:1", http.Header{"Authorization": {"Basic " + s}})
		if u, p, ok := r.BasicAuth(); u != "user" || p != "pass1" || !ok {
			t.Fatalf("%s: Go's origin reads %q %q %t", s, u, p, ok)
		}
		w := httptest.NewRecorder()
		f.h.ServeHTTP(w, r)
		want := http.StatusOK
		if i == 3 {
			want = http.StatusTooManyRequests
		}
		if w.Code != want {
			t.Fatalf("request %d, Basic %s: status %d, want %d", i, s, w.Code, want)
		}
	}
}

// TestBasicSpelling: every spelling of a password's bytes that differs
// from their base64 in the spare bits of the last character, which
// decoders read as those bytes, hashes as the base64 of the bytes (which
// hashes as before: an api_keys entry of such a key still matches), and
// spellings that decoders read apart, or that some refuse, stay apart.
func TestBasicSpelling(t *testing.T) {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	for _, creds := range []string{"a", "ab", "abc", "user:pass1", "user:pass12", "user:pass123", strings.Repeat("sk_live_", 20) + ":"} {
		canonical := base64.StdEncoding.EncodeToString([]byte(creds))
		sum := sha256.Sum256([]byte("basic " + canonical))
		if got, want := HashKey("Basic "+canonical), hex.EncodeToString(sum[:]); got != want {
			t.Errorf("%q: Basic %s hashes %s, was %s", creds, canonical, got, want)
		}
		data := strings.TrimRight(canonical, "=")
		spare := map[int]int{0: 0, 2: 0xf, 3: 0x3}[len(data)%4]
		for bits := range spare + 1 {
			spelled := data[:len(data)-1] + string(alphabet[strings.IndexByte(alphabet, data[len(data)-1])|bits]) + canonical[len(data):]
			if got, err := base64.StdEncoding.DecodeString(spelled); err != nil || string(got) != creds {
				t.Fatalf("%s: Go decodes %q, %v; want %q", spelled, got, err, creds)
			}
			if got, want := HashKey("Basic "+spelled), HashKey("Basic "+canonical); got != want {
				t.Errorf("Basic %s: hash %s, Basic %s: %s", spelled, got, canonical, want)
			}
		}
	}
	for _, tt := range []struct{ a, b string }{
		{"Basic dXNlcjpwYXNzMQ==", "Basic dXNlcjpwYXNzMg=="},  // pass1, pass2
		{"Basic dXNlcjpwYXNzMQ==", "Basic dXNl-cjpwYXNzMQ=="}, // Python drops "-", Node reads "+"
		{"Basic dXNlcjpwYXNzMQ==", "Basic dXNlcjpwYXNzMQ==x"},
		{"Basic dXNlcjpwYXNzMQ==", "Basic dXNl cjpwYXNzMQ=="},
		{"Basic dXNlcjpwYXNzMQ==", "Basic dXNlcjpwYXNzMQ"}, // Go refuses it
		{"Bearer QQ==", "Bearer QR=="},                     // no Basic: any token as written
		{"QQ==", "QR=="},
	} {
		if HashKey(tt.a) == HashKey(tt.b) {
			t.Errorf("%q and %q are one client", tt.a, tt.b)
		}
	}
}
