package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
)

// fuzzEvent is the event a Function URL (or, httpAPI, an HTTP API) sends
// for r, a request net/http's server read: rawPath as sent (an HTTP API's
// decoded), rawQueryString as sent, header names in lower case with the
// values of a name's lines joined with ",", Cookie lines split into
// cookies, the body whole (base64 unless UTF-8).
func fuzzEvent(r *http.Request, httpAPI bool) events.APIGatewayV2HTTPRequest {
	rawPath, rawQuery, _ := strings.Cut(r.RequestURI, "?")
	domain := fnURLDomain
	if httpAPI {
		domain, rawPath = httpAPIDomain, r.URL.Path
	}
	headers := map[string]string{"host": domain}
	var cookies []string
	for k, vs := range r.Header {
		if k == "Cookie" {
			for _, v := range vs {
				cookies = append(cookies, strings.Split(v, "; ")...)
			}
			continue
		}
		headers[strings.ToLower(k)] = strings.Join(vs, ",")
	}
	body, _ := io.ReadAll(r.Body)
	text, b64 := string(body), false
	if !utf8.Valid(body) {
		text, b64 = base64.StdEncoding.EncodeToString(body), true
	}
	return events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: "$default", RawPath: rawPath, RawQueryString: rawQuery,
		Cookies: cookies, Headers: headers, Body: text, IsBase64Encoded: b64,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			DomainName: domain, Stage: "$default",
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{
				Method: r.Method, Path: r.URL.Path, Protocol: "HTTP/1.1", SourceIP: "203.0.113.7",
			},
		},
	}
}

// FuzzEventLikeNetHTTP: what the handler gets of an event (request) is
// what net/http's server gives it for the same request on the wire: the
// method, the path (decoded, and for a Function URL, escaped, as the proxy
// sends it on), the query's parameters, every field's values, the
// cookies, the body and its length.
func FuzzEventLikeNetHTTP(f *testing.F) {
	f.Add("GET", "/v1/items?x=1&y=%2F", "X-API-Key: k\nAccept: text/plain", []byte(nil), false)
	f.Add("POST", "/v1/a%2Fb/%41?q=a+b#x", "Cookie: a=1; b=2\nCookie: c=3\nX-API-Key: a\nX-API-Key:  b ", []byte("\x00\xff"), false)
	f.Add("PUT", "/files/%25/é?%", "Authorization: Bearer  abc\nConnection: X-API-Key", []byte(`{"key": "a"}`), true)
	f.Add("GET", "/[a]/'b'/~c;d=e?a=1;b=2&&c", "X-Forwarded-For: 10.0.0.1, ,10.0.0.2\nX_API_KEY: z", []byte(nil), false)
	f.Fuzz(func(t *testing.T, method, target, fields string, body []byte, httpAPI bool) {
		if !strings.HasPrefix(target, "/") {
			return // origin form only: what a Function URL's client sends
		}
		var wire strings.Builder
		wire.WriteString(method + " " + target + " HTTP/1.1\r\nHost: " + fnURLDomain + "\r\n")
		for _, line := range strings.Split(fields, "\n") {
			name, _, ok := strings.Cut(line, ":")
			switch n := strings.ToLower(name); {
			case !ok, !fuzzToken(n), n == "host", n == "content-length", n == "transfer-encoding", n == "expect":
				continue
			}
			wire.WriteString(line + "\r\n")
		}
		if len(body) > 0 {
			wire.WriteString("Content-Length: " + strconv.Itoa(len(body)) + "\r\n")
		}
		wire.WriteString("\r\n")
		wire.Write(body)
		want, err := http.ReadRequest(bufio.NewReader(strings.NewReader(wire.String())))
		if err != nil {
			return // refused by net/http's server (a 400): no event to compare
		}
		ev := fuzzEvent(want, httpAPI)
		got, err := request(context.Background(), &ev)
		if err != nil {
			t.Fatalf("%q: event refused: %v\n%+v", wire.String(), err, ev)
		}
		if got.Method != want.Method {
			t.Errorf("method %q, net/http %q", got.Method, want.Method)
		}
		if got.URL.Path != want.URL.Path {
			t.Errorf("path %q, net/http %q", got.URL.Path, want.URL.Path)
		}
		// Where net/http keeps the client's escapes (it re-escapes a
		// path with a byte such as '"' wholly, "!" too), the origin gets
		// them from either.
		if raw, _, _ := strings.Cut(want.RequestURI, "?"); !httpAPI && want.URL.EscapedPath() == raw && got.URL.EscapedPath() != raw {
			t.Errorf("escaped path %q, net/http %q", got.URL.EscapedPath(), want.URL.EscapedPath())
		}
		if g, w := got.URL.Query(), want.URL.Query(); !reflect.DeepEqual(g, w) && (len(g) > 0 || len(w) > 0) {
			t.Errorf("query %q (%v), net/http %q (%v)", got.URL.RawQuery, g, want.URL.RawQuery, w)
		}
		if g, w := got.URL.RawQuery, strings.ReplaceAll(want.URL.RawQuery, "#", "%23"); g != w {
			t.Errorf("raw query %q, net/http %q", g, w)
		}
		for k, vs := range want.Header {
			if k == "Cookie" {
				continue
			}
			g, w := strings.Join(got.Header[k], ","), strings.Join(vs, ",")
			if len(vs) > 1 {
				// Lines of one field are one list, whose elements a
				// client reads trimmed: net/http's lines "0", " ", "0"
				// reach the client as "0", "", "0", and the adapter's
				// "0, ,0" (the lines joined as they are) as the same list.
				g, w = trimElements(g), trimElements(w)
			}
			if g != w {
				t.Errorf("%s: %q, net/http %q", k, got.Header[k], vs)
			}
		}
		for k := range got.Header {
			// Host stays in the event's fields, where the proxy's
			// transport ignores it (net/http moves it to r.Host).
			if _, ok := want.Header[k]; !ok && k != "Cookie" && k != "Host" {
				t.Errorf("%s: %q, which net/http does not have", k, got.Header[k])
			}
		}
		if g, w := cookiePairs(got.Cookies()), cookiePairs(want.Cookies()); !reflect.DeepEqual(g, w) {
			t.Errorf("cookies %q, net/http %q", g, w)
		}
		gotBody, _ := io.ReadAll(got.Body)
		if string(gotBody) != string(body) || got.ContentLength != int64(len(body)) {
			t.Errorf("body %q (length %d), want %q", gotBody, got.ContentLength, body)
		}
		if u, err := url.ParseRequestURI(got.RequestURI); err != nil || u.Path != want.URL.Path {
			t.Errorf("RequestURI %q: %v, %v", got.RequestURI, u, err)
		}
	})
}

// cookiePairs lists cookies as name=value.
func cookiePairs(cs []*http.Cookie) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name+"="+c.Value)
	}
	return out
}

// FuzzPayloadBound: the size the adapter reckons for an answer
// (payloadLen of jsonTextLen) is never less than what the runtime sends
// Lambda for it (its json.Encoder, HTML left unescaped, and a newline),
// and exactly that when nothing holds '<', '>' or '&': a body the bound
// lets through fits Lambda's 6 MB.
func FuzzPayloadBound(f *testing.F) {
	f.Add([]byte("hello\n\t\"<&>\u2028\x00\x7f"), "X-A", "v\x01<", "a=1; b")
	f.Fuzz(func(t *testing.T, body []byte, k, v, cookie string) {
		n, ok := jsonTextLen(body)
		if !ok {
			if utf8.Valid(body) {
				t.Fatalf("%q: valid UTF-8 refused", body)
			}
			return
		}
		res := events.LambdaFunctionURLResponse{StatusCode: 200, Headers: map[string]string{k: v}, Cookies: []string{cookie}, Body: string(body)}
		var out strings.Builder
		enc := json.NewEncoder(&out)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(res); err != nil {
			t.Fatal(err)
		}
		bound := payloadLen(res, n)
		exact := !strings.ContainsAny(string(body)+k+v+cookie, "<>&")
		if out.Len() > bound || exact && out.Len() != bound {
			t.Fatalf("encoded %d bytes, reckoned %d: %s", out.Len(), bound, out.String())
		}
	})
}

// fuzzToken reports whether s is a field name (RFC 9110 token): a front
// end refuses a request with any other.
func fuzzToken(s string) bool {
	return s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyz0123456789!#$%&'*+-.^_`|~") == ""
}

// fuzzNames are the fields FuzzAnswerLikeNetHTTP's handlers set.
var fuzzNames = []string{"X-A", "Content-Type", "Content-Encoding", "Set-Cookie", "Vary", "Cache-Control", "X-B"}

// fuzzCodes are the statuses FuzzAnswerLikeNetHTTP's handlers write.
var fuzzCodes = []int{200, 201, 204, 206, 304, 404, 500, 502, 103}

// fuzzHandler plays script: each pair of bytes an operation on the
// response (set, add or empty a field, write a status, write a body) and
// its argument, strings taken in turn from values. Like a proxy, it
// changes no field once its final status is written: net/http's server
// would no longer send the change, the adapter would.
func fuzzHandler(script []byte, values []string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		next := 0
		value := func() string {
			if len(values) == 0 {
				return ""
			}
			next++
			return values[(next-1)%len(values)]
		}
		// A field's value in printable ASCII: net/http's server changes
		// others (a line break becomes a space).
		field := func() string {
			return strings.Map(func(r rune) rune {
				if r < ' ' || r > '~' {
					return -1
				}
				return r
			}, value())
		}
		sent := false // a final status is written: net/http reads the header no more
		for i := 0; i+1 < len(script); i += 2 {
			arg := int(script[i+1])
			switch op := script[i] % 5; {
			case sent && op <= 2:
			case op == 0:
				w.Header().Set(fuzzNames[arg%len(fuzzNames)], field())
			case op == 1:
				w.Header().Add(fuzzNames[arg%len(fuzzNames)], field())
			case op == 2:
				w.Header()[fuzzNames[arg%len(fuzzNames)]] = nil
			case op == 3:
				code := fuzzCodes[arg%len(fuzzCodes)]
				w.WriteHeader(code)
				sent = sent || code >= 200
			default:
				_, _ = io.WriteString(w, value())
				sent = true
			}
		}
	}
}

// FuzzAnswerLikeNetHTTP: what a client gets of a handler's answer through
// the adapter (the Function URL's response, its headers each a field of
// its own, each cookie a Set-Cookie) is what net/http's server sends for
// it: status, fields (a field's lines as one list), cookies and body
// (base64 when not UTF-8). Date and Content-Length, which the front end
// writes, are not compared.
func FuzzAnswerLikeNetHTTP(f *testing.F) {
	f.Add([]byte{4, 0, 0, 1}, "<html>", "text/x")
	f.Add([]byte{0, 2, 1, 2, 1, 3, 3, 0, 4, 0, 2, 1}, "gzip", "a=1")
	f.Add([]byte{2, 1, 3, 2, 4, 0}, "body", "")
	f.Add([]byte{4, 0, 4, 1}, "\x89PNG\r\n\x1a\n\x00", "\xff")
	f.Fuzz(func(t *testing.T, script []byte, v1, v2 string) {
		h := fuzzHandler(script, []string{v1, v2})
		srv := httptest.NewServer(h)
		defer srv.Close()
		client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
		defer client.CloseIdleConnections()
		want, err := client.Get(srv.URL + "/")
		if err != nil {
			t.Fatal(err)
		}
		wantBody, _ := io.ReadAll(want.Body)
		want.Body.Close()
		ev := events.APIGatewayV2HTTPRequest{Version: "2.0", RawPath: "/"}
		ev.RequestContext.HTTP.Method = http.MethodGet
		ev.RequestContext.DomainName = fnURLDomain
		res, _ := Adapt(h)(context.Background(), ev)
		got, err := parityAnswer(res)
		if err != nil {
			t.Fatal(err)
		}
		for k, vs := range got.Header {
			for i := range vs {
				vs[i] = textproto.TrimString(vs[i]) // as the client reads a field
			}
			got.Header[k] = vs
		}
		if got.Status != want.StatusCode {
			t.Errorf("status %d, net/http %d", got.Status, want.StatusCode)
		}
		if string(got.Body) != string(wantBody) {
			t.Errorf("body %q, net/http %q", got.Body, wantBody)
		}
		// net/http drops Content-Type from a 304 (suppressedHeaders304); the
		// adapter passes an origin's on: a difference with origins that
		// send one, left alone.
		skip := func(k string) bool {
			return k == "Date" || k == "Content-Length" || k == "Content-Type" && want.StatusCode == http.StatusNotModified
		}
		for k, vs := range want.Header {
			if skip(k) {
				continue
			}
			if k == "Set-Cookie" {
				if !reflect.DeepEqual(got.Header[k], vs) {
					t.Errorf("%s: %q, net/http %q", k, got.Header[k], vs)
				}
				continue
			}
			g, w := strings.Join(got.Header[k], ","), strings.Join(vs, ",")
			if len(vs) > 1 {
				// Lines of one field are one list, whose elements a
				// client reads trimmed: net/http's lines "0", " ", "0"
				// reach the client as "0", "", "0", and the adapter's
				// "0, ,0" (the lines joined as they are) as the same list.
				g, w = trimElements(g), trimElements(w)
			}
			if g != w {
				t.Errorf("%s: %q, net/http %q", k, got.Header[k], vs)
			}
		}
		for k, vs := range got.Header {
			if _, ok := want.Header[k]; !ok && !skip(k) {
				t.Errorf("%s: %q, which net/http does not send", k, vs)
			}
		}
	})
}

// trimElements returns the comma-separated list v with each element
// trimmed of white space as a client trims a field line.
func trimElements(v string) string {
	es := strings.Split(v, ",")
	for i, e := range es {
		es[i] = textproto.TrimString(e)
	}
	return strings.Join(es, ",")
}
