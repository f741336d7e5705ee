package httpapi

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"
)

// latin1Strip is what gunicorn before 22 does to every header value: it
// decodes the line as Latin-1 and strips it with Python's str.strip, so a
// byte 0xA0 (NBSP) or 0x85 (NEL) at either end goes with the spaces.
func latin1Strip(v string) string {
	space := func(b byte) bool { return b == ' ' || b == '\t' || b == 0x85 || b == 0xa0 }
	for v != "" && space(v[0]) {
		v = v[1:]
	}
	for v != "" && space(v[len(v)-1]) {
		v = v[:len(v)-1]
	}
	return v
}

// TestKeyUnicodeSpaceAsOriginReadsIt: a key header with what an origin
// takes for white space around the key is the key the origin serves, and
// is counted as that key: the pre-filter trimmed only HTTP's spaces and
// tabs, so "<used-up pro key>\xa0" (a byte Go's server and transport pass
// on) was a fresh identity of the default plan, and a fresh one for every
// count of such bytes, while gunicorn (before 22, which strips every value
// read as Latin-1 with str.strip) or a Go origin calling strings.TrimSpace
// served the pro key; a value of only such bytes was a fresh key per
// spelling, served as no key. Each row first uses up a quota (the pro
// key's, or the free plan's on the client IP), then sends the variant.
func TestKeyUnicodeSpaceAsOriginReadsIt(t *testing.T) {
	for _, tt := range []struct {
		name, value, used string
		strip             func(string) string // the origin's reading of the header
	}{
		{"gunicorn: a Latin-1 no-break space after the key", proKey + "\xa0", proKey, latin1Strip},
		{"gunicorn: a Latin-1 next line before the key", "\x85" + proKey, proKey, latin1Strip},
		{"gunicorn: a run of them", "\xa0\x85 " + proKey + "\xa0\xa0", proKey, latin1Strip},
		{"gunicorn: only a no-break space", "\xa0", "", latin1Strip},
		{"Go TrimSpace: U+00A0 after the key", proKey + "\u00a0", proKey, strings.TrimSpace},
		{"Go TrimSpace: U+3000 before the key", "\u3000" + proKey, proKey, strings.TrimSpace},
		{"Go TrimSpace: U+2028 and U+0085", "\u0085" + proKey + "\u2028", proKey, strings.TrimSpace},
		{"Go TrimSpace: only U+2003", "\u2003", "", strings.TrimSpace},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var served []string // the key each served request was served as
			origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				served = append(served, tt.strip(r.Header.Get("X-Api-Key")))
			}))
			defer origin.Close()
			u, err := url.Parse(origin.URL)
			if err != nil {
				t.Fatal(err)
			}
			f := newFixture(t, testConfig(t, nil), func(o *Options) { o.Next = NewProxy(u, nil, nil) })
			header := func(v string) http.Header {
				h := http.Header{}
				if v != "" {
					h.Add("X-API-Key", v)
				}
				return h
			}
			limit := 3 // free, on the client IP
			if tt.used != "" {
				limit = 10 // pro
			}
			useUp(t, f, header(tt.used), limit)
			if got, want := served[len(served)-1], tt.strip(tt.value); got != want {
				t.Fatalf("the origin reads %q as %q, the row wants it read as %q", tt.value, want, got)
			}
			served = nil
			w := httptest.NewRecorder()
			f.h.ServeHTTP(w, rawRequest("192.0.2.1:1", header(tt.value)))
			if w.Code != http.StatusTooManyRequests {
				t.Errorf("%q after %q used up: status %d, want 429; the origin served it as %q", tt.value, tt.used, w.Code, served)
			}
		})
	}
}

// TestTrimKey: what trimKey takes away, and what it leaves: a byte 0x85 or
// 0xA0 that ends a UTF-8 character is the character's, not a space.
func TestTrimKey(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"k", "k"},
		{" \tk\t ", "k"},
		{"\xa0k\x85", "k"},
		{"\u00a0\u3000k\u2029\u0085", "k"},
		{"k\xc2\xa0\xa0", "k"},
		{"ka\u0300", "ka\u0300"},           // combining grave: not a space
		{"k\u00e0", "k\u00e0"},             // à, whose UTF-8 ends in 0xA0
		{"k\u0105", "k\u0105"},             // ą, whose UTF-8 ends in 0x85
		{"\u00e0k", "\u00e0k"},             // à first
		{"k\u200b", "k\u200b"},             // zero-width space: no trim takes it
		{"a\u00a0b", "a\u00a0b"},           // inside: the key's
		{"\xa0\u00a0 \t\u3000", ""},        // nothing but spaces
		{"k\xff", "k\xff"},                 // another invalid byte
		{"\xe3\x80k", "\xe3\x80k"},         // a cut character
		{"\xef\xbf\xbdk", "\xef\xbf\xbdk"}, // U+FFFD itself
	} {
		if got := trimKey(tt.in); got != tt.want {
			t.Errorf("trimKey(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if !utf8.ValidString(tt.in) {
			continue
		}
		if got, want := trimKey(tt.in), strings.TrimSpace(tt.in); got != want && tt.in != "k\u200b" {
			t.Errorf("trimKey(%q) = %q, strings.TrimSpace %q", tt.in, got, want)
		}
	}
}

// TestSchemeUnicodeSpaceAsOriginReadsIt: white space to an origin between
// a scheme and its credentials is one separator, as a run of spaces is
// (TestHashKeyScheme): "Bearer \xa0<token>" was a fresh default-plan
// identity while werkzeug (which strips the credentials of a value read
// as Latin-1 with str.strip) served the used-up pro token, and so did a
// Go origin splitting Authorization with strings.Fields, for
// "Bearer\u3000<token>" too.
func TestSchemeUnicodeSpaceAsOriginReadsIt(t *testing.T) {
	werkzeug := func(v string) string { // Authorization.from_header
		scheme, rest, _ := strings.Cut(v, " ")
		return strings.ToLower(scheme) + " " + latin1Strip(rest)
	}
	fields := func(v string) string { // a Go origin: strings.Fields, two parts
		if f := strings.Fields(v); len(f) == 2 {
			return strings.ToLower(f[0]) + " " + f[1]
		}
		return ""
	}
	const token = "Bearer " + proKey
	for _, tt := range []struct {
		name, value string
		read        func(string) string
	}{
		{"werkzeug: a Latin-1 no-break space after the space", "Bearer \xa0" + proKey, werkzeug},
		{"werkzeug: next line and spaces", "bearer \x85 \xa0" + proKey, werkzeug},
		{"Fields: U+00A0 after the space", "Bearer \u00a0" + proKey, fields},
		{"Fields: U+3000 for the space", "Bearer\u3000" + proKey, fields},
		{"Fields: U+2003 and a tab", "BEARER\u2003\t" + proKey, fields},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var served []string
			edit := func(m map[string]any) { m["api_keys"] = map[string]any{HashKey(token): "pro"} }
			f := newFixture(t, testConfig(t, edit), func(o *Options) {
				o.Next = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					served = append(served, tt.read(r.Header.Get("Authorization")))
				})
			})
			for i := range 10 { // pro
				w := httptest.NewRecorder()
				f.h.ServeHTTP(w, rawRequest("192.0.2.1:1", http.Header{"Authorization": {token}}))
				if w.Code != http.StatusOK {
					t.Fatalf("request %d: status %d", i, w.Code)
				}
			}
			if got, want := tt.read(tt.value), strings.ToLower(token[:6])+token[6:]; got != want {
				t.Fatalf("the origin reads %q as %q, the row wants %q", tt.value, got, want)
			}
			served = nil
			w := httptest.NewRecorder()
			f.h.ServeHTTP(w, rawRequest("192.0.2.1:1", http.Header{"Authorization": {tt.value}}))
			if w.Code != http.StatusTooManyRequests {
				t.Errorf("%q after %q used up: status %d, want 429; the origin served it as %q", tt.value, token, w.Code, served)
			}
		})
	}
}

// TestHashKeySchemeSeparator: the white space after a scheme is one space
// whatever its characters; a 0xA0 or 0x85 byte inside a character (à, ą)
// separates nothing.
func TestHashKeySchemeSeparator(t *testing.T) {
	sum := func(s string) string {
		h := sha256.Sum256([]byte(s))
		return hex.EncodeToString(h[:])
	}
	for _, tt := range []struct{ key, counted string }{
		{"Bearer\u00a0k", "bearer k"},
		{"Bearer \xa0\x85\u2003\tk", "bearer k"},
		{"bearer\u3000k", "bearer k"},
		{"X\u00e0Y", "X\u00e0Y"},
		{"X\u0105Y", "X\u0105Y"},
		{"Basic\u00e0 k", "basic\u00e0 k"},
		{"\u00e0B k", "\u00e0b k"},
		{"AB\u00a0", "AB\u00a0"}, // no credentials: as it is (trimKey drops the space first)
	} {
		if got, want := HashKey(tt.key), sum(tt.counted); got != want {
			t.Errorf("HashKey(%q) is not the hash of %q", tt.key, tt.counted)
		}
	}
}
