package httpapi

import (
	"net/url"
	"testing"
)

// TestPathByte: the bytes EscapePath leaves as they are in an escaped path
// are the ones url.URL keeps unescaped in a RawPath, next to a "%2F": a
// byte Go refuses there would make it drop the RawPath, and one it takes
// need not be escaped.
func TestPathByte(t *testing.T) {
	for i := range 256 {
		c := byte(i)
		if c == '%' {
			continue
		}
		u := url.URL{Path: "/a/b" + string(c), RawPath: "/a%2Fb" + string(c)}
		if kept := u.EscapedPath() == u.RawPath; pathByte(c) != kept {
			t.Errorf("pathByte(%q) = %t; url.URL keeps a RawPath holding it: %t", c, pathByte(c), kept)
		}
	}
}
