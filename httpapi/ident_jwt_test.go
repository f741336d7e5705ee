package httpapi

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"net/textproto"
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
// base64url's alphabet (a space after a JWT alone among them), a last
// character alone in its quantum, or spare bits set in its last character. Such a
// key hashes as the spelling of the bytes (jwsSig); an issuer's token, in
// an api_keys entry of an earlier release, is none.
func respelledJWT(key string) bool {
	k := textproto.TrimString(key)
	if strings.IndexByte(k, ',') >= 0 {
		k = joinElements(k)
	}
	if s := strings.IndexAny(k, " \t"); strings.HasPrefix(k, "eyJ") && s > 0 && strings.Contains(k[:s], ".") && !strings.Contains(k[s:], ".") {
		return true // a JWT alone: the space is in its signature
	}
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
	if r := len(sig) % 4; r == 1 {
		return true // its last character alone is dropped
	} else if r >= 2 {
		b, err := base64.RawURLEncoding.DecodeString(sig[len(sig)-r:])
		return err == nil && base64.RawURLEncoding.EncodeToString(b) != sig[len(sig)-r:]
	}
	return false
}

// nodeSig decodes a JWT's signature segment as Node's Buffer.from(s,
// "base64") and Buffer.from(s, "base64url") do (jsonwebtoken's ES and RS
// algorithms through jwa and ecdsa-sig-formatter, jose's on Node): both
// alphabets, other characters skipped, the rest after any "=" not read,
// and a last character alone in its quantum ignored (checked with Node
// 20).
func nodeSig(s string) []byte {
	var clean []byte
	for i := 0; i < len(s) && s[i] != '='; i++ {
		if v := b64Values[s[i]]; v < 128 {
			clean = append(clean, b64url[v&63])
		}
	}
	if len(clean)%4 == 1 {
		clean = clean[:len(clean)-1]
	}
	b, _ := base64.RawURLEncoding.DecodeString(string(clean))
	return b
}

// TestJWTLoneLastCharacter: a signature of 48, 96 or 132 bytes (HS384,
// ES384, ES512, RSA with a 3072-bit key) is a whole number of base64
// quanta; Node's Buffer ignores one more character after it, and
// jsonwebtoken's check of the token's characters lets any of base64url's
// through. Hashed as written (a last segment of 4n+1 characters is no
// base64), the token with one more character was a fresh client, 64 of
// them with jsonwebtoken and without end with more characters Node skips.
func TestJWTLoneLastCharacter(t *testing.T) {
	enc := base64.RawURLEncoding
	sig := make([]byte, 96)
	for i := range sig {
		sig[i] = byte(i * 37)
	}
	in := enc.EncodeToString([]byte(`{"alg":"ES384","typ":"JWT"}`)) + "." + enc.EncodeToString([]byte(`{"sub":"a"}`)) + "."
	token := in + enc.EncodeToString(sig)
	for _, more := range []string{"A", "_", "Q!!", "-\xa0"} {
		if got := nodeSig(token[len(in):] + more); !hmac.Equal(got, sig) {
			t.Fatalf("Node reads %q after the signature as %x, want %x", more, got, sig)
		}
		for _, key := range []string{token, "Bearer " + token} {
			if HashKey(key+more) != HashKey(key) {
				t.Errorf("%q after %q: another client", more, key)
			}
		}
	}
}

// TestJWTAloneWithSpace: a JWT sent alone (X-API-Key: <token>) with white
// space and characters outside base64's alphabet after its signature is
// the token to PyJWT, which skips them (Python's lenient base64, as it
// skips "!"), and to Node's Buffer. withScheme took the token for a scheme
// and the rest for its credentials, lowered the token's letters, and
// jwsSig looked for the JWT after the space: each such spelling was a
// fresh client, without end.
func TestJWTAloneWithSpace(t *testing.T) {
	token, sig := testJWT("alice")
	dot := strings.LastIndexByte(token, '.')
	for _, more := range []string{" !!!", "\t!!!", " =x", "  \t!!!!!!!"} {
		if got, ok := lenientSig(token[dot+1:] + more); !ok || !hmac.Equal(got, sig) {
			t.Fatalf("Python reads %q after the signature as %x, %t; want %x", more, got, ok, sig)
		}
		if HashKey(token+more) != HashKey(token) {
			t.Errorf("%q after the token: another client", more)
		}
	}
	// A key whose space comes before the last "." is hashed as before:
	// its first word is a scheme to lower.
	if got, want := HashKey("eyJa b.c"), HashKey("eyja b.c"); got != want {
		t.Errorf(`"eyJa b.c" hashes %s, was %s`, got, want)
	}
}
