package httpapi

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// testJWT returns an HS256 JSON Web Token for sub, signed with a fixed
// key, and its signature.
func testJWT(sub string) (token string, sig []byte) {
	enc := base64.RawURLEncoding
	in := enc.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." + enc.EncodeToString([]byte(`{"sub":"`+sub+`"}`))
	m := hmac.New(sha256.New, []byte("issuer secret"))
	m.Write([]byte(in))
	sig = m.Sum(nil)
	return in + "." + enc.EncodeToString(sig), sig
}

// lenientSig decodes a JWT's signature segment as PyJWT (base64url_decode:
// padded to a whole quantum, then Python's urlsafe_b64decode) and Node's
// Buffer.from(s, "base64url") read it: both alphabets, characters outside
// them skipped, the spare bits of the last character ignored, and the rest
// after a "=" that ends a quantum ignored.
func lenientSig(s string) ([]byte, bool) {
	var clean []byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '=':
			if len(clean)%4 >= 2 {
				i = len(s)
			}
			continue
		case c == '+':
			c = '-'
		case c == '/':
			c = '_'
		case !(c == '-' || c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'):
			continue
		}
		clean = append(clean, c)
	}
	b, err := base64.RawURLEncoding.DecodeString(string(clean))
	return b, err == nil
}

// TestJWTSignatureSpellingsAreOneClient: a JWT whose signature segment is
// spelled otherwise in base64 (the spare bits of its last character set,
// padded, with characters outside base64url's alphabet, in the standard
// alphabet, or with more after a "=") is the same token to the JWT
// libraries of Go (golang-jwt decodes with RawURLEncoding, which ignores
// the spare bits), Python (PyJWT) and Node (the RS and ES algorithms of
// jsonwebtoken, jose): they verify the signature's bytes. Counted as
// written, a client whose token had used its quota sent the next spelling
// and was a fresh client, up to 16 with Go's decoder and without end with
// Python's and Node's, served by the origin as itself.
func TestJWTSignatureSpellingsAreOneClient(t *testing.T) {
	token, sig := testJWT("alice")
	dot := strings.LastIndexByte(token, '.')
	in, s := token[:dot+1], token[dot+1:]
	last := s[len(s)-1]
	spellings := []string{
		s[:len(s)-1] + string(last+1), // a spare bit (43 characters: 2 spare bits)
		s + "=",                       // padded
		s + "=" + "AAAA",              // more after the padding
		s[:5] + "!!!!" + s[5:],        // outside the alphabet
		strings.NewReplacer("-", "+", "_", "/").Replace(s), // the standard alphabet
	}
	if !strings.ContainsAny(s, "-_") {
		t.Fatalf("signature %s has no - or _: pick another subject", s)
	}
	if got, err := base64.RawURLEncoding.DecodeString(spellings[0]); err != nil || !hmac.Equal(got, sig) {
		t.Fatalf("Go reads the spare bit's spelling %s as %x, %v; want %x", spellings[0], got, err, sig)
	}
	for _, sp := range spellings {
		if got, ok := lenientSig(sp); !ok || !hmac.Equal(got, sig) {
			t.Fatalf("Python and Node read %s as %x, %t; want %x", sp, got, ok, sig)
		}
	}
	for _, hd := range []string{"Authorization", "X-API-Key"} {
		scheme := map[string]string{"Authorization": "Bearer "}[hd]
		f := newFixture(t, testConfig(t, nil), nil) // free: 3 a minute
		codes := []int{}
		for _, sp := range append([]string{s, s}, spellings...) {
			w := httptest.NewRecorder()
			f.h.ServeHTTP(w, rawRequest("192.0.2.1:1", http.Header{hd: {scheme + in + sp}}))
			codes = append(codes, w.Code)
		}
		for i, c := range codes {
			want := http.StatusOK
			if i >= 3 {
				want = http.StatusTooManyRequests
			}
			if c != want {
				t.Errorf("%s: statuses %v: request %d got %d, want %d (3 a minute, one token)", hd, codes, i, c, want)
				break
			}
		}
	}
}

// TestJWTSpelling: a JWT as its issuer spells it hashes as before, so an
// api_keys entry of one still matches; its spellings hash as it; tokens
// with other signatures, and keys that are no JWT, stay apart.
func TestJWTSpelling(t *testing.T) {
	for _, sub := range []string{"a", "ab", "abc", "alice", "bob@example.com"} {
		token, _ := testJWT(sub)
		for _, key := range []string{token, "Bearer " + token} {
			sum := sha256.Sum256([]byte(strings.Replace(key, "Bearer ", "bearer ", 1)))
			if got, want := HashKey(key), hex.EncodeToString(sum[:]); got != want {
				t.Errorf("%q hashes %s, was %s", key, got, want)
			}
			if got, want := HashKey(key+"="), HashKey(key); got != want {
				t.Errorf("%q padded hashes %s, want %s", key, got, want)
			}
		}
	}
	alice, _ := testJWT("alice")
	bob, _ := testJWT("bob")
	dot := strings.LastIndexByte(alice, '.')
	for _, tt := range []struct{ a, b string }{
		{alice, bob},
		{alice, alice[:dot+1] + strings.Repeat("A", len(alice)-dot-1)}, // another signature
		{alice, alice[:dot] + "x." + alice[dot+1:]},                    // another payload
		{alice, alice[:len(alice)-1]},                                  // a character short
		{"sk_live.QQ", "sk_live.QR"},                                   // no JWT: as written
		{"Bearer abc.QQ", "Bearer abc.QR"},
		{"Bearer eyJhbGciOiJub25lIn0", "Bearer eyJhbGciOiJub25lIn1"}, // no signature segment
	} {
		if HashKey(tt.a) == HashKey(tt.b) {
			t.Errorf("%q and %q are one client", tt.a, tt.b)
		}
	}
}

// respelledJWT reports whether key is a JWT (a token that begins "eyJ",
// alone or after the first space, with a "." after it) whose last segment
// is spelled otherwise than base64url spells its bytes: a byte outside
// base64url's alphabet, or spare bits set in its last character. Such a
// key hashes as the spelling of the bytes (jwsSig); an issuer's token, in
// an api_keys entry of an earlier release, is none.
func respelledJWT(key string) bool {
	form := formBeforeUnicodeSpace(key)
	tok := form[strings.IndexByte(form, ' ')+1:]
	dot := strings.LastIndexByte(tok, '.')
	if !strings.HasPrefix(tok, "eyJ") || dot < 3 {
		return false
	}
	sig := tok[dot+1:]
	for i := 0; i < len(sig); i++ {
		if !strings.Contains(b64url, sig[i:i+1]) {
			return true
		}
	}
	if r := len(sig) % 4; r >= 2 {
		b, err := base64.RawURLEncoding.DecodeString(sig[len(sig)-r:])
		return err == nil && base64.RawURLEncoding.EncodeToString(b) != sig[len(sig)-r:]
	}
	return false
}
