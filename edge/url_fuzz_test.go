package main

import (
	"net/url"
	"strings"
	"testing"
)

// whatwgBytes keeps of s the bytes WHATWG's URL parser leaves as they are
// in the path of an https URL (workerd's request.url): visible ASCII but
// for those it escapes (the path percent-encode set: '"', '#', '<', '>',
// '?', '`', '{', '}') and the backslash, which it reads as a slash.
func whatwgBytes(s string) string {
	return strings.Map(func(r rune) rune {
		if r <= ' ' || r > '~' || strings.ContainsRune("\"#<>?`{}\\", r) {
			return -1
		}
		return r
	}, s)
}

// unescapeStray decodes the escapes of an escaped path and keeps a '%'
// that begins none as the character: what such a path stands for.
func unescapeStray(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && strings.ContainsRune("0123456789abcdefABCDEF", rune(s[i+1])) && strings.ContainsRune("0123456789abcdefABCDEF", rune(s[i+2])) {
			u, _ := url.PathUnescape(s[i : i+3])
			b.WriteString(u)
			i += 2
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// FuzzEscapedURL: any URL whose path WHATWG's parser can give the Worker,
// escaped by escapedURL, is one Go's url package takes (syumai's
// conversion threw on the rest), with the path the client's path stands
// for, its escapes (a "%2F" inside a segment) kept as RawPath so that the
// origin gets them, and its query as it came.
func FuzzEscapedURL(f *testing.F) {
	for _, s := range []string{"v1/items", "a%2Fb|x^y", "100%", "%zz/%41", "a%2", "%%41", "(a)[b]!$&'*+,;=:@~", "%2e%2E/x", "%C3%a9|"} {
		f.Add(s, "q=1")
		f.Add(s, "")
	}
	f.Fuzz(func(t *testing.T, p, q string) {
		p = "/" + whatwgBytes(p)
		in := "https://a.example" + p
		if q != "" {
			q = strings.Map(func(r rune) rune {
				if r <= ' ' || r > '~' || r == '#' {
					return -1
				}
				return r
			}, q)
			in += "?" + q
		}
		out, changed := escapedURL(in)
		u, err := url.Parse(out)
		if err != nil {
			t.Fatalf("escapedURL(%q) = %q, which url.Parse refuses: %v", in, out, err)
		}
		if got, want := u.Path, unescapeStray(p); got != want {
			t.Fatalf("escapedURL(%q) = %q: path %q, want %q", in, out, got, want)
		}
		if u.RawPath != "" && u.EscapedPath() != u.RawPath {
			t.Fatalf("escapedURL(%q) = %q: url drops its RawPath %q for %q", in, out, u.RawPath, u.EscapedPath())
		}
		if unescapeStray(u.EscapedPath()) != unescapeStray(p) || strings.Count(u.EscapedPath(), "%2F") < strings.Count(strings.ToUpper(p), "%2F") {
			t.Fatalf("escapedURL(%q) = %q: the origin gets %q", in, out, u.EscapedPath())
		}
		if u.RawQuery != q || changed != (out != in) {
			t.Fatalf("escapedURL(%q) = %q, %v: query %q", in, out, changed, u.RawQuery)
		}
	})
}
