package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	stdlog "log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"
)

// NewProxy returns the reverse proxy the local server puts behind the
// pre-filter: requests go to target as the client sent them (path, query,
// cookies, Accept-Encoding) with X-Forwarded-For, -Host and -Proto set,
// except that query parameters Go cannot parse (with a ';' or a bad
// escape) are dropped, as httputil.ReverseProxy does against parameter
// smuggling, and that the path's bytes that do not stand for themselves
// in a path ('|', '^', '{', ...) are escaped, its escapes ("%2F") kept
// (EscapePath). Answers come back as the origin sent them: redirects are not
// followed, compressed bodies are not decoded, and one the origin breaks
// off is aborted, not ended as if whole. Connections to the origin are
// kept alive. An unreachable origin is a 502 problem+json, one that does
// not answer in time a 504 (both logged at level ERROR); a client that
// went away before the origin answered is logged at level INFO, as it is
// no fault of the origin's, and so is a client whose body failed while it
// was sent on, which gets a 408 or a 400 (clientBodyFailed). Behind the
// Handler, these answers of the proxy's own carry the CORS fields of its
// 429 (AllowCORS); the origin's answers keep the origin's. The proxy's
// other complaints (a response body cut short) go to log too, at level
// WARN, not to the standard logger. A nil log discards them. The
// Transport is an *http.Transport of the proxy's own: the caller may set
// its ResponseHeaderTimeout.
//
// trusted are the configuration's trusted_proxies (config.Identity's
// Prefixes). From a socket peer among them, the X-Forwarded-For chain it
// sent goes on to the origin with the peer appended, so does a Forwarded
// chain (RFC 7239) it sent, and its X-Forwarded-Host and -Proto and other
// forwarding headers (X-Real-IP, X-Forwarded-Port, ...) are kept (a
// balancer that ended TLS says "https"). From any other peer those headers
// are the client's to forge: they are dropped (clientHeaders), and the
// origin gets X-Forwarded-For, -Host and -Proto with the peer, the Host
// and the scheme slidegate saw. (Headers whose names hold an underscore
// are the Handler's to drop: it knows the key headers, see forOrigin.)
func NewProxy(target *url.URL, log Logger, trusted []netip.Prefix) *httputil.ReverseProxy {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 1024
	tr.MaxIdleConnsPerHost = 1024
	tr.IdleConnTimeout = 90 * time.Second
	// The origin gets the client's Accept-Encoding, not one the transport
	// adds, and the client the origin's bytes: with compression on, a
	// client that sent none got a body the transport had decoded, with the
	// origin's validators (ETag) for the gzip one, and the proxy paid for
	// the decoding.
	tr.DisableCompression = true
	errorLog := stdlog.New(io.Discard, "", 0)
	if log != nil {
		errorLog = stdlog.New(warnWriter{log}, "", 0)
	}
	return &httputil.ReverseProxy{
		ErrorLog: errorLog,
		Rewrite: func(pr *httputil.ProxyRequest) {
			// SetURL joins the paths' url.URL.EscapedPath, which turns
			// each "%2F" of a RawPath holding a "|" into a "/"
			// (EscapePath): the origin would serve another resource.
			pr.Out.URL.RawPath = EscapePath(pr.Out.URL.RawPath, false)
			if pr.Out.URL.Path == "*" && pr.Out.URL.RawPath == "" {
				// The target "*" (Go's server takes it for a method
				// other than OPTIONS) goes to "/*", where the
				// pre-filter priced it: without a RawPath, url.URL
				// escapes the "*" and the origin got "/%2A", another
				// resource to one that routes on the path as sent.
				pr.Out.URL.RawPath = "*"
			}
			pr.SetURL(target)
			// A target of no http form ("GET http:x?q HTTP/1.1", which Go's
			// server takes, the "x" its URL's Opaque) has no path: the
			// pre-filter priced it at "/", and it goes there. Kept, HTTP/2's
			// transport refused it with an error quoting the query (a
			// token in it), logged at ERROR, for any client that sent
			// one to an origin that speaks h2; HTTP/1's sent "x?q" on.
			pr.Out.URL.Opaque = ""
			if pr.Out.Body != nil {
				pr.Out.Body = &clientBody{ReadCloser: pr.Out.Body}
			}
			if listed(pr.Out.Header["Upgrade"], "h2c") {
				// An origin that took the upgrade would serve HTTP/2
				// requests over the hijacked connection, counted as
				// one request here (h2c smuggling). The request goes on
				// as plain HTTP/1.1.
				delete(pr.Out.Header, "Upgrade")
				delete(pr.Out.Header, "Connection")
			}
			var peer netip.Addr
			fromProxy := false
			if len(trusted) > 0 { // no address to parse otherwise
				var ok bool
				peer, ok = parseAddr(pr.In.RemoteAddr)
				fromProxy = ok && contains(trusted, peer)
			}
			for k := range pr.Out.Header {
				// ReverseProxy drops only Forwarded and X-Forwarded-For,
				// -Host and -Proto; an origin may read the others.
				if !fromProxy && ClientHeader(k) {
					delete(pr.Out.Header, k)
				}
			}
			if fromProxy {
				pr.Out.Header["X-Forwarded-For"] = slices.Clone(pr.In.Header["X-Forwarded-For"])
			}
			pr.SetXForwarded()
			if xff := pr.In.Header["X-Forwarded-For"]; fromProxy && LastHop(xff, peer) {
				// The proxy wrote the peer's address already, as API
				// Gateway does with the Lambda's sourceIp.
				pr.Out.Header["X-Forwarded-For"] = []string{strings.Join(xff, ", ")}
			}
			if fromProxy {
				for _, k := range [...]string{"X-Forwarded-Host", "X-Forwarded-Proto"} {
					if v := pr.In.Header[k]; len(v) > 0 {
						pr.Out.Header[k] = slices.Clone(v)
					}
				}
				if v := pr.In.Header["Forwarded"]; len(v) > 0 {
					pr.Out.Header["Forwarded"] = append(slices.Clone(v), forwardedFor(peer))
				}
			}
		},
		Transport:  tr,
		BufferPool: bufferPool{},
		// A status Go's server cannot write (below 100, or past 999)
		// made WriteHeader panic: the client's connection was cut with
		// no answer and a stack logged. HTTP/1's transport reads any
		// three digits ("000"), HTTP/2's any integer.
		ModifyResponse: func(res *http.Response) error {
			if res.StatusCode < 100 || res.StatusCode > 999 {
				return fmt.Errorf("httpapi: origin answered with status %d, not 100 to 999", res.StatusCode)
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			r = asAsked(r)
			if unprintableUpgrade(r.Header) {
				// Refused by ReverseProxy before the origin was asked:
				// the client's doing, no origin error to log (one at
				// ERROR per such request, at the will of any client).
				const reason = "names a protocol with a byte that is not printable ASCII"
				oursInstead(w)
				writeProblem(w, http.StatusBadRequest, "the Upgrade field "+reason, []invalidParam{{Name: "Upgrade", Reason: reason}})
				return
			}
			if b, ok := r.Body.(*clientBody); ok {
				// r is the request Rewrite made: the transport's error
				// may be the client's body's, or follow from it (the
				// server cancels the request when its connection
				// fails).
				if berr := b.err.Load(); berr != nil {
					clientBodyFailed(log, w, r, *berr)
					return
				}
			}
			OriginFailed(log, w, r, err)
		},
	}
}

// asAsked returns r, the request the proxy sent on, with the path its
// client asked for, which its RequestURI still holds (ReverseProxy clones
// the client's request), so that the log lines of its failure name the
// path the client's other lines name (the denied, store-error and
// Worker's and Lambda adapter's own lines), not the origin's, with the
// origin URL's path before it. A request without a RequestURI (not from a
// server) is returned as it is.
func asAsked(r *http.Request) *http.Request {
	if r.RequestURI == "" {
		return r
	}
	u, err := url.ParseRequestURI(r.RequestURI)
	if err != nil || u.Path == r.URL.Path {
		return r
	}
	r = r.WithContext(r.Context()) // a copy, for its own URL
	v := *r.URL
	v.Path, v.RawPath = u.Path, u.RawPath
	r.URL = &v
	return r
}

// clientBody is the body of a request as the proxy sends it on: it keeps
// the first error of a read from the client's body (the transport reads
// it), so that a request that failed because its client did is not taken
// for an origin's failure (errors of the transport's own, a write to the
// origin that failed, come to the ErrorHandler, never through here).
// HTTP/1's transport returns once its reads of the body have; HTTP/2's
// may return on the request's cancellation while the read that failed is
// still returning, and the client is then taken for one that went away
// (OriginFailed's INFO line, with a 502).
//
// A read that began after the transport closed the body is not the
// client's: HTTP/2's transport closes it when the origin resets the
// stream or the connection fails, from another goroutine, and its writer
// may read again before it notices; that read fails (ReverseProxy's
// "invalid Read on closed Body") with nothing wrong with the client. Kept,
// it made about one in ten origins' resets a 400 logged at INFO as the
// client's, not a 502 origin error. So clientBody fails such a read
// itself and leaves the wrapper it reads open (ReverseProxy closes it when
// it returns): closed too, the wrapper also failed a read that had found
// clientBody open, when the Close came in between.
type clientBody struct {
	io.ReadCloser
	err    atomic.Pointer[error] // set by the transport's goroutine
	closed atomic.Bool           // by the transport, maybe while a read waits
}

// errBodyClosed fails a read of a clientBody the transport has closed.
var errBodyClosed = errors.New("httpapi: read of a request body after the transport closed it")

func (b *clientBody) Read(p []byte) (int, error) {
	if b.closed.Load() {
		return 0, errBodyClosed
	}
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		b.err.CompareAndSwap(nil, &err)
	}
	return n, err
}

func (b *clientBody) Close() error {
	b.closed.Store(true)
	return nil
}

// clientBodyFailed answers a request whose client failed to send its
// body, err saying why, while it was proxied, and logs it with log (nil:
// not logged) at INFO, as the client's doing (at ERROR, as an origin
// error, each such request would page an operator at the will of any
// client; a client that went away is logged at INFO too): a 408 when the
// client went silent past the server's bound (a read timeout), else a 400
// (a body shorter than its Content-Length, or the client gone, a chunked
// body malformed). The origin may have had part of the body; what it
// answered is not passed on. The connection is closed: what is left of
// the body cannot be told from the next request.
func clientBodyFailed(log Logger, w http.ResponseWriter, r *http.Request, err error) {
	status, detail := http.StatusBadRequest, "the request body was cut short or malformed"
	if timedOut(err) {
		status, detail = http.StatusRequestTimeout, "the request body did not come in time"
	}
	if log != nil {
		log.InfoContext(r.Context(), "client failed to send its request body", "error", Logged(err.Error()), "status", status, "method", Logged(r.Method), "path", Logged(r.URL.Path))
	}
	w.Header().Set("Connection", "close")
	oursInstead(w)
	writeProblem(w, status, detail, nil)
}

// timedOut reports whether err or an error it wraps is a net.Error that
// timed out (the chain walked as OriginFailed walks it).
func timedOut(err error) bool {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if ne, ok := e.(net.Error); ok {
			return ne.Timeout()
		}
	}
	return false
}

// unprintableUpgrade reports whether hd, a request's header, asks for an
// upgrade (Connection lists "upgrade") to a protocol whose name has a byte
// that is not printable ASCII, which httputil.ReverseProxy refuses
// without asking the origin. Go's server takes such a value (a byte of
// 0x80 or more, or DEL).
func unprintableUpgrade(hd http.Header) bool {
	if !listed(hd["Connection"], "Upgrade") {
		return false
	}
	return strings.ContainsFunc(hd.Get("Upgrade"), func(r rune) bool { return r < ' ' || r > '~' })
}

// OriginFailed answers a request whose origin did not answer, err saying
// why, and logs it with log (nil: not logged): a 504 problem when the
// origin timed out, else a 502; at INFO when the client had closed its
// connection (nobody reads the answer, and the origin did nothing wrong),
// else at ERROR. The local server's proxy and the Worker's both answer
// with it. Through the Handler's writer (w is, or wraps, that of a request
// the pre-filter admitted), the answer carries the CORS fields of the
// pre-filter's 429 (oursInstead): a page may read it.
func OriginFailed(log Logger, w http.ResponseWriter, r *http.Request, err error) {
	status, detail := http.StatusBadGateway, "the origin did not answer"
	// errors.As would do, but it links ~10 KB of reflection into the
	// Worker's bundle; the proxies' errors are chains, not trees.
	for e := err; e != nil; e = errors.Unwrap(e) {
		if ne, ok := e.(net.Error); ok {
			if ne.Timeout() {
				status, detail = http.StatusGatewayTimeout, "the origin did not answer in time"
			}
			break
		}
	}
	switch {
	case log == nil:
	case errors.Is(r.Context().Err(), context.Canceled):
		log.InfoContext(r.Context(), "client went away before the origin answered", "error", Logged(err.Error()), "method", Logged(r.Method), "path", Logged(r.URL.Path))
	default:
		log.ErrorContext(r.Context(), "origin error", "error", Logged(err.Error()), "status", status, "method", Logged(r.Method), "path", Logged(r.URL.Path))
	}
	oursInstead(w)
	writeProblem(w, status, detail, nil)
}

// ParseOrigin parses the URL of the origin admitted requests go to: http
// or https, a host, a port from 1 to 65535 if any, no user info (a
// reverse proxy never sends it). The error shows the URL without its user
// info and query (shownURL).
func ParseOrigin(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	shown := shownURL(s)
	if err == nil && u.Opaque == "" && u.Host != "" && !strings.Contains(s, "@") {
		// Parsed, and no "@" that a password may stand before: its
		// scheme, host and path ("https://svc:0/pw@origin" parses as host
		// svc:0 and a path holding the password).
		v := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}
		if u.User != nil {
			v.User = url.User("xxxxx")
		}
		shown = v.String()
		if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
			shown += "?…"
		}
	}
	switch {
	case strings.ContainsFunc(s, unicode.IsSpace):
		// Before the other cases: url.Parse keeps a space in the path
		// ("http://origin/ " from an env file sent every request to
		// "/%20/..."), and refuses one after a host or a port, or a
		// carriage return (an env file saved with CRLF), which was
		// reported as "must be an absolute http or https URL", the one
		// thing the URL was. Unicode's too: a no-break space pasted from a
		// page or a chat after the path went to "/api%C2%A0/...", after
		// the host into the host name.
		return nil, fmt.Errorf("%q: white space in the URL (one left at its end?); a space in a path is written %%20", shown)
	case strings.ContainsFunc(s, invisible):
		// Taken, it went where white space went (the path to
		// "/v1%E2%80%8B/...", the host into the host name), and shows as
		// nothing: named by its escape, which the shown URL may leave out
		// (a query, user info).
		r, _ := utf8.DecodeRuneInString(s[strings.IndexFunc(s, invisible):])
		return nil, fmt.Errorf("%q: invisible character %s in the URL (pasted with it?)", shown, strconv.QuoteRuneToASCII(r))
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "":
		return nil, fmt.Errorf("%q: must be an absolute http or https URL with a host", shown)
	case u.User != nil:
		return nil, fmt.Errorf("%q: user info is not sent to the origin; drop it", shown)
	case strings.Contains(s, "@"):
		// "https://deploy:4242/pw@origin" parses as host deploy, port
		// 4242 and a path: requests would go to the wrong host, and the
		// URL, printed at start, shows the password (found by review).
		// Shown: the scheme alone. What Go took for the host and port
		// may be the user info ("https://tokenPART/rest@origin").
		return nil, fmt.Errorf("%q: an @ in the path or query, or in user info; user info is not sent to the origin, and a literal @ must be written %%40", u.Scheme+"://…")
	}
	// An empty port too: "http://api:$PORT" with PORT unset, which Go
	// takes for the scheme's port (every request went to port 80).
	if p := u.Port(); p != "" || u.Host[len(u.Host)-1] == ':' {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("%q: port %q: must be 1 to 65535", shown, p)
		}
	}
	// A path holding "%2F" and a "|" would reach the origin with the
	// "%2F" a "/" (EscapePath).
	u.RawPath = EscapePath(u.RawPath, false)
	return u, nil
}

// invisible reports whether r is a format character (Unicode's Cf), which
// shows as nothing: a zero-width space (pages put them in long URLs so
// that they wrap), a byte order mark, a soft hyphen, a bidi control.
func invisible(r rune) bool { return unicode.Is(unicode.Cf, r) }

// shownURL returns s as an error may show it: the user info (whatever
// stands between the authority's start and the last "@", a password
// holding "/", "?" or "#" that url.Parse refused included) replaced by
// "xxxxx", and the query and fragment by "?…" (a token). When a "?" or "#"
// comes before the last "@", it cannot tell a password holding one from a
// query holding an "@" (an e-mail address), and shows the scheme alone.
// Redacted can hide a password only in a URL it parsed, and keeps the
// query.
func shownURL(s string) string {
	start := 0 // where the user info would begin
	if i := strings.IndexAny(s, ":/?#@"); i > 0 && s[i] == ':' {
		if strings.HasPrefix(s[i+1:], "//") {
			start = i + 3
		}
	}
	at := strings.LastIndexByte(s, '@')
	q := strings.IndexAny(s, "?#")
	switch {
	case at >= 0 && q >= 0 && q < at:
		return s[:start] + "…"
	case at >= start:
		s = s[:start] + "xxxxx" + s[at:]
		q = strings.IndexAny(s, "?#")
	}
	if q >= 0 {
		s = s[:q] + "?…"
	}
	return s
}

// clientHeaders are the request headers, besides those ReverseProxy drops
// itself, by which a proxy tells the origin who the client is, how it
// connected, or what it asked for before a rewrite (X-Original-URL, which
// some origins serve instead of the request line: from a client, a path
// the pre-filter did not price); with every X-Forwarded-* header, they are
// dropped when the peer is not a trusted proxy (ClientHeader).
var clientHeaders = map[string]bool{
	"X-Forwarded":              true,
	"X-Real-Ip":                true,
	"X-Client-Ip":              true,
	"True-Client-Ip":           true,
	"X-Cluster-Client-Ip":      true,
	"X-Original-Forwarded-For": true,
	"Cf-Connecting-Ip":         true,
	"Fastly-Client-Ip":         true,
	"Front-End-Https":          true,
	"X-Url-Scheme":             true,
	"X-Original-Url":           true,
	"X-Rewrite-Url":            true,
	"X-Original-Host":          true,
	"X-Host":                   true,
	"X-Original-Uri":           true,
	"X-Envoy-Original-Path":    true,
	"Client-Ip":                true,
	"Cf-Connecting-Ipv6":       true,
}

// ClientHeader reports whether the canonical header name k is a
// forwarding header: one by which a proxy tells the origin who the client
// is, how it connected or what it asked for before a rewrite (X-Real-IP,
// X-Forwarded-*, X-Original-URL, ...; not Forwarded, which
// httputil.ReverseProxy handles itself). From a client, such a header is
// forged. The Worker's proxy drops them too.
func ClientHeader(k string) bool {
	return strings.HasPrefix(k, "X-Forwarded-") || clientHeaders[k]
}

// LastHop reports whether the last address of the X-Forwarded-For field
// lines xff is ip, read as the client's address is read: empty elements
// skipped, and a port, brackets, a zone or IPv4-mapping allowed.
func LastHop(xff []string, ip netip.Addr) bool {
	for entry := range hops(xff) {
		a, ok := parseAddr(entry)
		return ok && a == ip.Unmap().WithZone("")
	}
	return false
}

// forwardedFor returns the Forwarded element (RFC 7239) of a hop from
// addr: an IPv6 address is bracketed and quoted.
func forwardedFor(addr netip.Addr) string {
	if addr.Is6() {
		return `for="[` + addr.String() + `]"`
	}
	return "for=" + addr.String()
}

// warnWriter turns the lines of a standard logger into WARN records.
type warnWriter struct{ log Logger }

func (w warnWriter) Write(p []byte) (int, error) {
	w.log.WarnContext(context.Background(), strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// bufferPool recycles the proxy's copy buffers: without it every proxied
// response allocates 32 KiB.
type bufferPool struct{}

var buffers = sync.Pool{New: func() any { return new([32 << 10]byte) }}

func (bufferPool) Get() []byte { return buffers.Get().(*[32 << 10]byte)[:] }
func (bufferPool) Put(b []byte) {
	if cap(b) == 32<<10 {
		buffers.Put((*[32 << 10]byte)(b[:32<<10]))
	}
}
