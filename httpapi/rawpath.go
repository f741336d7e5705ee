package httpapi

import "strings"

// EscapePath makes rawPath an escaped path that stands for what the
// client sent. An escaped rawPath (a Lambda Function URL's, a URL's
// RawPath) keeps its escapes, %XX. In a decoded one (an HTTP API's, when
// decoded is true) every '%' is a character, never an escape (the HTTP
// API decoded the client's escapes, once or, third-party captures show,
// twice), so it is escaped again; kept, a /files/%41 in rawPath would
// reach the origin as /files/A, and a %2F as a separator.
//
// Either way, a byte that does not stand for itself in a path is escaped:
// '?' and '#', which would start the query or a fragment, a '%' that
// begins no escape, spaces, controls, non-ASCII bytes and the rest outside
// RFC 3986's pchar. The result is one Go's url package keeps as its
// RawPath (so a Function URL's %2F reaches the origin as %2F), and
// escaping it again as an escaped path changes nothing.
//
// A url.URL's RawPath that holds such a byte ('|', '^', '{', a backslash,
// a byte of 0x80 or more) is one url.URL's EscapedPath refuses whole: it
// escapes the decoded Path instead, which turns every "%2F" into a
// separator, and "/files/a%2Fb|x" (a "|" that browsers and the Worker's
// URL parser leave as it is) reached the origin as "/files/a/b%7Cx",
// another resource to an origin that routes on "%2F" (an object store, a
// /files/{name} API) than the one the client asked for and the pre-filter
// priced (cost reads the RawPath). Escaped, it is kept; the bytes escaped
// decode to themselves, so it stands for the Path it stood for (or for
// none, as before, which EscapedPath still refuses). The local server's
// proxy escapes a request's RawPath so, ParseOrigin the origin URL's,
// and the Worker the path of the URL workerd gives it.
func EscapePath(rawPath string, decoded bool) string {
	const hex = "0123456789ABCDEF"
	var b []byte // nil until the first byte that needs escaping
	for i := 0; i < len(rawPath); i++ {
		c := rawPath[i]
		if pathByte(c) || c == '%' && !decoded && isEscape(rawPath[i:]) {
			if b != nil {
				b = append(b, c)
			}
			continue
		}
		if b == nil {
			b = append(make([]byte, 0, len(rawPath)+16), rawPath[:i]...)
		}
		b = append(b, '%', hex[c>>4], hex[c&15])
	}
	if b == nil {
		return rawPath
	}
	return string(b)
}

// pathByte reports whether c stands for itself in an escaped path: a
// pchar of RFC 3986 other than an escape, '/', or '[' and ']', which
// browsers and Go's url package leave alone too. These are the bytes
// url.URL takes unescaped in a RawPath (TestPathByte).
func pathByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("-._~!$&'()*+,;=:@/[]", c) >= 0
}

// isEscape reports whether s starts with a percent escape, %XX.
func isEscape(s string) bool {
	return len(s) >= 3 && s[0] == '%' && ishex(s[1]) && ishex(s[2])
}
