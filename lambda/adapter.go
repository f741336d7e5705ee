package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/textproto"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"

	"github.com/slidegate/slidegate/httpapi"
)

// maxPayload bounds the payload the runtime sends Lambda for a response
// (its JSON, headers and encoded body included, and the encoder's
// newline); Lambda refuses a response payload over 6 MB. It bounds the
// body the adapter buffers too: no encoding makes a body smaller. Whether
// the body fits is decided on its encoded size, once it is complete.
const maxPayload = 6_000_000

// reserve is the time kept back from the invocation's deadline to return
// the answer (encode it, send it through the Runtime API): the handler's
// request ends reserve earlier (handlerDeadline). An origin that has not
// answered by then gets the pre-filter's 504, one cut off mid-body the
// adapter's 502, both with the rate-limit headers. Left to the deadline
// itself, Lambda ended the invocation: the client got an error from AWS
// without them, and Lambda restarted the instance, losing its local-scope
// counts and caches.
const reserve = 500 * time.Millisecond

// handlerDeadline returns when the handler's request ends, for an
// invocation that ends at end: reserve before it, or halfway there when
// less than twice reserve is left.
func handlerDeadline(now, end time.Time) time.Time {
	left := end.Sub(now)
	return now.Add(max(left-reserve, left/2))
}

// Handler is the Lambda handler Adapt returns.
//
// API Gateway HTTP API (payload format 2.0) and Function URLs send the same
// event JSON, so one handler serves both: it decodes the API Gateway type,
// a superset of the Function URL request, and answers with the Function URL
// response type, whose fields (statusCode, headers, cookies, body,
// isBase64Encoded) are exactly those of payload format 2.0
// (APIGatewayV2HTTPResponse adds multiValueHeaders, which 2.0 does not
// define).
type Handler func(context.Context, events.APIGatewayV2HTTPRequest) (events.LambdaFunctionURLResponse, error)

// Adapt turns h into a Lambda handler. Every outcome is an HTTP response:
// the returned error is always nil, a malformed event is a 400, a panic in
// h a 500, a body too large for Lambda or cut short (h panicked with
// http.ErrAbortHandler) a 502. The request h gets ends reserve before the
// invocation does, so that h's answer to a slow origin (a 504) is returned.
// When h gives its own answers CORS fields (an *httpapi.Handler with
// cors_origins), the adapter's 502s and 500 get them too. (The 400 of a
// malformed event has no request to read an Origin from.)
func Adapt(h http.Handler) Handler {
	cors, _ := h.(corsSetter)
	return func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.LambdaFunctionURLResponse, error) {
		if end, ok := ctx.Deadline(); ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, handlerDeadline(time.Now(), end))
			defer cancel()
		}
		r, err := request(ctx, &ev)
		if err != nil {
			return problem(http.StatusBadRequest, err.Error()), nil
		}
		w := &writer{header: http.Header{}, head: r.Method == http.MethodHead}
		switch p := serve(h, w, r); {
		case p == nil:
		case p != http.ErrAbortHandler:
			slog.Error("handler panic", slog.String("panic", fmt.Sprint(p)), slog.String("path", httpapi.Logged(r.URL.Path)))
			return share(keep(problem(http.StatusInternalServerError, "internal error"), w.header), cors, r), nil
		case !w.overflow:
			// The handler gave up on a response it had begun: ReverseProxy
			// does when the origin's body breaks off. What it wrote is
			// not the answer.
			originLost(r, "the response was cut short")
			return share(keep(problem(http.StatusBadGateway, "the response was cut short"), w.header), cors, r), nil
		}
		res := w.response()
		if w.tooLarge {
			originLost(r, "the response is too large for AWS Lambda")
			res = share(res, cors, r)
		}
		return res, nil
	}
}

// corsSetter is what the adapter asks of its handler: the CORS fields of
// an answer slidegate writes itself (httpapi.Handler's AllowCORS).
type corsSetter interface {
	AllowCORS(hd http.Header, r *http.Request)
}

// share gives res, a 502 or 500 the adapter answers to r in place of the
// origin's or the handler's, the CORS fields the handler gives its own answers (cors nil:
// none), as the pre-filter does for its 502 and 504 of an origin that
// failed before it answered: without them a page of an origin in
// cors_origins sees a network error, not the 502 and its rate-limit
// fields. The origin's own CORS fields were those of the answer that was
// not returned: keep took none of them.
func share(res events.LambdaFunctionURLResponse, cors corsSetter, r *http.Request) events.LambdaFunctionURLResponse {
	if cors == nil {
		return res
	}
	hd := http.Header{}
	cors.AllowCORS(hd, r)
	for k, vs := range hd {
		res.Headers[k] = strings.Join(vs, ",")
	}
	return res
}

// originLost logs the ERROR line of a 502 the adapter answers in place of
// the origin's response, as httpapi.OriginFailed does for an origin that
// failed before it answered: the client sees only the 502.
func originLost(r *http.Request, detail string) {
	slog.Error("origin response not returned", slog.String("error", detail), slog.Int("status", http.StatusBadGateway),
		slog.String("method", httpapi.Logged(r.Method)), slog.String("path", httpapi.Logged(r.URL.Path)))
}

// server is the value of http.ServerContextKey in the requests the
// adapter makes. The adapter plays net/http's server: it recovers
// http.ErrAbortHandler, with which a handler aborts a response it has
// begun. httputil.ReverseProxy aborts so only under a server; elsewhere it
// returns normally from a body it could not copy whole, and a cut-off
// answer would reach the client as a complete one.
var server = &http.Server{}

// serve runs h and returns what it panicked with, if it did.
func serve(h http.Handler, w http.ResponseWriter, r *http.Request) (p any) {
	defer func() { p = recover() }()
	h.ServeHTTP(w, r)
	return nil
}

type sourceIPKey struct{}

// sourceIP is httpapi's PeerIP: the address API Gateway or the Function
// URL saw the connection from (requestContext.http.sourceIp).
func sourceIP(r *http.Request) (netip.Addr, bool) {
	a, ok := r.Context().Value(sourceIPKey{}).(netip.Addr)
	return a, ok
}

// request builds the http.Request of an event.
func request(ctx context.Context, ev *events.APIGatewayV2HTTPRequest) (*http.Request, error) {
	body := []byte(ev.Body)
	if ev.IsBase64Encoded {
		var err error
		if body, err = base64.StdEncoding.DecodeString(ev.Body); err != nil {
			return nil, fmt.Errorf("lambda: event body: invalid base64: %v", err)
		}
	}
	// Only a Function URL's rawPath is escaped. Taking an escaped path for
	// a decoded one makes the origin see %2F as three characters; the
	// other way round, a client's %252F as a separator: decoded is the
	// default. requestContext.http.path is decoded whoever sends it.
	fu := functionURL(ev.RequestContext.DomainName)
	field, path, decoded := "rawPath", ev.RawPath, !fu
	if path == "" {
		field, path, decoded = "requestContext.http.path", ev.RequestContext.HTTP.Path, true
	}
	if path == "" {
		path = "/"
	}
	if path[0] != '/' {
		return nil, fmt.Errorf("lambda: event: %s %q does not begin with /", field, path)
	}
	if !fu {
		path = withoutStage(path, ev.RequestContext.Stage)
	}
	hostField, host := "requestContext.domainName", ev.RequestContext.DomainName
	if host == "" {
		hostField, host = "headers.host", ev.Headers["host"]
	}
	if strings.ContainsAny(host, "/?#@\\") {
		// Else the rest would be taken for the path, query or user.
		return nil, fmt.Errorf("lambda: event: %s %q is not a host name", hostField, host)
	}
	target := "https://" + host + httpapi.EscapePath(path, decoded)
	if ev.RawQueryString != "" {
		target += "?" + queryFix.Replace(ev.RawQueryString)
	}
	method := ev.RequestContext.HTTP.Method
	switch {
	case method != "":
	case ev.Version == "1.0":
		return nil, errors.New("lambda: event: payload format 1.0 (an HTTP API set to 1.0) is not supported: use payload format 2.0 or a Function URL")
	default:
		return nil, errors.New("lambda: event: requestContext.http.method is empty: not an HTTP API (payload format 2.0) or Function URL event")
	}
	ctx = context.WithValue(ctx, http.ServerContextKey, server)
	// requestContext.http.sourceIp is an address, or an address and a port
	// ("10.1.15.242:39870", "[2001:db8::1]:443"), which API Gateway sends
	// on some paths (a custom domain with mutual TLS, where the address was
	// a private one inside AWS and the peer was in X-Forwarded-For:
	// docs/lambda.md says to list such a range in
	// identity.trusted_proxies). Taken for no address, the port made every
	// client one: the pre-filter counted them all under the identity of an
	// unknown address.
	var remote string
	if ip, ok := httpapi.ParseAddr(ev.RequestContext.HTTP.SourceIP); ok {
		ctx = context.WithValue(ctx, sourceIPKey{}, ip)
		remote = netip.AddrPortFrom(ip, 0).String()
	} else {
		remote = net.JoinHostPort(ev.RequestContext.HTTP.SourceIP, "0")
	}
	r, err := http.NewRequestWithContext(ctx, method, target, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("lambda: event: %v", err)
	}
	for k, v := range ev.Headers {
		// Without the white space around it, as net/http's server reads
		// a field: the event keeps it, and Go's HTTP/2 transport sent it
		// on to an origin that speaks h2, which RFC 9113 (8.2.1) calls a
		// malformed request.
		r.Header.Add(k, textproto.TrimString(v))
	}
	if len(ev.Cookies) > 0 {
		r.Header.Set("Cookie", strings.Join(ev.Cookies, "; "))
	}
	r.Host = host
	// Function URLs and HTTP APIs take HTTPS only; without this the proxy
	// would tell the origin X-Forwarded-Proto: http.
	r.TLS = &tls.ConnectionState{}
	r.ContentLength = int64(len(body))
	r.RemoteAddr = remote
	r.RequestURI = r.URL.RequestURI()
	if p := ev.RequestContext.HTTP.Protocol; p != "" {
		if major, minor, ok := http.ParseHTTPVersion(p); ok {
			r.Proto, r.ProtoMajor, r.ProtoMinor = p, major, minor
		}
	}
	return r, nil
}

// queryFix restores rawQueryString's characters that the origin's request
// line cannot hold as they are. A "#" the client sent in the query is
// data: unescaped, it would end the query there and hide the rest from
// the origin. A space is a "+" the client sent: a Function URL gives each
// "+" of the query as a space, where it leaves %20 as it came
// (aws/aws-lambda-web-adapter#491: ?q=a+b arrived as q=a b, ?q=a%20b
// whole). No client can send a space itself (it would end the request
// target), so "+" is what the client wrote, a literal plus for an origin
// that reads it so, a space for one that decodes forms. Passed on, the
// space split the request line ("GET /search?q=a b HTTP/1.1"): the origin
// answered 400 to every such request, counted, without running.
var queryFix = strings.NewReplacer("#", "%23", " ", "+")

// functionURL reports whether domain (requestContext.domainName) is a
// Lambda Function URL's own, <url-id>.lambda-url.<region>.on.aws, which no
// HTTP API can have: a custom domain needs a certificate for a name its
// owner holds, and on.aws is AWS's. CloudFront in front of a Function URL
// reaches it under that name too.
func functionURL(domain string) bool {
	d := strings.TrimSuffix(strings.ToLower(domain), ".")
	id, rest, ok := strings.Cut(d, ".lambda-url.")
	region, ok2 := strings.CutSuffix(rest, ".on.aws")
	return ok && ok2 && id != "" && region != "" && !strings.Contains(id, ".") && !strings.Contains(region, ".")
}

// withoutStage returns path, an HTTP API event's, without the name of a
// stage other than $default in front. API Gateway sends a named stage as
// the first segment of rawPath and requestContext.http.path (/prod/hello)
// through the API's own endpoint
// (https://<api-id>.execute-api.<region>.amazonaws.com/prod/hello, where
// the client sent it) and, as third-party reports of live APIs show,
// through a custom domain mapped to that stage too, where the client sent
// /hello (or /orders/hello under the API mapping key orders, which rawPath
// never holds: AWS's payload format 2.0 documentation says so). The stage
// picks the deployment and is no part of the resource: kept, the origin
// got /prod/hello, and costs and the check API (/prod/v1/check) matched
// nothing. Only a whole first segment is the stage (/production is not
// /prod's). A Function URL's stage is $default: request leaves its path
// alone whatever the event says, without calling withoutStage.
func withoutStage(path, stage string) string {
	if stage == "" || stage == "$default" {
		return path
	}
	rest, ok := strings.CutPrefix(path[1:], stage) // path begins with "/"
	switch {
	case !ok:
		return path
	case rest == "":
		return "/"
	case rest[0] != '/':
		return path // /production under the stage prod: no stage segment
	}
	return rest
}

// writer buffers a response for the Lambda result. Like net/http's, it
// keeps no body of an answer to HEAD (it takes the writes and drops them),
// nor of a 204 or 304 (http.ErrBodyNotAllowed): the event source would
// pass it on.
//
// A Lambda answer has no trailer section, so it sends no trailer fields
// and no Trailer header announcing them. ReverseProxy passes an origin's
// trailers on as net/http's server takes them: announced in Trailer
// before the status, their values set after the body under their names,
// or, once the origin sent one it had not announced, every one under
// http.TrailerPrefix ("Trailer:X-Checksum", which holds a colon and is no
// field name at all). RFC 9110 (6.5.1) lets a recipient that cannot pass
// trailers on discard them; merging them into the header section is
// allowed only where a field's definition says how.
type writer struct {
	header   http.Header
	status   int
	body     bytes.Buffer
	overflow bool
	tooLarge bool // response answered the 502 of a body Lambda cannot carry
	head     bool // the request's method is HEAD
	// sent is the header section as it stood at the status, when it
	// announced trailers (nil otherwise: the header is read at the end),
	// so that the values set after the body stay out of it.
	sent http.Header
}

func (w *writer) Header() http.Header { return w.header }

// WriteHeader keeps the first final status. Informational ones (1xx, such
// as the 103 Early Hints ReverseProxy passes on) cannot be sent through
// Lambda and are dropped.
func (w *writer) WriteHeader(code int) {
	if code >= 100 && code <= 199 {
		return
	}
	if w.status == 0 {
		w.status = code
		if _, ok := w.header["Trailer"]; ok {
			w.sent = w.header.Clone()
		}
	}
}

func (w *writer) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	switch {
	case w.head:
		return len(p), nil
	case w.status == http.StatusNoContent || w.status == http.StatusNotModified:
		return 0, http.ErrBodyNotAllowed
	}
	if w.body.Len()+len(p) > maxPayload {
		w.overflow = true
		return 0, fmt.Errorf("lambda: response body over %d bytes", maxPayload)
	}
	return w.body.Write(p)
}

func (w *writer) response() events.LambdaFunctionURLResponse {
	if w.overflow {
		w.tooLarge = true
		return keep(problem(http.StatusBadGateway, "the response is too large for AWS Lambda"), w.header)
	}
	header := w.header
	if w.sent != nil {
		header = w.sent
	}
	res := events.LambdaFunctionURLResponse{StatusCode: w.status, Headers: make(map[string]string, len(header))}
	if res.StatusCode == 0 {
		res.StatusCode = http.StatusOK
	}
	for k, vs := range header {
		switch {
		case k == "Set-Cookie":
			res.Cookies = vs
			continue
		case k == "Trailer" || strings.HasPrefix(k, http.TrailerPrefix), len(vs) == 0:
			// A field without values is none (net/http sends no line).
			continue
		}
		res.Headers[k] = strings.Join(vs, ",")
	}
	b := w.body.Bytes()
	if _, typed := header["Content-Type"]; !typed && len(b) > 0 && header.Get("Content-Encoding") == "" {
		// net/http's server gives an answer without Content-Type the one
		// its first bytes show (http.DetectContentType), as the local
		// server does for an origin that sent none; left out, the front
		// end put its own (a Function URL's application/json) on an
		// HTML page or an image. A Content-Type key without values
		// asks for none, as it does of net/http.
		res.Headers["Content-Type"] = http.DetectContentType(b)
	}
	// JSON escapes control bytes as \u00XX (6 bytes for 1): a text body
	// whose escaped form would not fit goes as base64, which makes any body
	// 4/3 larger at most; what does not fit either way is a 502.
	if n, ok := jsonTextLen(b); ok && payloadLen(res, n) <= maxPayload {
		res.Body = string(b)
		return res
	}
	res.IsBase64Encoded = true
	if payloadLen(res, base64.StdEncoding.EncodedLen(len(b))) > maxPayload {
		w.tooLarge = true
		return keep(problem(http.StatusBadGateway, "the response is too large for AWS Lambda"), w.header)
	}
	res.Body = base64.StdEncoding.EncodeToString(b)
	return res
}

// jsonTextLen is an upper bound of the length of b as a JSON string's
// contents (without the quotes), exact unless b holds '<', '>' or '&', and
// whether b can be sent as text at all (it is valid UTF-8).
func jsonTextLen(b []byte) (int, bool) {
	if !utf8.Valid(b) {
		return 0, false
	}
	n := len(b)
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t' || c == '\b' || c == '\f':
			n++ // \" \\ \n \r \t \b \f
		case c < 0x20 || c == '<' || c == '>' || c == '&':
			n += 5 // \u00XX (HTML characters too, in case the encoder escapes them)
		case c == 0xE2 && i+2 < len(b) && b[i+1] == 0x80 && (b[i+2] == 0xA8 || b[i+2] == 0xA9):
			n += 3 // U+2028, U+2029: 3 bytes become \u2028
		}
	}
	return n, true
}

// payloadLen is an upper bound of the size of res as the runtime sends it
// to Lambda, its body (res.Body is ignored) taking bodyLen bytes as the
// contents of a JSON string: the runtime's json.Encoder writes res and a
// newline. Headers and cookies are measured as json.Marshal escapes them,
// HTML characters too, which the runtime's encoder does only when told to
// (lambda.WithSetEscapeHTML); so the bound is exact unless they hold '<',
// '>' or '&'.
func payloadLen(res events.LambdaFunctionURLResponse, bodyLen int) int {
	res.Body = ""
	rest, err := json.Marshal(res)
	if err != nil {
		return maxPayload + 1
	}
	return len(rest) + bodyLen + len("\n")
}

// problem is an application/problem+json response written by the adapter
// itself, for what never reached the handler or could not leave it.
// decided are the fields the pre-filter sets on an answer it let through.
var decided = httpapi.Fields()

// keep adds to res, an answer that replaces the handler's, the pre-filter's
// fields from the handler's header h: the request was decided and counted,
// and its client still learns where it stands.
func keep(res events.LambdaFunctionURLResponse, h http.Header) events.LambdaFunctionURLResponse {
	for _, k := range decided {
		if vs := h[k]; len(vs) > 0 {
			res.Headers[k] = strings.Join(vs, ",")
		}
	}
	return res
}

func problem(status int, detail string) events.LambdaFunctionURLResponse {
	body, _ := json.Marshal(struct {
		Type   string `json:"type"`
		Title  string `json:"title"`
		Status int    `json:"status"`
		Detail string `json:"detail"`
	}{"about:blank", http.StatusText(status), status, detail})
	return events.LambdaFunctionURLResponse{
		StatusCode: status,
		Headers:    map[string]string{"Content-Type": "application/problem+json", "Cache-Control": "no-store"},
		Body:       string(body) + "\n",
	}
}
