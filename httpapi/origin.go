package httpapi

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"github.com/dunglas/httpsfv"
)

// ownHeaders are the fields the pre-filter sets before the origin answers:
// the rate-limit fields, which it sets on every request it decided, the
// X-RateLimit trio first (see settleTrio), then the marks of shadow mode
// and of a store error.
var ownHeaders = [...]string{hLimit, hRemaining, hReset, hPolicy, hRateLimit, ShadowHeader, StoreHeader}

// nDecided is the number of rate-limit fields at the start of ownHeaders.
const nDecided = 5

// originWriter is the ResponseWriter an admitted request's origin answers
// through. When the origin's final status is written it settles the
// pre-filter's own fields against what the origin put next to them:
//
//   - An origin that limits too sends its own X-RateLimit-Limit,
//     -Remaining and -Reset. Each is one integer, and two of them (ours
//     and the origin's, or "60, 5000" once joined) is a value no client
//     can read. Of the two trios, the one with the fewer requests
//     remaining is kept whole, as gateways that apply several limits
//     report the one closest to being reached; on a tie, or when the
//     origin's Remaining is not one integer, the pre-filter's.
//     RateLimit and RateLimit-Policy are structured-field lists, so the
//     origin's items follow the pre-filter's, unless they would make
//     either field no list (settleLists).
//   - httputil.ReverseProxy empties the header map after passing on an
//     informational answer (103 Early Hints), which took the pre-filter's
//     fields off the final answer. They are put back.
//   - An origin handler in this process (Options.Next) may Set a field
//     rather than add to it, replacing the pre-filter's value (httprate
//     and most Go middleware do): the pre-filter's goes back in front of
//     the origin's, which is then settled as if it had been added.
//   - When the origin did not answer, the answer written in its place is
//     slidegate's own (oursInstead): it gets the CORS fields of the
//     pre-filter's 429, not those settle gives an answer the origin
//     shared.
type originWriter struct {
	// Not comparable, so that the Worker's bundle carries no equality
	// function for it (docs/edge.md, "Size").
	_ [0]func()

	http.ResponseWriter
	// remaining is the pre-filter's X-RateLimit-Remaining; unused when it
	// set none (own empty: a store error under on_store_error allow).
	remaining int64
	// own holds the pre-filter's value of each of ownHeaders ("": none):
	// the rate-limit fields' as it set them before the origin ran, the
	// marks' as an informational answer found them (they matter only
	// then). They are told from an origin's values by identity (same), not
	// content: an origin may send the very numbers the pre-filter sent.
	own     [len(ownHeaders)]string
	settled bool
	// ours: the final answer is slidegate's own, written in place of the
	// origin's (oursInstead).
	ours bool
	// h and r, the Handler and the request, give the answer its CORS
	// fields: those of the pre-filter's 429 when it is ours, settle's
	// when the origin shares it.
	h *Handler
	r *http.Request
}

// Fields returns the canonical names of the response fields the
// pre-filter sets on a request it decided and let through: the rate-limit
// fields, and the marks of shadow mode and of a store error. An adapter
// that replaces such an answer (the Lambda's 502 for one cut short) keeps
// them, so that the client still learns where it stands.
func Fields() []string { return slices.Clone(ownHeaders[:]) }

var originWriters = sync.Pool{New: func() any { return new(originWriter) }}

// serveOrigin hands r to h.next through an originWriter over w; own holds
// the values setHeaders set and returned, remaining the pre-filter's
// X-RateLimit-Remaining (nil and negative: none).
func (h *Handler) serveOrigin(w http.ResponseWriter, r *http.Request, own *[6]string, remaining int64) {
	ow := originWriters.Get().(*originWriter)
	*ow = originWriter{ResponseWriter: w, remaining: remaining, h: h, r: r}
	if own != nil {
		// In ownHeaders' order: the trio, RateLimit-Policy, RateLimit.
		ow.own[0], ow.own[1], ow.own[2], ow.own[3], ow.own[4] = own[2], own[3], own[4], own[0], own[1]
	}
	defer func() {
		*ow = originWriter{}
		originWriters.Put(ow)
	}()
	h.next.ServeHTTP(ow, r)
	// A handler that wrote no final status leaves it to the server (200)
	// or to the Lambda adapter, which send the header map as it is now.
	ow.settle()
}

// WriteHeader passes informational answers on and settles the fields
// before the final one. A client that asked in HTTP/1.0 gets no
// informational answer (RFC 9110 15.2): HTTP/1.0 has none, and such a
// client takes the first status line for the answer (nginx, which
// proxies in HTTP/1.0 unless told otherwise, read no 1xx before 1.29).
// The local server's proxy asks the origin in HTTP/1.1 whatever the
// client spoke, so the origin cannot leave them out itself, and
// net/http's server writes them to any client. (Not ProtoAtLeast(1, 1):
// spelled so, the test costs the Worker's bundle, which never gets a 1xx,
// half as much.)
func (w *originWriter) WriteHeader(code int) {
	if code >= 100 && code <= 199 && code != http.StatusSwitchingProtocols {
		if !w.settled {
			w.takeOwn()
		}
		if w.r.ProtoMajor != 1 || w.r.ProtoMinor != 0 {
			w.ResponseWriter.WriteHeader(code)
		}
		return
	}
	w.settle()
	w.ResponseWriter.WriteHeader(code)
}

// Write settles the fields first: the first Write sends the header.
func (w *originWriter) Write(p []byte) (int, error) {
	w.settle()
	return w.ResponseWriter.Write(p)
}

// WriteString is Write for a string, without the copy to a []byte that
// io.WriteString makes for a writer that has no WriteString (net/http's
// has one).
func (w *originWriter) WriteString(s string) (int, error) {
	w.settle()
	return io.WriteString(w.ResponseWriter, s)
}

// FlushError settles the fields and flushes; the first flush sends the
// header. http.ResponseController finds it.
func (w *originWriter) FlushError() error {
	w.settle()
	return http.NewResponseController(w.ResponseWriter).Flush()
}

// Flush is FlushError for handlers that look for an http.Flusher.
func (w *originWriter) Flush() { _ = w.FlushError() }

// ReadFrom settles the fields and copies r with the connection's own
// ReadFrom (sendfile), as a handler's io.Copy to the writer would without
// the originWriter.
func (w *originWriter) ReadFrom(r io.Reader) (int64, error) {
	w.settle()
	return io.Copy(w.ResponseWriter, r)
}

// Hijack settles the fields and hands over the connection: a protocol
// upgrade the origin accepted. http.ResponseController finds it, and so do
// handlers that look for an http.Hijacker. httputil.ReverseProxy adds the
// origin's fields to the header map only after it hijacked, and writes the
// 101 from the map itself: an origin's own X-RateLimit fields on a 101
// follow the pre-filter's, unsettled.
func (w *originWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	w.settle()
	return http.NewResponseController(w.ResponseWriter).Hijack()
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *originWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// takeOwn takes the pre-filter's fields off the header map until the
// final answer: an informational answer has no use for them, and the map
// may be emptied after it.
func (w *originWriter) takeOwn() {
	hd := w.ResponseWriter.Header()
	for i, k := range ownHeaders {
		vs := hd[k]
		if i >= nDecided && w.own[i] == "" && len(vs) > 0 {
			w.own[i] = vs[0] // a mark set before the origin ran comes first
		}
		switch {
		case w.own[i] == "" || len(vs) == 0 || !same(vs[0], w.own[i]):
		case len(vs) == 1:
			delete(hd, k)
		default:
			hd[k] = vs[1:]
		}
	}
}

// settle puts the pre-filter's fields back in front of the origin's where
// an informational answer took them off or the origin replaced or deleted
// them, and settles the X-RateLimit trio, once, before the final answer's
// header is sent.
func (w *originWriter) settle() {
	if w.settled {
		return
	}
	w.settled = true
	hd := w.ResponseWriter.Header()
	// The values of the rate-limit fields, each led by the pre-filter's
	// (nil where it set none): the X-RateLimit trio, RateLimit-Policy
	// and RateLimit.
	var fields [nDecided][]string
	for i, k := range ownHeaders {
		v := w.own[i]
		if v == "" {
			continue
		}
		vs := hd[k]
		if len(vs) == 0 || !same(vs[0], v) {
			vs = append([]string{v}, vs...)
			hd[k] = vs
		}
		if i < nDecided {
			fields[i] = vs
		}
	}
	settleTrio(hd, (*[3][]string)(fields[:3]), w.remaining) // a trio the pre-filter did not set is left alone
	if fields[3] != nil && fields[4] != nil {
		settleLists(hd, fields[3], fields[4])
	}
	// With cors_origins set, whether an answer the origin shares gains
	// the rate-limit fields depends on Origin; r's is read only then.
	if w.ours || w.h.cors == nil && !w.h.corsAny || len(hd["Access-Control-Allow-Origin"]) == 0 {
		return
	}
	if w.h.corsOrigin(w.r) != "" {
		// The origin lets the page read its answer; let it read the
		// rate-limit fields too (a list field: a line of its own).
		hd["Access-Control-Expose-Headers"] = append(hd["Access-Control-Expose-Headers"], exposed)
	}
	if !listed(hd["Vary"], "Origin") && !listed(hd["Vary"], "*") {
		// Whether the fields are exposed depends on Origin, also where
		// the origin's own answer does not (Access-Control-Allow-Origin:
		// *): a cache must not give one page's answer to another.
		hd["Vary"] = append(hd["Vary"], "Origin")
	}
}

// corsFields are the CORS fields of an answer (AllowCORS sets them).
var corsFields = [...]string{"Access-Control-Allow-Origin", "Access-Control-Allow-Credentials", "Access-Control-Expose-Headers"}

// oursInstead says that the answer about to be written through w is
// slidegate's own, in place of the origin's that did not come (OriginFailed's
// 502 or 504, the proxy's 400 for an Upgrade it refused, clientBodyFailed's
// 408 or 400): when w is, or wraps (Unwrap, as http.ResponseController
// walks it), the originWriter of a request the pre-filter admitted, the
// answer gets the CORS fields of the pre-filter's own 429 (AllowCORS), and
// settle leaves them alone, as no origin shared the answer. The origin's
// CORS fields go first: the Worker's 502 for a 101 it cannot pass on has
// the origin's fields of that 101 in the map. The Handler knows
// cors_origins; OriginFailed, which the Worker's proxy calls too, does
// not. Any other writer (an answer of a proxy used without the Handler) is
// left alone.
func oursInstead(w http.ResponseWriter) {
	for {
		switch x := w.(type) {
		case *originWriter:
			x.ours = true
			hd := x.ResponseWriter.Header()
			for _, k := range corsFields {
				delete(hd, k)
			}
			x.h.AllowCORS(hd, x.r)
			return
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
		default:
			return
		}
	}
}

// same reports whether a and b are one string, not two equal ones.
func same(a, b string) bool {
	return len(a) == len(b) && unsafe.StringData(a) == unsafe.StringData(b)
}

// settleLists drops the origin's RateLimit and RateLimit-Policy lines,
// which follow the pre-filter's in hd, when either field is then no
// structured-field list. A client ignores a RateLimit it cannot parse
// (draft-ietf-httpapi-ratelimit-headers-10, section 7), so an origin
// writing an older draft's form (express-rate-limit's draft-7 mode sends
// the dictionary "limit=100, remaining=25, reset=5") took the pre-filter's
// items with it. The two go together: a policy without its items, or
// items without their policy, would not be read right either.
//
// pol and rl are hd's values of the two.
func settleLists(hd http.Header, pol, rl []string) {
	if len(pol) < 2 && len(rl) < 2 {
		return // the origin sent neither
	}
	if _, err := httpsfv.UnmarshalList(pol); err == nil {
		if _, err := httpsfv.UnmarshalList(rl); err == nil {
			return
		}
	}
	hd[hPolicy], hd[hRateLimit] = pol[:1:1], rl[:1:1]
}

// settleTrio keeps one X-RateLimit trio when the origin added its own to
// the pre-filter's: trio holds the values of hd's X-RateLimit-Limit,
// -Remaining and -Reset, each led by the pre-filter's (nil where it set
// none), and remaining is its Remaining. The origin's trio is kept when it
// has fewer requests remaining, else the pre-filter's.
func settleTrio(hd http.Header, trio *[3][]string, remaining int64) {
	lim, rem, reset := trio[0], trio[1], trio[2]
	if len(lim) < 2 && len(rem) < 2 && len(reset) < 2 {
		return // the origin sent none
	}
	theirs := false
	if len(rem) == 2 {
		n, err := strconv.ParseInt(strings.TrimSpace(rem[1]), 10, 64)
		theirs = err == nil && n < remaining
	}
	for i, k := range ownHeaders[:len(trio)] {
		vs := trio[i]
		switch {
		case len(vs) == 0:
		case !theirs:
			hd[k] = vs[:1:1]
		case len(vs) == 1:
			delete(hd, k) // the origin's trio lacks it
		default:
			hd[k] = vs[1:]
		}
	}
}
