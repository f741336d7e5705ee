package httpapi

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// jsTrim is JavaScript's String.prototype.trim: WhiteSpace (U+FEFF among
// it) and LineTerminator, not U+0085. A Worker origin reads a header value
// as UTF-8 (workerd: a byte that is not UTF-8 comes to it as U+FFFD) and
// trims a key so.
func jsTrim(v string) string {
	return strings.TrimFunc(v, func(r rune) bool { return r == '\ufeff' || r != 0x85 && unicode.IsSpace(r) })
}

// TestByteOrderMarkAsJSTrims: U+FEFF around a key is white space to
// JavaScript's trim, which trimKey's doc names among the trims it follows:
// "<used-up pro key>\ufeff" was a fresh default-plan identity while a
// Worker origin reading the key with trim() served the pro key; the check
// API asked about a fresh client for it too.
func TestByteOrderMarkAsJSTrims(t *testing.T) {
	for _, value := range []string{proKey + "\ufeff", "\ufeff" + proKey, "\ufeff\u00a0" + proKey + " \ufeff"} {
		t.Run(value, func(t *testing.T) {
			var served []string
			f := newFixture(t, testConfig(t, nil), func(o *Options) {
				o.Next = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					served = append(served, jsTrim(r.Header.Get("X-Api-Key")))
				})
			})
			if got := jsTrim(value); got != proKey {
				t.Fatalf("trim() reads %q as %q", value, got)
			}
			if code, served := keyedAfterUsingUp(t, f, &served, proKey, 10, value); code != http.StatusTooManyRequests {
				t.Errorf("X-API-Key %q after the pro key was used up: status %d, want 429; a JavaScript origin served it as %q", value, code, served)
			}
			body, err := json.Marshal(map[string]any{"key": value})
			if err != nil {
				t.Fatal(err)
			}
			w := f.do(req{method: http.MethodPost, path: CheckPath, body: string(body)})
			var resp checkResponse
			if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil || resp.Allowed || resp.Plan != "pro" {
				t.Errorf("check of %q after the pro key was used up: %d %s; want denied on the pro plan", value, w.Code, w.Body)
			}
		})
	}
	for _, tt := range []struct{ in, want string }{
		{"\ufeff", ""},
		{"\ufeffk\ufeff", "k"},
		{"k\ufeffk", "k\ufeffk"}, // inside: the key's
	} {
		if got := trimKey(tt.in); got != tt.want {
			t.Errorf("trimKey(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got, want := HashKey("Bearer\ufeffabc"), HashKey("bearer abc"); got != want {
		t.Errorf("HashKey(%q) is not that of %q, as an origin splitting with /\\s+/ reads it", "Bearer\ufeffabc", "bearer abc")
	}
}

// TestKeyCharactersKept: a character of a key whose UTF-8 ends in the
// byte 0x85 or 0xA0 (à, Å, ą, U+0805, an emoji), or a byte that is not
// UTF-8 and is neither, is the key's wherever it stands: the pre-filter
// counts such a key as a client of its own (not as the key without it),
// hashes it as it is, sends it to the origin byte for byte, and the check
// API (for valid UTF-8) counts it as the pre-filter does.
func TestKeyCharactersKept(t *testing.T) {
	const k = "key-0123"
	var keys []string
	for _, c := range []string{"\u00e0", "\u00c5", "\u0105", "\u0805", "\U0001F605", "\u2026"} {
		keys = append(keys, k+c, c+k, k[:3]+c+k[3:])
	}
	keys = append(keys, k+"\xff", "\xfe"+k, k[:3]+"\xc3\xc3"+k[3:], k+"\xe0\x80")
	for _, key := range keys {
		t.Run(key, func(t *testing.T) {
			if got := trimKey(key); got != key {
				t.Fatalf("trimKey(%q) = %q", key, got)
			}
			sum := sha256.Sum256([]byte(key))
			if got, want := HashKey(key), hex.EncodeToString(sum[:]); got != want {
				t.Fatalf("HashKey(%q) is not the SHA-256 of the key", key)
			}
			var seen []string
			f := newFixture(t, testConfig(t, nil), func(o *Options) {
				o.Next = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					seen = append(seen, r.Header.Get("X-Api-Key"))
				})
			})
			if code, got := keyedAfterUsingUp(t, f, &seen, k, 3, key); code != http.StatusOK || len(got) != 1 || got[0] != key { // free: k used up
				t.Fatalf("%q after %q was used up: status %d, the origin got %q; want 200 (a client of its own) and the key as it is", key, k, code, got)
			}
			if !utf8.ValidString(key) {
				return
			}
			body, err := json.Marshal(map[string]any{"key": key, "cost": 0})
			if err != nil {
				t.Fatal(err)
			}
			w := f.do(req{method: http.MethodPost, path: CheckPath, body: string(body)})
			var resp checkResponse
			if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil || resp.Remaining != 2 {
				t.Errorf("check of %q: %d %s; want the pre-filter's count, 2 left", key, w.Code, w.Body)
			}
		})
	}
}

// keyedAfterUsingUp sends n requests with X-API-Key used (each must be
// admitted), then one with value, and returns the last one's answer and
// what the origin read of the key for it (origin's readings are reset).
func keyedAfterUsingUp(t *testing.T, f *fixture, origin *[]string, used string, n int, value string) (int, []string) {
	t.Helper()
	useUp(t, f, http.Header{"X-Api-Key": {used}}, n)
	*origin = nil
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, rawRequest("192.0.2.1:1", http.Header{"X-Api-Key": {value}}))
	return w.Code, *origin
}

// hashBeforeUnicodeSpace is how a key was hashed before e450851 (the
// pre-filter, the check API and hash-key alike): trimmed of HTTP's white
// space, a scheme separated by spaces and tabs only.
func hashBeforeUnicodeSpace(key string) string {
	sum := sha256.Sum256([]byte(formBeforeUnicodeSpace(key)))
	return hex.EncodeToString(sum[:])
}

// formBeforeUnicodeSpace is what hashBeforeUnicodeSpace hashes.
func formBeforeUnicodeSpace(key string) string {
	key = textproto.TrimString(key)
	if strings.IndexByte(key, ',') >= 0 {
		key = joinElements(key)
	}
	if i := strings.IndexAny(key, " \t"); i > 0 {
		j := i + len(key[i:]) - len(strings.TrimLeft(key[i:], " \t"))
		lower := j == i+1 && key[i] == ' ' && strings.IndexFunc(key[:i], func(r rune) bool { return 'A' <= r && r <= 'Z' }) < 0
		if !lower && j < len(key) {
			scheme := []byte(key[:i])
			for n, c := range scheme {
				if 'A' <= c && c <= 'Z' {
					scheme[n] = c + 'a' - 'A'
				}
			}
			key = string(scheme) + " " + key[j:]
		}
	}
	return key
}

// respelledBasic reports whether key is Basic credentials whose last four
// characters are a base64 quantum with spare bits set, which hashKey (since
// session 17) hashes cleared.
func respelledBasic(key string) bool {
	form := formBeforeUnicodeSpace(key)
	if len(form) < len("basic ")+4 || !strings.HasPrefix(form, "basic ") {
		return false
	}
	q := form[len(form)-4:]
	raw, err := base64.StdEncoding.DecodeString(q)
	return err == nil && base64.StdEncoding.EncodeToString(raw) != q
}

// newSpace reports whether key holds what session 14 made white space (a
// Unicode space, U+FEFF, a byte 0x85 or 0xA0 outside a character, or a
// vertical tab or form feed, which HTTP's trim left), the one thing that may
// change a key's hash.
func newSpace(key string) bool {
	for i := 0; i < len(key); {
		if n := spaceLen(key[i:]); n > 0 && !strings.Contains(" \t\r\n", key[i:i+n]) {
			return true
		}
		_, n := utf8.DecodeRuneInString(key[i:])
		i += n
	}
	return false
}

// FuzzHashUnchanged: every key an api_keys entry of an earlier release
// was hashed from hashes the same now, unless it holds what is white space
// only since session 14 (newSpace), or is Basic credentials spelled
// otherwise than base64 spells their bytes (respelledBasic), or a JWT
// whose signature is (respelledJWT): no entry stops matching silently.
func FuzzHashUnchanged(f *testing.F) {
	for _, s := range []string{"k", " Bearer  abc\t", "BEARER x", "k\u00e0", "\u00e0B k", "a , b", "a\nb", "k\xe0\xa0", "X\u0105Y z", "Basic QQ==", "Bearer eyJ.e.QR", "eyJ.e.Q!Q", "eyJ.e.Q \tQ", "eyJ.e.QQQQR"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		if textproto.TrimString(key) == "" || newSpace(key) || respelledBasic(key) || respelledJWT(key) {
			return
		}
		if got, want := HashKey(trimKey(key)), hashBeforeUnicodeSpace(key); got != want {
			t.Fatalf("%q: hash %s, was %s", key, got, want)
		}
	})
}
