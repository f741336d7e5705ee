//go:build js

package httpapi

// sentPath is the path itself: a URL's that workerd gives the Worker,
// parsed by WHATWG's rules, always begins with "/" (sentpath.go).
func sentPath(p string) string { return p }
