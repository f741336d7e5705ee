package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate/httpapi"
	"github.com/slidegate/slidegate/internal/parity"
	"github.com/slidegate/slidegate/kvstore/workerskv"
)

// workerSide is the Worker as serve_js.go builds it, one Go instance per
// request (newHandler on every request, over the isolate's globals, which
// outlive the instance), in front of its own recording origin. What the
// JavaScript side does is modelled in Go: workerd's request (workerRequest),
// syumai's conversion of it, joinRequestHeader and readBody's bytes, and
// fetch (fetchModel). The store is the Worker's own, workerskv, over an
// empty KV whose writes go nowhere: one isolate counts exactly, as the
// local server's memory store does (several isolates are the documented
// eventual consistency, not compared here). It fails as c's Outage says
// (parity.Failing). Its fetch is wrap(fetch's model, the header of the
// request the Worker's Go code got, as it was before the handler ran);
// nil: fetch's model alone.
func workerSide(t *testing.T, c parity.Config, clock *parity.Clock, wrap func(fetch http.RoundTripper, in func() http.Header) http.RoundTripper) parity.Side {
	t.Helper()
	cfgText := c.Text
	origin := parity.NewOrigin(t)
	g := workerskv.NewMemGlobals("isolate-1")
	configs := map[string][]byte{}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// Go's transport would ask for gzip of its own. workerd's fetch asks
	// for "br, gzip" (seen under wrangler dev) and decodes: the test's
	// origin never compresses, so that is left out of the model.
	tr.DisableCompression = true
	t.Cleanup(tr.CloseIdleConnections)
	var in http.Header // the header of the request being served
	var fetch http.RoundTripper = fetchModel{tr}
	if wrap != nil {
		fetch = wrap(fetch, func() http.Header { return in })
	}
	log := slog.New(slog.DiscardHandler)
	return parity.Side{Name: "worker", Do: func(r *parity.Request) (parity.Outcome, error) {
		store, err := workerskv.New(workerskv.Options{
			KV: nopKV{}, Globals: g, Later: func(time.Duration, func(context.Context)) {}, Now: clock.Now, Logger: log,
		})
		if err != nil {
			return parity.Outcome{}, err
		}
		h, err := newHandler(env{Config: text(cfgText), Origin: origin.URL.String()}, deps{
			Store: c.Store(store, clock), Local: workerskv.NewLocal(g, clock.Now), Transport: fetch,
			Now: clock.Now, Logger: log, Configs: &mapConfigs{m: configs, src: cfgText},
			Clock: workerskv.NewClock(g),
		})
		if err != nil {
			return parity.Outcome{}, err
		}
		req, err := workerRequest(r)
		if err != nil {
			return parity.Outcome{}, err
		}
		joinRequestHeader(req.Header) // as serve does before any handler
		in = req.Header.Clone()
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		seen, err := origin.Take()
		return parity.Outcome{Response: parity.Response{Status: w.Code, Header: w.Header(), Body: w.Body.Bytes()}, Seen: seen}, err
	}}
}

// workerRequest is the http.Request a Worker's Go code gets for r:
//
//   - workerd parses the URL (WHATWG URL Standard) before the Worker sees
//     it: dot segments, "." and ".." and their %2e spellings, are removed
//     (whatwgPath), and a "'" in the query is escaped;
//   - JavaScript's Headers combine a name's lines into one value joined
//     with ", ", and workerd keeps the client's Connection field from the
//     Worker (docs/edge.md); Cloudflare adds CF-Connecting-IP (the
//     client's address), X-Forwarded-For, X-Forwarded-Proto, X-Real-IP and
//     CF-Ray;
//   - syumai's ToRequest splits every value at its commas, takes the
//     length from Content-Length (-1 for a body without one, 0 for none),
//     and RemoteAddr from CF-Connecting-IP. A request without a body has
//     a nil Body (ToBody of null), except a POST: workerd gives it an
//     empty stream (under wrangler dev, a POST /v1/check without a body
//     is the check API's 400, not the nil dereference a null body makes).
func workerRequest(r *parity.Request) (*http.Request, error) {
	target := "https://" + parity.Host + whatwgPath(r.Path())
	if strings.Contains(r.Target, "?") {
		target += "?" + strings.ReplaceAll(r.Query(), "'", "%27")
	}
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	js := map[string]string{} // JavaScript's Headers: lower-case names, one value each
	var names []string
	add := func(k, v string) {
		k = strings.ToLower(k)
		if old, ok := js[k]; ok {
			js[k] = old + ", " + v
			return
		}
		js[k] = v
		names = append(names, k)
	}
	for _, f := range r.Header {
		if !strings.EqualFold(f.Name, "Connection") {
			add(f.Name, f.Value)
		}
	}
	ip := r.Client.String()
	add("host", parity.Host)
	add("user-agent", parity.UserAgent)
	add("cf-connecting-ip", ip)
	add("x-forwarded-for", ip)
	add("x-forwarded-proto", "https")
	add("x-real-ip", ip)
	add("cf-ray", "8f0c1e2d3a4b5c6d-AMS")
	if len(r.Body) > 0 && !r.Chunked {
		add("content-length", strconv.Itoa(len(r.Body)))
	}
	h := http.Header{}
	for _, k := range names {
		for _, v := range strings.Split(js[k], ",") {
			h.Add(k, v)
		}
	}
	req := &http.Request{
		Method: r.Method, URL: u, Header: h, Host: h.Get("Host"), RemoteAddr: h.Get("Cf-Connecting-Ip"),
		TransferEncoding: strings.Split(h.Get("Transfer-Encoding"), ","),
	}
	hasBody := r.Method != http.MethodGet && r.Method != http.MethodHead &&
		(len(r.Body) > 0 || r.Chunked || r.Method == http.MethodPost)
	n, clErr := strconv.ParseInt(h.Get("Content-Length"), 10, 64)
	req.ContentLength = n
	if hasBody {
		req.Body = io.NopCloser(bytes.NewReader(r.Body))
		if clErr != nil {
			req.ContentLength = -1
		}
	}
	return req, nil
}

// whatwgPath is the path of an http(s) URL as the WHATWG URL Standard
// parses it: a segment "." or ".." (or "%2e", ".%2e", "%2e%2e" in any
// case) is removed, ".." with the segment before it, and the path keeps
// its trailing slash when the last segment was one. Other bytes the
// generated paths hold are left as they are.
func whatwgPath(p string) string {
	segs := strings.Split(strings.TrimPrefix(p, "/"), "/")
	out := make([]string, 0, len(segs))
	for i, s := range segs {
		last := i == len(segs)-1
		switch strings.ToLower(s) {
		case "..", ".%2e", "%2e.", "%2e%2e":
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
			if last {
				out = append(out, "")
			}
		case ".", "%2e":
			if last {
				out = append(out, "")
			}
		default:
			out = append(out, s)
		}
	}
	return "/" + strings.Join(out, "/")
}

// fetchModel is the Worker's fetch client played by a Go transport: the
// request's lines of one name go out as one value joined with ", "
// (JavaScript's Headers), and the answer's values come back split at their
// commas, as syumai converts fetch's Headers (jsSplit).
type fetchModel struct{ rt http.RoundTripper }

func (f fetchModel) RoundTrip(r *http.Request) (*http.Response, error) {
	out := r.Clone(r.Context())
	for k, vs := range out.Header {
		if len(vs) > 1 {
			out.Header[k] = []string{strings.Join(vs, ", ")}
		}
	}
	res, err := f.rt.RoundTrip(out)
	if err != nil {
		return nil, err
	}
	res.Header = jsSplit(res.Header)
	return res, nil
}

// workerNormaliser takes out of the outcomes what the Worker documents as
// its own, or what is another engineer's to settle:
//
//   - forwarding headers (X-Forwarded-*, X-Real-IP, Forwarded, CF-*,
//     True-Client-IP, ...) on both sides: the Worker sets its own from
//     Cloudflare's (edge/app.go forwarding), not from a socket peer;
//   - the headers the client's Connection field names, at the Worker's
//     origin: workerd keeps that field from the Worker, so they go on
//     (docs/edge.md, "Three things the Worker cannot pass on");
//   - the path at the reference's origin is taken as workerd's URL parser
//     gives it (whatwgPath): the Worker never sees dot segments, so its
//     origin gets "/v1/search" for "/v1/x/../search" (the pre-filter
//     prices both alike: it cleans the path);
//   - query parameters Go cannot parse (a ";", a bad escape) are dropped
//     from the Worker's origin's query as httputil.ReverseProxy drops them
//     (cleanQuery): the local server's and the Lambda's proxy drop them
//     against parameter smuggling, the Worker's passes the query as sent
//     (docs/edge.md: "its method, path, query ... as the client sent them").
func workerNormaliser(r *parity.Request, ref, got *parity.Outcome) {
	for _, o := range []*parity.Outcome{ref, got} {
		if o.Seen == nil {
			continue
		}
		for k := range o.Seen.Header {
			if httpapi.ClientHeader(k) || k == "Forwarded" || strings.HasPrefix(k, "Cf-") {
				delete(o.Seen.Header, k)
			}
		}
	}
	if got.Seen != nil {
		for _, v := range r.Values("Connection") {
			for name := range strings.SplitSeq(v, ",") {
				got.Seen.Header.Del(textproto.TrimString(name))
			}
		}
		got.Seen.Query = cleanQuery(got.Seen.Query)
	}
	if ref.Seen != nil {
		ref.Seen.Path = whatwgPath(ref.Seen.Path)
	}
}

// cleanQuery is httputil.ReverseProxy's cleanQueryParams: a query holding
// a ";" or a "%" that begins no escape is parsed and encoded again, which
// drops what does not parse and sorts the rest by name.
func cleanQuery(s string) string {
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == ';', s[i] == '%' && (i+2 >= len(s) || !isHexDigit(s[i+1]) || !isHexDigit(s[i+2])):
			v, _ := url.ParseQuery(s)
			return v.Encode()
		}
	}
	return s
}

func isHexDigit(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// TestParityWithLocal: generated sequences of requests get the same
// answers (status, rate-limit fields, problem+json and check bodies, the
// origin's answer) from the Worker as from the local server, and the
// origin gets the same request (method, path, query, headers, body), at
// every instant of the same clock, for each configuration.
//
// Every kind of input is in (parity.Options): check requests naming a plan
// other than the key's (PlanOverrides), keys on several header lines
// (SplitKeys), a clock that steps back (StepsBack) and keys with Unicode
// white space around them (UnicodeSpace). They found the deny cache
// answering with too short a wait, the Worker hashing "k1, k2" where the
// others hashed "k1,k2", and the Worker's limiter, which lives for one
// request, deciding in a bucket the step had reopened (the isolate now
// keeps the newest time: workerskv.Clock). The Worker is its Wasm build
// (wasmWorkerSide: workerd's reading of header bytes, keylines_js.go), and
// the origin's key header is compared as the README says it differs
// (wasmNormaliser).
func TestParityWithLocal(t *testing.T) {
	o := parity.Options{PlanOverrides: true, SplitKeys: true, StepsBack: true, UnicodeSpace: true}
	parity.RunAll(t, o, wasmWorkerSide, wasmNormaliser)
}
