package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
)

// maxPayload bounds the JSON the adapter returns to Lambda, headers and
// encoded body included; Lambda refuses a response payload over 6 MB. It
// bounds the body the adapter buffers too: no encoding makes a body
// smaller. Whether the body fits is decided on its encoded size, once it
// is complete.
const maxPayload = 6_000_000

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
// http.ErrAbortHandler) a 502.
func Adapt(h http.Handler) Handler {
	return func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.LambdaFunctionURLResponse, error) {
		r, err := request(ctx, &ev)
		if err != nil {
			return problem(http.StatusBadRequest, err.Error()), nil
		}
		w := &writer{header: http.Header{}}
		switch p := serve(h, w, r); {
		case p == nil:
		case p != http.ErrAbortHandler:
			slog.Error("handler panic", slog.String("panic", fmt.Sprint(p)), slog.String("path", r.URL.Path))
			return problem(http.StatusInternalServerError, "internal error"), nil
		case !w.overflow:
			// The handler gave up on a response it had begun: ReverseProxy
			// does when the origin's body breaks off. What it wrote is
			// not the answer.
			return problem(http.StatusBadGateway, "the response was cut short"), nil
		}
		return w.response(), nil
	}
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

// sourceIP is httpapi's ClientIP: the address API Gateway or the Function
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
	path := ev.RawPath
	if path == "" {
		path = ev.RequestContext.HTTP.Path
	}
	if path == "" {
		path = "/"
	}
	host := ev.RequestContext.DomainName
	if host == "" {
		host = ev.Headers["host"]
	}
	target := "https://" + host + escapePath(path)
	if ev.RawQueryString != "" {
		target += "?" + ev.RawQueryString
	}
	method := ev.RequestContext.HTTP.Method
	if method == "" {
		return nil, fmt.Errorf("lambda: event: requestContext.http.method is empty")
	}
	ctx = context.WithValue(ctx, http.ServerContextKey, server)
	if ip, err := netip.ParseAddr(ev.RequestContext.HTTP.SourceIP); err == nil {
		ctx = context.WithValue(ctx, sourceIPKey{}, ip)
	}
	r, err := http.NewRequestWithContext(ctx, method, target, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("lambda: event: %v", err)
	}
	for k, v := range ev.Headers {
		r.Header.Add(k, v)
	}
	if len(ev.Cookies) > 0 {
		r.Header.Set("Cookie", strings.Join(ev.Cookies, "; "))
	}
	r.Host = host
	// Function URLs and HTTP APIs take HTTPS only; without this the proxy
	// would tell the origin X-Forwarded-Proto: http.
	r.TLS = &tls.ConnectionState{}
	r.ContentLength = int64(len(body))
	r.RemoteAddr = net.JoinHostPort(ev.RequestContext.HTTP.SourceIP, "0")
	r.RequestURI = r.URL.RequestURI()
	if p := ev.RequestContext.HTTP.Protocol; p != "" {
		if major, minor, ok := http.ParseHTTPVersion(p); ok {
			r.Proto, r.ProtoMajor, r.ProtoMinor = p, major, minor
		}
	}
	return r, nil
}

// escapePath makes rawPath a well-formed escaped path. Function URLs send
// rawPath as the client sent it, escaped; an HTTP API sends it decoded (a
// client's /a%3Fb arrives as /a?b, and its %2F as a slash nobody can tell
// apart). So a byte that never stands literally in an escaped path is
// escaped again: '?' and '#', which would otherwise start the query or a
// fragment, a '%' that begins no escape, and spaces, controls and non-ASCII
// bytes. An escaped path comes back unchanged.
func escapePath(rawPath string) string {
	const hex = "0123456789ABCDEF"
	var b []byte // nil until the first byte that needs escaping
	for i := 0; i < len(rawPath); i++ {
		c := rawPath[i]
		if c != '?' && c != '#' && c > ' ' && c < 0x7f && (c != '%' || isEscape(rawPath[i:])) {
			if b != nil {
				b = append(b, c)
			}
			continue
		}
		if b == nil {
			b = append(make([]byte, 0, len(rawPath)+16), rawPath[:i]...)
		}
		b = append(b, '%', hex[c>>4], hex[c&15])
	}
	if b == nil {
		return rawPath
	}
	return string(b)
}

// isEscape reports whether s starts with a percent escape, %XX.
func isEscape(s string) bool {
	return len(s) >= 3 && s[0] == '%' && isHex(s[1]) && isHex(s[2])
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// writer buffers a response for the Lambda result.
type writer struct {
	header   http.Header
	status   int
	body     bytes.Buffer
	overflow bool
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
	}
}

func (w *writer) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	if w.body.Len()+len(p) > maxPayload {
		w.overflow = true
		return 0, fmt.Errorf("lambda: response body over %d bytes", maxPayload)
	}
	return w.body.Write(p)
}

func (w *writer) response() events.LambdaFunctionURLResponse {
	if w.overflow {
		return problem(http.StatusBadGateway, "the response is too large for AWS Lambda")
	}
	res := events.LambdaFunctionURLResponse{StatusCode: w.status, Headers: make(map[string]string, len(w.header))}
	if res.StatusCode == 0 {
		res.StatusCode = http.StatusOK
	}
	for k, vs := range w.header {
		if k == "Set-Cookie" {
			res.Cookies = vs
			continue
		}
		res.Headers[k] = strings.Join(vs, ",")
	}
	// JSON escapes control bytes as \u00XX (6 bytes for 1): a text body
	// whose escaped form would not fit goes as base64, which makes any body
	// 4/3 larger at most; what does not fit either way is a 502.
	b := w.body.Bytes()
	if n, ok := jsonTextLen(b); ok && payloadLen(res, n) <= maxPayload {
		res.Body = string(b)
		return res
	}
	if payloadLen(res, base64.StdEncoding.EncodedLen(len(b))) > maxPayload {
		return problem(http.StatusBadGateway, "the response is too large for AWS Lambda")
	}
	res.Body, res.IsBase64Encoded = base64.StdEncoding.EncodeToString(b), true
	return res
}

// jsonTextLen is an upper bound of the length of b as a JSON string's
// contents (without the quotes), and whether b can be sent as text at all
// (it is valid UTF-8).
func jsonTextLen(b []byte) (int, bool) {
	if !utf8.Valid(b) {
		return 0, false
	}
	n := len(b)
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t':
			n++ // \" \\ \n \r \t
		case c < 0x20 || c == '<' || c == '>' || c == '&':
			n += 5 // \u00XX (HTML characters too, in case the encoder escapes them)
		case c == 0xE2 && i+2 < len(b) && b[i+1] == 0x80 && (b[i+2] == 0xA8 || b[i+2] == 0xA9):
			n += 3 // U+2028, U+2029: 3 bytes become \u2028
		}
	}
	return n, true
}

// payloadLen is an upper bound of the size of res as the JSON Lambda
// returns, its body taking bodyLen bytes once encoded.
func payloadLen(res events.LambdaFunctionURLResponse, bodyLen int) int {
	res.Body, res.IsBase64Encoded = "", true
	rest, err := json.Marshal(res)
	if err != nil {
		return maxPayload + 1
	}
	return len(rest) + bodyLen
}

// problem is an application/problem+json response written by the adapter
// itself, for what never reached the handler or could not leave it.
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
