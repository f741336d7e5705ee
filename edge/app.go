package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/textproto"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slidegate/slidegate/config"
	"github.com/slidegate/slidegate/httpapi"
	"github.com/slidegate/slidegate/kvstore"
	"github.com/slidegate/slidegate/kvstore/workerskv"
)

// Names of the Worker's bindings and variables (wrangler.toml).
const (
	kvBinding  = "SLIDEGATE_KV"
	varConfig  = "SLIDEGATE_CONFIG"
	varOrigin  = "ORIGIN_URL"
	varDebug   = "SLIDEGATE_DEBUG"
	originSelf = "self"
)

// Errors of the Worker's setup.
var (
	ErrOrigin = errors.New("edge: ORIGIN_URL must be empty, \"self\" or an absolute http(s) URL without query")
	// ErrConfig wraps what is wrong with SLIDEGATE_CONFIG.
	ErrConfig = errors.New("edge: " + varConfig)
)

// env is what the Worker reads from its variables.
type env struct {
	// Config reads SLIDEGATE_CONFIG (nil or empty: config.Default()). It
	// is called only when the configuration cache has no binary form for
	// it, so that a hit copies no text out of JavaScript.
	Config func() string
	Origin string // ORIGIN_URL; see the package doc
	Debug  bool   // SLIDEGATE_DEBUG == "1"
}

// config returns SLIDEGATE_CONFIG.
func (e env) config() string {
	if e.Config == nil {
		return ""
	}
	return e.Config()
}

// deps are the platform pieces the handler is built from.
type deps struct {
	Store     kvstore.Store
	Local     kvstore.Conditional
	Transport http.RoundTripper // the fetch client's, for the origin
	Now       func() time.Time
	Logger    logger
	Debug     *debug      // nil unless env.Debug
	Configs   configCache // nil: parse every time
	Clock     clock       // nil: each request's limiter starts afresh
	// Upgraded answers with the WebSocket of the origin's 101 (proxy's
	// upgraded); nil: a 101 is answered as it is.
	Upgraded func() func(h http.Header)
}

// clock keeps the newest time the isolate's limiters have seen
// (workerskv.Clock): the limiter lives for one request, and holds a clock
// that steps back at the newest time it was given.
type clock interface {
	Latest() time.Time
	Keep(from, t time.Time)
}

// configText returns the text of SLIDEGATE_CONFIG from the variable's
// JavaScript type (typeof) kind: a string as it is, an absent variable as
// nothing (the default plans), and any other value as its JSON (json), for
// the parser to take or refuse. wrangler gives a variable written as a
// TOML table ([vars.SLIDEGATE_CONFIG]), or as a JSON object in
// wrangler.jsonc, to the Worker as an object, which was taken for an
// absent variable: the Worker ran on the default plans, every API key on
// the default plan, and said nothing.
func configText(kind string, str, json func() string) string {
	switch kind {
	case "string":
		return str()
	case "undefined":
		return ""
	}
	return json()
}

// configCache keeps a validated configuration's binary form (see
// config.Config.AppendBinary) for the next Go instances of the isolate: the
// stock shim starts one per request, and reading the binary form back costs
// a fraction of parsing and validating the JSON. A cache belongs to one
// request and knows its configuration's source: what it keeps is looked up
// for that source only.
type configCache interface {
	// Lookup returns the binary form kept for this request's source.
	Lookup() ([]byte, bool)
	// Keep keeps bin as the binary form of this request's source.
	Keep(bin []byte)
}

// loadConfig returns the configuration: from the cache when it holds the
// binary form of this request's source, else src() parsed (the defaults for
// an empty text) and, once valid, kept in the cache. A binary form that
// does not read back is ignored, and the text parsed again.
func loadConfig(src func() string, cache configCache) (*config.Config, error) {
	if cache != nil {
		if bin, ok := cache.Lookup(); ok {
			var c config.Config
			if c.UnmarshalBinary(bin) == nil {
				return &c, nil
			}
		}
	}
	c, err := config.Parse([]byte(src()))
	if err != nil {
		return nil, err
	}
	if cache != nil {
		if bin, err := c.AppendBinary(nil); err == nil {
			cache.Keep(bin)
		}
	}
	return c, nil
}

// logger is what the Worker logs through: jsonlog's JSON lines on the
// console (log/slog would add a twentieth to the bundle); *slog.Logger in
// tests.
type logger interface {
	httpapi.Logger
	workerskv.Logger
	Error(msg string, args ...any)
}

// newHandler builds the Worker's handler: httpapi in front of the origin.
// With a d.Clock, the handler serves one request (the stock shim starts a
// Go instance, and builds a handler, per request): when the request reads
// the clock, it reads the isolate's time too and keeps its own at once.
func newHandler(e env, d deps) (http.Handler, error) {
	cfg, err := loadConfig(e.config, d.Configs)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	next, err := originHandler(e.Origin, d.Transport)
	if err != nil {
		return nil, err
	}
	if p, ok := next.(*proxy); ok {
		p.log, p.upgraded = d.Logger, d.Upgraded
	}
	// The isolate's newest time is read when the request reads the clock:
	// after its body was awaited, while other requests of the isolate ran
	// and kept newer times (found by review). The request's own time is
	// kept at once, before its check awaits KV; its limiter's newest time
	// is kept again at the end (a correction it followed lowers the
	// isolate's time then).
	var h *httpapi.Handler
	var from time.Time
	now := d.Now
	if d.Clock != nil {
		read := now
		if read == nil {
			read = time.Now
		}
		now = func() time.Time {
			from = d.Clock.Latest()
			h.Seen(from)
			t := read()
			if t.After(from) {
				d.Clock.Keep(from, t)
			}
			return t
		}
	}
	o := httpapi.Options{
		Config: cfg, Validated: true, // loadConfig's are
		Store: d.Store, Local: d.Local, Next: next,
		ClientIP: clientIP, Now: now, Logger: d.Logger,
	}
	if d.Clock != nil {
		// A check that awaited KV past a boundary while other requests
		// of the isolate were decided beyond it is checked again at
		// their time, as they would not see its count.
		o.Latest = d.Clock.Latest
	}
	h, err = httpapi.New(o)
	if err != nil {
		return nil, fmt.Errorf("edge: %w", err)
	}
	var out http.Handler = h
	if d.Clock != nil {
		out = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h.ServeHTTP(w, r)
			d.Clock.Keep(from, h.Latest())
		})
	}
	if e.Debug && d.Debug != nil {
		return d.Debug.wrap(out), nil
	}
	return out, nil
}

// wantsBody reports whether the Worker reads r's body in one piece before
// the handler runs (readBody): a check request that declares a length
// within the check API's limit. Any other body stays a stream: a proxied
// request's body goes to the origin as it comes, and a body of unknown or
// excessive length is left to the handler's limit.
func wantsBody(r *http.Request) bool {
	return r.Method == http.MethodPost && r.URL.Path == httpapi.CheckPath &&
		r.ContentLength > 0 && r.ContentLength <= httpapi.MaxCheckBody
}

// escapedURL returns the URL u of a request as workerd gives it with its
// path escaped as the Lambda's adapter escapes a Function URL's
// (httpapi.EscapePath), and whether that changed it. The query is left as
// it is: Go does not refuse its escapes.
//
// workerd passes a "%" that begins no escape ("/100%", "/%zz") on as the
// client sent it, and syumai parses the URL with Go's url package, which
// refuses it: the Worker threw (a 500, Cloudflare's error 1101) before the
// request was decided, neither counted nor passed on; it becomes "%25".
// A "|" (and, from a parser older than WHATWG's of 2024, a "^"), which
// WHATWG's URL parser leaves unescaped, Go takes in the path but not in
// its RawPath, which it then drops: its EscapedPath, which the proxy sent,
// was the decoded path escaped again, and "/files/a%2Fb|x" reached the
// origin as "/files/a/b%7Cx", another resource to an origin that routes
// on "%2F"; it becomes "%7C".
func escapedURL(u string) (string, bool) {
	end := strings.IndexAny(u, "?#")
	if end < 0 {
		end = len(u)
	}
	// Escaped with the path: the scheme and host, which hold none of its
	// bytes but for a host that WHATWG's parser takes with '"', '`', '{'
	// or '}', which Go refuses escaped or not, as before.
	p := httpapi.EscapePath(u[:end], false)
	return p + u[end:], len(p) != end
}

// clientIP is the address Cloudflare saw the client connect from. A zone
// whose Pseudo IPv4 is set to "Overwrite Headers" gets an IPv6 client's
// CF-Connecting-IP as a Class E address (240.0.0.0/4, which no client
// has) "hashed from the original IPv6 address" (Cloudflare does not say
// from how much of it), and the address itself in CF-Connecting-IPv6:
// taken as it came, the addresses of one /64 could each be an IPv4 client
// of its own, a fresh quota for every address a host rotated through,
// where ipv6_prefix counts the /64 as one. Only then is CF-Connecting-IPv6
// read: Cloudflare wrote it, and from a client with a real IPv4 address
// it is the client's to forge. One that is no address (a client's copy
// beside Cloudflare's, joined by the runtime) is no client IP, the shared
// ip:unknown: the Class E address instead may be a fresh one for each
// address of the client's /64, a quota per address where ip:unknown is
// one for all such clients.
// The first octet is read from the text (three digits, 240 or more), not
// from a second parse, which cost the Worker's bundle four times the
// bytes.
func clientIP(r *http.Request) (netip.Addr, bool) { return connectingIP(r, true) }

// connectingIP is CF-Connecting-IP, or with identity set the client the
// limits count (clientIP). The origin's forwarding headers take the
// address as Cloudflare wrote it (forwarding): a zone set to "Overwrite
// Headers" is one whose origin reads IPv4 alone, and X-Real-IP and the
// last X-Forwarded-For hop had become the IPv6 address it was set to
// keep from them.
func connectingIP(r *http.Request, identity bool) (netip.Addr, bool) {
	h := strings.TrimSpace(r.Header.Get("CF-Connecting-IP"))
	if identity && len(h) > 3 && h[3] == '.' && h[:3] >= "240" {
		if v6 := strings.TrimSpace(r.Header.Get("CF-Connecting-IPv6")); strings.IndexByte(v6, ':') >= 0 {
			h = v6
		}
	}
	a, err := netip.ParseAddr(h)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// failed answers every request with a 500 naming the variable or binding
// whose setup failed, and logs the error: a Worker with a broken
// configuration should say why, not crash. The error itself stays in the
// log, as it may quote a value (a key pasted into the wrong place of
// SLIDEGATE_CONFIG, a token in ORIGIN_URL), and the 500 goes to anyone.
func failed(err error, log logger) http.Handler {
	log.Error("edge: setup failed", "err", err)
	detail := "the Worker's setup failed"
	switch {
	case errors.Is(err, ErrConfig):
		detail = varConfig + " is invalid"
	case errors.Is(err, ErrOrigin):
		detail = varOrigin + " is invalid"
	case errors.Is(err, workerskv.ErrBinding):
		detail = "the KV binding " + kvBinding + " is missing or not a KV namespace"
	}
	detail += "; the Worker's log (wrangler tail) has the error"
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		httpapi.WriteProblem(w, http.StatusInternalServerError, "slidegate is misconfigured", detail)
	})
}

// originHandler returns the handler admitted requests go to: nil for the
// check API only, the request's own URL for "self", or spec's scheme and
// host (and path prefix) with the request's path and query.
func originHandler(spec string, rt http.RoundTripper) (http.Handler, error) {
	spec = strings.TrimSpace(spec)
	switch spec {
	case "":
		return nil, nil
	case originSelf:
		return &proxy{rt: rt}, nil
	}
	u, err := httpapi.ParseOrigin(spec)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrOrigin, err)
	}
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		// Not shown: a query may hold a token.
		bare := *u
		bare.RawQuery, bare.ForceQuery, bare.Fragment, bare.RawFragment = "", false, "", ""
		return nil, fmt.Errorf("%w, got %q with a query or fragment", ErrOrigin, bare.Redacted())
	}
	return &proxy{base: u, rt: rt}, nil
}

// proxy forwards a request to the origin through rt and copies the answer
// back. Headers the pre-filter already set stay.
type proxy struct {
	base *url.URL // nil: the request's own URL
	rt   http.RoundTripper
	log  httpapi.Logger // nil: origin errors are not logged
	// upgraded returns what answers the client with the WebSocket of the
	// origin's 101 that rt returned last, under a header, or nil when it
	// carried none (wsAnswer, in the Worker). nil: a 101 is answered as it
	// is.
	upgraded func() func(h http.Header)
}

// errNoWebSocket: the origin answered 101 without a WebSocket the Worker
// could pass on.
var errNoWebSocket = errors.New("edge: the origin's 101 carried no WebSocket")

// errStatus: the origin's answer has a status a JavaScript Response
// cannot carry.
var errStatus = errors.New("edge: the origin answered a status the Worker cannot pass on")

// isWebSocket reports whether h asks for a WebSocket: its Upgrade lists
// the token websocket (RFC 6455 4.2.1, any case).
func isWebSocket(h http.Header) bool {
	for _, v := range h["Upgrade"] {
		for p := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(textproto.TrimString(p), "websocket") {
				return true
			}
		}
	}
	return false
}

// hopHeaders are connection-level headers that are not forwarded, besides
// the ones a Connection header names.
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// removeHop deletes h's hop-by-hop headers. workerd keeps a client's
// Connection header from the Worker, but fetch shows the origin's. The
// names are trimmed of ASCII white space only, as Go's reverse proxy and
// the pre-filter read them (strings.TrimSpace also took U+00A0: a key
// header the pre-filter had counted would not reach the origin).
func removeHop(h http.Header) {
	for _, v := range h["Connection"] {
		for name := range strings.SplitSeq(v, ",") {
			if name = textproto.TrimString(name); name != "" {
				h.Del(name)
			}
		}
	}
	for _, k := range hopHeaders {
		h.Del(k)
	}
}

// forwarding sets the headers by which the origin learns who the client
// is, as the local server's proxy does behind a trusted proxy (here,
// Cloudflare's edge).
// The client's own forwarding headers (httpapi.ClientHeader: X-Original-URL,
// which some origins serve instead of the request line, X-Forwarded-Host,
// X-Client-IP, ...) and Forwarded are forged, and dropped. Kept are what
// Cloudflare wrote: X-Forwarded-For (the client's chain with the address
// Cloudflare saw appended; that address is appended here when it is not
// last, as in wrangler dev) and CF-Connecting-IP and -IPv6 (Cloudflare
// sets them on the subrequest). Without CF-Connecting-IP nothing vouches for the chain, and
// it is dropped. X-Real-IP is set to the client's address as
// CF-Connecting-IP gives it (a zone's Pseudo IPv4 address too, which the
// limits do not count: clientIP): a same-zone subrequest's
// CF-Connecting-IP is taken from it. True-Client-IP, when
// present, is set to the same address (Cloudflare's is a copy of
// CF-Connecting-IP). X-Forwarded-Host and -Proto are the host and scheme the
// Worker was asked for.
func forwarding(h http.Header, r *http.Request) {
	xff := h["X-Forwarded-For"]
	_, trueClient := h["True-Client-Ip"]
	delete(h, "Forwarded")
	for k := range h {
		if httpapi.ClientHeader(k) && k != "Cf-Connecting-Ip" && k != "Cf-Connecting-Ipv6" {
			delete(h, k)
		}
	}
	if ip, ok := connectingIP(r, false); ok {
		s := ip.String()
		switch {
		case len(xff) == 0:
			xff = []string{s}
		case !httpapi.LastHop(xff, ip):
			// One line, as httputil.ReverseProxy writes it.
			xff = []string{strings.Join(xff, ", ") + ", " + s}
		}
		h["X-Forwarded-For"] = xff
		h["X-Real-Ip"] = []string{s}
		if trueClient {
			h["True-Client-Ip"] = []string{s}
		}
	}
	if r.Host != "" {
		h["X-Forwarded-Host"] = []string{r.Host}
	}
	if r.URL.Scheme == "http" || r.URL.Scheme == "https" {
		h["X-Forwarded-Proto"] = []string{r.URL.Scheme}
	}
}

// addHeader adds the origin's fields in src to dst as the origin sent
// them. syumai's conversion of JavaScript Headers (fetch's answer's, as a
// request's: joinRequestHeader) splits every value at its commas, and the pieces went out as
// fields of their own: a Set-Cookie's "Expires=Wed, 21 Oct 2037 …" became
// two cookies, a Location's "?ids=1,2" became "?ids=1, 2", an ETag
// "\"v1,2\"" no longer matched. Joined with "," again, the pieces give back
// the value JavaScript held (which joins repeated fields with ", ", the
// same field for HTTP); Set-Cookie is never joined (setCookies).
func addHeader(dst, src http.Header) {
	for k, vs := range src {
		if len(vs) == 0 {
			continue
		}
		if http.CanonicalHeaderKey(k) != "Set-Cookie" {
			dst.Add(k, strings.Join(vs, ","))
			continue
		}
		for _, c := range setCookies(vs) {
			dst.Add(k, c)
		}
	}
}

// joinRequestHeader undoes, in place, syumai's split of a request's header
// values at their commas (see addHeader), before anything reads them: the
// pre-filter hashed only the first piece of an X-API-Key or Authorization
// value, so the keys "K,a" and "K" were one client, and a check token
// followed by ",anything" passed.
func joinRequestHeader(h http.Header) {
	for k, vs := range h {
		if len(vs) > 1 {
			h[k] = []string{strings.Join(vs, ",")}
		}
	}
}

// setCookies joins the comma-split pieces of Set-Cookie values back into
// cookies. JavaScript gives each cookie as a value of its own, trimmed, so
// a piece that follows is either the next cookie or the rest of the same
// one after a comma, which a cookie holds in two places only: a quoted
// cookie-value (net/http quotes a value holding a comma or a space) and an
// attribute (Expires's "Wed, 21 Oct", a Path's "/a,b"). Joining too little
// makes a cookie of whatever follows the comma: an origin's
// lang="en,session=evil" reached the client as a cookie "session".
func setCookies(pieces []string) []string {
	// closes[i] is the first piece from i on whose cookie-pair part (before
	// any ";") holds an odd number of quotes, so that it closes a quoted
	// value left open before i; -1 when none does before a piece with an
	// attribute, or at all. A quote nothing closes is no quoted value:
	// taking the cookies after it in would lose them. Computed in one pass
	// from the right, so that an answer with many commas costs linear time.
	closes := make([]int, len(pieces))
	next := -1
	for k := len(pieces) - 1; k >= 0; k-- {
		pair, _, attrs := strings.Cut(pieces[k], ";")
		switch {
		case strings.Count(pair, `"`)%2 == 1:
			next = k
		case attrs:
			next = -1
		}
		closes[k] = next
	}
	var out []string
	// The cookie being built is pieces[start:i]; attrs: it has a ";" (a
	// comma after it is in an attribute), open: an odd number of quotes.
	start, attrs, open := 0, false, false
	take := func(p string) {
		attrs = attrs || strings.Contains(p, ";")
		open = open != (strings.Count(p, `"`)%2 == 1)
	}
	for i := 0; i < len(pieces); {
		switch {
		case i == start:
			take(pieces[i])
			i++
		case !attrs && open && closes[i] >= 0:
			for end := closes[i]; i <= end; i++ {
				take(pieces[i])
			}
		case !startsCookie(pieces[i]):
			take(pieces[i])
			i++
		default:
			out = append(out, strings.Join(pieces[start:i], ","))
			start, attrs, open = i, false, false
		}
	}
	if start < len(pieces) {
		out = append(out, strings.Join(pieces[start:], ","))
	}
	return out
}

// startsCookie reports whether a piece of a split Set-Cookie value, not
// inside a quoted cookie-value, is a cookie of its own: it has a "="
// before its first ";" and the name before the "=" is a token (RFC 6265
// 4.1.1) or empty (a nameless cookie, which browsers keep). The piece
// after a comma in an attribute starts with a space (Expires's
// "Wed, 21 Oct"), has no "=" (a Path's "/a,b") or no token before it
// ("/a,/b=c"); an attribute value holding ",name=" cannot be told from
// the next cookie (docs/edge.md).
func startsCookie(p string) bool {
	pair, _, _ := strings.Cut(p, ";")
	name, _, ok := strings.Cut(pair, "=")
	return ok && isToken(name)
}

// isToken reports whether s holds only token characters (RFC 9110 5.6.2).
func isToken(s string) bool {
	for _, c := range []byte(s) {
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// noBody reports whether the answer to a request of method with status
// has no body (RFC 9110 6.4.1, 9.3.2). fetch gives it a null stream, which
// syumai's reader cannot read: io.Copy hands it as it is to syumai's own
// ResponseWriter, but behind any wrapper (the debug Worker's) it read the
// stream, panicked, and took the Go instance down with it.
func noBody(method string, status int) bool {
	switch {
	case method == http.MethodHead, status >= 100 && status < 200:
		return true
	}
	return status == http.StatusNoContent || status == http.StatusResetContent || status == http.StatusNotModified
}

func (p *proxy) target(r *http.Request) *url.URL {
	u := *r.URL
	if p.base == nil {
		if u.Host == "" {
			u.Host = r.Host
		}
		if u.Scheme == "" {
			u.Scheme = "https"
		}
		return &u
	}
	u.Scheme, u.Host, u.User = p.base.Scheme, p.base.Host, nil
	// Join the escaped forms too: "/files/a%2Fb" must not reach the origin
	// as "/files/a/b", another resource. The base loses a trailing slash,
	// not a trailing "%2F".
	base, raw := p.base.Path, p.base.EscapedPath()
	if strings.HasSuffix(raw, "/") {
		base, raw = strings.TrimSuffix(base, "/"), raw[:len(raw)-1]
	}
	u.Path = base + r.URL.Path
	u.RawPath = raw + r.URL.EscapedPath()
	return &u
}

// requestBody is a client's request body as the Worker hands it to the
// handler. The proxy marks it sent when it gives it to fetch: from then on
// the subrequest's stream reads it, also after the handler has returned,
// when the origin answered before it had read the body (a streaming or
// full-duplex origin, or one refusing an upload early), and the Worker must
// not read it too (drain).
//
// When fetch fails, the part of the body it did not read is the Worker's
// again: nobody else reads it, and under wrangler dev the client's
// connection stalled with the upload half read, and the Worker answered no
// request for about a minute (TestWorkerdOriginDownUpload). A read by a
// subrequest's stream that was still pending then and the Worker's drain
// take turns (mu): syumai's reader allows one read at a time. In the
// Worker, a pipe into fetch's stream may be reading it (jsFetch): it is
// stopped before drain reads (release).
type requestBody struct {
	// Not comparable, so that the Worker's bundle carries no equality
	// function for it (docs/edge.md, "Size").
	_ [0]func()

	rc   io.ReadCloser
	mu   sync.Mutex
	sent atomic.Bool
}

func (b *requestBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.rc.Read(p)
}

func (b *requestBody) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.rc.Close()
}

// trackBody wraps r's body, when it has one, in a requestBody, and returns
// it (nil without a body).
func trackBody(r *http.Request) *requestBody {
	if r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	b := &requestBody{rc: r.Body}
	r.Body = b
	return b
}

// unsent reports whether what is left of b is the Worker's to read: b was
// never handed to a subrequest.
func (b *requestBody) unsent() bool { return b != nil && !b.sent.Load() }

func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body io.ReadCloser
	if r.Method != http.MethodGet && r.Method != http.MethodHead && r.Body != nil {
		body = r.Body
	}
	// Built as fetch reads it (method, URL, headers, body; ToJSRequest
	// writes the URL out again): http.NewRequestWithContext, which parsed
	// the URL's text back, linked 5.9 KB of the Worker's gzip, and the
	// method and URL it checks come from workerd's Request and from
	// url.Parse already.
	out := (&http.Request{
		Method: r.Method, URL: p.target(r),
		Header:        r.Header.Clone(), // joined as sent (joinRequestHeader)
		Body:          body,
		ContentLength: r.ContentLength,
	}).WithContext(r.Context())
	if p.base != nil {
		out.Header.Del("Host")
	}
	websocket := isWebSocket(r.Header)
	removeHop(out.Header)
	if websocket {
		// A JavaScript Worker's fetch(request) takes the upgrade on;
		// dropped as hop-by-hop, the origin got a plain GET and answered
		// it (426), where the local server's proxy passes the WebSocket.
		out.Header["Upgrade"] = []string{"websocket"}
	}
	// The client's 100-continue is answered by the time the Worker runs
	// (its body streams in), and fetch does not pass an origin's interim
	// 100 on: forwarded, the expectation held the upload until workerd
	// cancelled the request as hung, a 500 counted against the client
	// (TestWorkerdExpectContinue; cloudflare/workerd#6845).
	out.Header.Del("Expect")
	forwarding(out.Header, r)
	if b, ok := body.(*requestBody); ok {
		b.sent.Store(true)
	}
	res, err := p.rt.RoundTrip(out)
	if err != nil {
		if b, ok := body.(*requestBody); ok {
			b.sent.Store(false) // drain reads what fetch left
		}
		httpapi.OriginFailed(p.log, w, r, err)
		return
	}
	defer res.Body.Close()
	if c := res.StatusCode; c > 599 || c < 200 && c != http.StatusSwitchingProtocols {
		// JavaScript's Response takes 200 to 599 (and a WebSocket's
		// 101): syumai's writer panicked on any other, the Go instance
		// died, and the client got workerd's 500 or no answer at all
		// (wrangler dev's workerd exited), without the rate-limit
		// headers, the request counted. workerd's fetch takes an
		// origin's 103 Early Hints (Node's writeEarlyHints, Go's
		// WriteHeader(103)) for its answer, the final answer's bytes
		// its body: the final answer cannot be had
		// (TestWorkerdOriginStatus).
		httpapi.OriginFailed(p.log, w, r, fmt.Errorf("%w: %d", errStatus, c))
		return
	}
	removeHop(res.Header)
	addHeader(w.Header(), res.Header)
	if res.StatusCode == http.StatusSwitchingProtocols && p.upgraded != nil {
		// The runtime answers the client's handshake itself, with the
		// client's key and its own extensions.
		w.Header().Del("Sec-Websocket-Accept")
		w.Header().Del("Sec-Websocket-Extensions")
		send := p.upgraded()
		if send == nil {
			httpapi.OriginFailed(p.log, w, r, errNoWebSocket)
			return
		}
		if f, ok := w.(http.Flusher); ok {
			f.Flush() // settles the pre-filter's fields (httpapi's writer), sends nothing in the Worker
		}
		send(w.Header())
		return
	}
	if noBody(r.Method, res.StatusCode) {
		if cl, ok := w.Header()["Content-Length"]; ok && r.Method == http.MethodHead {
			// A HEAD answer keeps the origin's Content-Length, the
			// length of the GET's body (encoded, if the origin encodes
			// it: there is no body here for fetch to decode). syumai's
			// writer, which looks it up under this canonical name, would
			// make the body a FixedLengthStream of that length that
			// nothing fills (workerd answered 500); JavaScript's Headers
			// take the name in any case.
			delete(w.Header(), "Content-Length")
			w.Header()["content-length"] = cl
		}
		w.WriteHeader(res.StatusCode)
		return
	}
	if enc := res.Header.Get("Content-Encoding"); enc != "" && !strings.EqualFold(enc, "identity") {
		// fetch hands the body over decoded, and the runtime encodes it
		// again as Content-Encoding says; the origin's Content-Length is
		// the encoded length, which the decoded body overruns (the
		// runtime then cuts the response off).
		w.Header().Del("Content-Length")
	}
	if _, typed := w.Header()["Content-Type"]; !typed && w.Header().Get("Content-Encoding") == "" &&
		res.Header.Get("Content-Length") != "0" && !nullBody(res.Body) {
		sniffed(w, res)
		return
	}
	w.WriteHeader(res.StatusCode)
	_, _ = io.Copy(bodyWriter(w), res.Body)
}

// sniffed answers with res, which has no Content-Type, giving it the type
// its first bytes show, as net/http's server does for the local server
// (and the Lambda's adapter): from what one read of res's body gives, up
// to the 512 bytes http.DetectContentType looks at, so that a streaming
// answer is not held for more. Without it the client got no type: a
// browser guessed the charset of a UTF-8 page, a client choosing its
// decoder by type found none (TestWorkerdUntypedAnswer). The body then
// goes through Go, not as fetch's stream: it takes the bytes read. A body
// of a declared length goes through fixedBody, which keeps the length and
// reads no faster than the client.
func sniffed(w http.ResponseWriter, res *http.Response) {
	first := make([]byte, 512)
	n, err := res.Body.Read(first)
	if n > 0 {
		w.Header().Set("Content-Type", http.DetectContentType(first[:n]))
	}
	w.WriteHeader(res.StatusCode)
	if n > 0 && res.ContentLength > 0 && fixedBody(w, first[:n], err, res.Body, res.ContentLength) {
		return
	}
	if n > 0 { // an empty Write waits for the runtime to read (io.Pipe)
		if _, werr := w.Write(first[:n]); werr != nil {
			return
		}
	}
	if err == nil {
		_, _ = io.Copy(w, res.Body)
	}
}
