package httpapi

import (
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
			for i := range limit {
				w := httptest.NewRecorder()
				f.h.ServeHTTP(w, rawRequest("192.0.2.1:1", header(tt.used)))
				if w.Code != http.StatusOK {
					t.Fatalf("request %d of %q: status %d", i, tt.used, w.Code)
				}
			}
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
