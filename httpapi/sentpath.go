//go:build !js

package httpapi

// sentPath returns a request's path as the proxy sends it to the origin:
// one that does not begin with "/" has "/" put before it. Go's server
// takes two such targets, an absolute-form one without a path ("POST
// http://api.example HTTP/1.1", path "") and "*" for a method other than
// OPTIONS; the proxy joins them to the origin URL's path with a slash, so
// the origin serves "/" and "/*". Priced as they came, they matched no
// route (every path_prefix begins with "/"), and a POST to "/" at a route
// cost of 3 cost 1.
//
// The Worker has its own (sentpath_js.go): the URL workerd gives it always
// has a path that begins with "/".
func sentPath(p string) string {
	if p == "" || p[0] != '/' {
		return "/" + p
	}
	return p
}
