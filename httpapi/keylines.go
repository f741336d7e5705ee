//go:build !js

package httpapi

import (
	"net/http"
	"strings"
)

// keyLine makes the key header k of hd, a request's header about to go to
// the origin, whose values are vs, what apiKey read:
//
//   - A key header on several lines goes on as one, its lines joined as
//     apiKey joined them to count the key. An origin that reads one line
//     (Go's Header.Get, a servlet's getHeader, hyper's get: the first)
//     served the key of that line, while the pre-filter counted the lines
//     together: a fresh identity for every made-up line sent after a
//     used-up key.
//   - A key header goes on without the white space around it, which
//     apiKey did not count: Go's HTTP/1.1 transport trims a value as it
//     writes it, but its HTTP/2 transport (an https origin's that offers
//     h2) sends it as it is. The platforms hand the Handler trimmed
//     values (the Lambda's adapter since 925519a); a request handed to it
//     in process may not be.
//   - A key header the Connection field names is dropped, as the proxies
//     drop it: apiKey took it for no key, and an origin in this process
//     (Next a handler, no proxy between) served it.
//
// The Worker has its own (keylines_js.go): fetch hands it every header on
// one line, and workerd keeps the client's Connection header from it, so
// that a key header Connection names is counted and reaches the origin
// (docs/edge.md).
func keyLine(hd http.Header, k string, vs []string) {
	switch conn := hd["Connection"]; {
	case len(conn) > 0 && listed(conn, k):
		delete(hd, k)
	case len(vs) > 1:
		hd[k] = []string{trimKey(strings.Join(vs, ","))}
	case len(vs) == 1 && trimKey(vs[0]) != vs[0]:
		hd[k] = []string{trimKey(vs[0])}
	}
}
