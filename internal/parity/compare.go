package parity

import (
	"bytes"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// framing are header fields each hop writes for itself, never compared:
// net/http computes Content-Length or chunks, API Gateway and workerd frame
// their own answers, the Lambda gets a request body whole (no chunks), and
// Date is each server's clock, not the test's.
var framing = []string{"Content-Length", "Transfer-Encoding", "Connection", "Keep-Alive", "Date"}

// frontEnd are the forwarding fields that name the front end itself, its
// host and scheme, not the client: the local server is plain HTTP under
// Host, a Function URL HTTPS under its own domain. X-Forwarded-For, the
// client, is compared.
var frontEnd = []string{"X-Forwarded-Host", "X-Forwarded-Proto"}

// Diff lists how b's outcome differs from a's, after the normalisations
// every platform shares (each documented where it is made):
//
//   - framing fields are not compared (see framing), nor frontEnd ones of
//     what reached the origin;
//   - a field's lines are one comma-separated list (RFC 9110 5.3), and
//     payload format 2.0 carries one value per name, the lines joined with
//     ",": values are compared as lists (Set-Cookie line by line);
//   - a HEAD answer has no content (RFC 9110 9.3.2): net/http drops what a
//     handler writes, the Lambda returns it and its front end drops it, so
//     HEAD bodies are not compared.
func Diff(r *Request, a, b Outcome) []string {
	var d []string
	add := func(what string, x, y any) {
		d = append(d, fmt.Sprintf("%s: %q vs %q", what, x, y))
	}
	if a.Status != b.Status {
		add("status", fmt.Sprint(a.Status), fmt.Sprint(b.Status))
	}
	for _, k := range differing(a.Header, b.Header, framing) {
		add("answer's "+k, a.Header[k], b.Header[k])
	}
	if r.Method != http.MethodHead && !bytes.Equal(a.Body, b.Body) {
		add("answer's body", string(a.Body), string(b.Body))
	}
	switch sa, sb := a.Seen, b.Seen; {
	case sa == nil && sb == nil:
	case sa == nil || sb == nil:
		add("reached the origin", fmt.Sprint(sa != nil), fmt.Sprint(sb != nil))
	default:
		if sa.Method != sb.Method {
			add("origin's method", sa.Method, sb.Method)
		}
		if sa.Path != sb.Path {
			add("origin's path", sa.Path, sb.Path)
		}
		if sa.Query != sb.Query {
			add("origin's query", sa.Query, sb.Query)
		}
		if sa.Host != sb.Host {
			add("origin's Host", sa.Host, sb.Host)
		}
		for _, k := range differing(sa.Header, sb.Header, append(slices.Clip(framing), frontEnd...)) {
			add("origin's "+k, sa.Header[k], sb.Header[k])
		}
		if !bytes.Equal(sa.Body, sb.Body) {
			add("origin's body", string(sa.Body), string(sb.Body))
		}
	}
	return d
}

// differing returns the canonical names, sorted, whose values differ as
// lists between a and b, leaving out skip.
func differing(a, b http.Header, skip []string) []string {
	a, b = canonical(a), canonical(b)
	var out []string
	for _, h := range []http.Header{a, b} {
		for k := range h {
			if slices.Contains(skip, k) || slices.Contains(out, k) {
				continue
			}
			if !slices.Equal(list(k, a[k]), list(k, b[k])) {
				out = append(out, k)
			}
		}
	}
	slices.Sort(out)
	return out
}

// canonical returns h with canonical names: JavaScript's Headers, and so
// a Worker's answer, may hold lower-case ones (the Worker's proxy keeps a
// HEAD answer's length under "content-length").
func canonical(h http.Header) http.Header {
	out := make(http.Header, len(h))
	for k, vs := range h {
		ck := http.CanonicalHeaderKey(k)
		out[ck] = append(out[ck], vs...)
	}
	return out
}

// list is a field's value as a list: its lines split at commas, each
// element trimmed of spaces and tabs (RFC 9110 5.6.1's OWS, not Unicode's
// white space, which an origin may read as part of a key), empty ones
// dropped. Set-Cookie, whose values hold commas, is its lines.
func list(k string, vs []string) []string {
	if k == "Set-Cookie" {
		return vs
	}
	var out []string
	for _, v := range vs {
		for e := range strings.SplitSeq(v, ",") {
			if e = strings.Trim(e, " \t"); e != "" {
				out = append(out, e)
			}
		}
	}
	return out
}
