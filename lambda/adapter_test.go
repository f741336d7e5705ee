package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"

	"github.com/slidegate/slidegate/config"
	"github.com/slidegate/slidegate/httpapi"
	"github.com/slidegate/slidegate/internal/testenv"
)

// event reads a fixture from testdata.
func event(t *testing.T, name string) events.APIGatewayV2HTTPRequest {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var ev events.APIGatewayV2HTTPRequest
	if err := json.Unmarshal(data, &ev); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return ev
}

// seen is what a handler saw of a request.
type seen struct {
	method, url, host, remote, cookie, accept, proto string
	body                                             string
	ip                                               string
}

func record(into *seen) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		ip, _ := sourceIP(r)
		*into = seen{r.Method, r.URL.String(), r.Host, r.RemoteAddr, r.Header.Get("Cookie"), r.Header.Get("Accept"), r.Proto, string(b), ip.String()}
		w.WriteHeader(http.StatusNoContent)
	})
}

func TestRequestFromEvent(t *testing.T) {
	tests := []struct {
		fixture string
		want    seen
	}{
		{"httpapi-get.json", seen{
			method: "GET", url: "https://abcdef1234.execute-api.eu-west-1.amazonaws.com/hello?lang=en&q=a%20b",
			host: "abcdef1234.execute-api.eu-west-1.amazonaws.com", remote: "203.0.113.7:0",
			cookie: "session=abc; theme=dark", accept: "application/json", proto: "HTTP/1.1", ip: "203.0.113.7",
		}},
		{"functionurl-get.json", seen{
			method: "GET", url: "https://abcdefghijklmnopqrstuvwxyz012345.lambda-url.eu-west-1.on.aws/hello",
			host: "abcdefghijklmnopqrstuvwxyz012345.lambda-url.eu-west-1.on.aws", remote: "203.0.113.7:0",
			accept: "*/*", proto: "HTTP/1.1", ip: "203.0.113.7",
		}},
		{"functionurl-cookies-gzip.json", seen{
			method: "GET", url: "https://abcdefghijklmnopqrstuvwxyz012345.lambda-url.eu-west-1.on.aws/files/a%2Fb?tag=x&tag=y&q=a%2Bb%20c",
			host: "abcdefghijklmnopqrstuvwxyz012345.lambda-url.eu-west-1.on.aws", remote: "198.51.100.20:0",
			cookie: "session=abc; theme=dark", accept: "*/*", proto: "HTTP/1.1", ip: "198.51.100.20",
		}},
		// An HTTP API decodes the path: the client sent /files/what%3F.txt.
		{"httpapi-decoded-path.json", seen{
			method: "GET", url: "https://abcdef1234.execute-api.eu-west-1.amazonaws.com/files/what%3F.txt?v=2",
			host: "abcdef1234.execute-api.eu-west-1.amazonaws.com", remote: "203.0.113.7:0",
			accept: "*/*", proto: "HTTP/1.1", ip: "203.0.113.7",
		}},
		{"functionurl-check-base64.json", seen{
			method: "POST", url: "https://abcdefghijklmnopqrstuvwxyz012345.lambda-url.eu-west-1.on.aws/v1/check",
			host: "abcdefghijklmnopqrstuvwxyz012345.lambda-url.eu-west-1.on.aws", remote: "10.1.2.3:0",
			proto: "HTTP/1.1", body: `{"key":"test-key-1","cost":1}`, ip: "10.1.2.3",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			var got seen
			res, err := Adapt(record(&got))(context.Background(), event(t, tt.fixture))
			if err != nil || res.StatusCode != http.StatusNoContent {
				t.Fatalf("Adapt = %d, %v; want 204, nil", res.StatusCode, err)
			}
			if got != tt.want {
				t.Errorf("handler saw\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}

func TestResponseFromHandler(t *testing.T) {
	ev := event(t, "functionurl-get.json")
	tests := []struct {
		name    string
		h       http.HandlerFunc
		status  int
		headers map[string]string
		cookies []string
		body    string
		base64  bool
	}{
		{"text", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			w.Header().Add("Vary", "Accept")
			w.Header().Add("Vary", "Origin")
			w.Header().Add("Set-Cookie", "a=1")
			w.Header().Add("Set-Cookie", "b=2")
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, "héllo")
		}, 201, map[string]string{"Content-Type": "text/plain", "Vary": "Accept,Origin"}, []string{"a=1", "b=2"}, "héllo", false},
		{"binary", func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte{0xff, 0x00, 0xfe})
		}, 200, map[string]string{}, nil, base64.StdEncoding.EncodeToString([]byte{0xff, 0x00, 0xfe}), true},
		{"nothing written", func(w http.ResponseWriter, r *http.Request) {}, 200, map[string]string{}, nil, "", false},
		{"redirect", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Location", "https://other.example/next?x=1")
			w.WriteHeader(http.StatusFound)
		}, 302, map[string]string{"Location": "https://other.example/next?x=1"}, nil, "", false},
		{"204", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }, 204, map[string]string{}, nil, "", false},
		{"304", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("ETag", `"v1"`)
			w.WriteHeader(http.StatusNotModified)
		}, 304, map[string]string{"Etag": `"v1"`}, nil, "", false},
		{"panic", func(w http.ResponseWriter, r *http.Request) { panic("boom") },
			500, map[string]string{"Content-Type": "application/problem+json", "Cache-Control": "no-store"}, nil,
			`{"type":"about:blank","title":"Internal Server Error","status":500,"detail":"internal error"}` + "\n", false},
		{"aborted", func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, "the first half")
			panic(http.ErrAbortHandler)
		}, 502, map[string]string{"Content-Type": "application/problem+json", "Cache-Control": "no-store"}, nil,
			`{"type":"about:blank","title":"Bad Gateway","status":502,"detail":"the response was cut short"}` + "\n", false},
		{"too large", func(w http.ResponseWriter, r *http.Request) {
			chunk := strings.Repeat("x", 1<<20)
			for range 6 { // 6 MiB, over Lambda's 6,000,000 bytes as text
				_, _ = io.WriteString(w, chunk)
			}
		}, 502, map[string]string{"Content-Type": "application/problem+json", "Cache-Control": "no-store"}, nil,
			`{"type":"about:blank","title":"Bad Gateway","status":502,"detail":"the response is too large for AWS Lambda"}` + "\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Adapt(tt.h)(context.Background(), ev)
			if err != nil {
				t.Fatalf("Adapt error %v: every outcome must be a response", err)
			}
			if res.StatusCode != tt.status || res.Body != tt.body || res.IsBase64Encoded != tt.base64 {
				t.Errorf("got %d %q base64=%v, want %d %q base64=%v", res.StatusCode, res.Body, res.IsBase64Encoded, tt.status, tt.body, tt.base64)
			}
			if !equalMaps(res.Headers, tt.headers) {
				t.Errorf("headers %v, want %v", res.Headers, tt.headers)
			}
			if strings.Join(res.Cookies, "|") != strings.Join(tt.cookies, "|") {
				t.Errorf("cookies %v, want %v", res.Cookies, tt.cookies)
			}
		})
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// testConfig is the configuration of the fixture tests: three requests a
// day per client, so that a fourth is denied whatever the clock says.
const testConfig = `{
  "plans": {"free": {"limits": [{"name": "day", "limit": 3, "window": "24h"}]}},
  "store_timeout": "2s"
}`

// TestFixturesThroughHandler runs the fixtures through the real handler on
// a memory store: 200s, then a 429 with its headers and problem+json body;
// a bad check request and an undecodable event are 400 responses.
func TestFixturesThroughHandler(t *testing.T) {
	cfg, err := config.Parse([]byte(testConfig))
	if err != nil {
		t.Fatal(err)
	}
	origin := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "hello from the origin\n")
	})
	now := time.Date(2026, 11, 22, 12, 0, 7, 0, time.UTC)
	h, err := httpapi.New(httpapi.Options{Config: cfg, Next: origin, ClientIP: sourceIP,
		Now: func() time.Time { return now }, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	handle := Adapt(h)
	for i, fixture := range []string{"httpapi-get.json", "functionurl-get.json", "httpapi-get.json"} {
		res, err := handle(context.Background(), event(t, fixture))
		if err != nil || res.StatusCode != http.StatusOK || res.Body != "hello from the origin\n" {
			t.Fatalf("request %d (%s): %d %q, %v; want 200 from the origin", i, fixture, res.StatusCode, res.Body, err)
		}
		if got, want := res.Headers["Ratelimit-Policy"], `"day";q=3;w=86400`; got != want {
			t.Errorf("request %d: RateLimit-Policy %q, want %q", i, got, want)
		}
	}
	// The same source IP through either event source is one client.
	res, err := handle(context.Background(), event(t, "functionurl-get.json"))
	if err != nil {
		t.Fatal(err)
	}
	check429(t, res)

	res, err = handle(context.Background(), event(t, "functionurl-check-base64.json"))
	if err != nil || res.StatusCode != http.StatusOK || !strings.Contains(res.Body, `"allowed":true`) {
		t.Errorf("check API: %d %s, %v; want 200 allowed", res.StatusCode, res.Body, err)
	}
	for _, fixture := range []string{"httpapi-check-invalid.json", "httpapi-bad-base64.json"} {
		res, err := handle(context.Background(), event(t, fixture))
		if err != nil || res.StatusCode != http.StatusBadRequest || res.Headers["Content-Type"] != "application/problem+json" {
			t.Errorf("%s: %d %v %s, %v; want a 400 problem+json response", fixture, res.StatusCode, res.Headers, res.Body, err)
		}
	}
}

// check429 asserts a 429 with the rate-limit headers and a problem+json body.
func check429(t *testing.T, res events.LambdaFunctionURLResponse) {
	t.Helper()
	if res.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("status %d, want 429: %s", res.StatusCode, res.Body)
	}
	for _, k := range []string{"Retry-After", "Ratelimit", "Ratelimit-Policy", "X-Ratelimit-Limit", "X-Ratelimit-Remaining"} {
		if res.Headers[k] == "" {
			t.Errorf("429 without %s: %v", k, res.Headers)
		}
	}
	if got := res.Headers["Content-Type"]; got != "application/problem+json" {
		t.Errorf("Content-Type %q, want application/problem+json", got)
	}
	var body struct {
		Type      string `json:"type"`
		Status    int    `json:"status"`
		Limit     int64  `json:"limit"`
		Remaining int64  `json:"remaining"`
		Retry     int64  `json:"retry_after_ms"`
	}
	if err := json.Unmarshal([]byte(res.Body), &body); err != nil {
		t.Fatalf("body %q: %v", res.Body, err)
	}
	if body.Type != httpapi.RateLimitedType || body.Status != 429 || body.Limit != 3 || body.Remaining != 0 || body.Retry <= 0 {
		t.Errorf("429 body %s", res.Body)
	}
}

// TestResponseJSONIsPayload2: the response carries exactly the members of
// payload format 2.0, which the Function URL format shares.
func TestResponseJSONIsPayload2(t *testing.T) {
	res, err := Adapt(http.NotFoundHandler())(context.Background(), event(t, "httpapi-get.json"))
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if got, want := strings.Join(keys, " "), "body cookies headers isBase64Encoded statusCode"; got != want {
		t.Errorf("response members %q, want %q", got, want)
	}
}

// TestResponsePayloadWithinLambdaLimit: the JSON returned to Lambda, as
// the runtime encodes it, stays under its 6 MB payload limit, or the
// answer is the adapter's 502. A body of control bytes, valid UTF-8, is 6
// times larger as JSON text, so it goes as base64.
func TestResponsePayloadWithinLambdaLimit(t *testing.T) {
	ev := event(t, "functionurl-get.json")
	tests := []struct {
		name   string
		body   []byte
		header int // bytes of one extra response header
		status int
		base64 bool
	}{
		{"3 MiB of NUL goes as base64", bytes.Repeat([]byte{0}, 3<<20), 0, 200, true},
		{"escaped text that fits stays text", bytes.Repeat([]byte{'\n'}, 1<<20), 0, 200, false},
		{"900 kB of control bytes fits as text", bytes.Repeat([]byte{1}, 900_000), 0, 200, false},
		{"HTML characters counted escaped", bytes.Repeat([]byte{'<'}, 1_100_000), 0, 200, true},
		{"4 MiB binary with large headers", bytes.Repeat([]byte{0xff}, 4<<20), 500_000, 502, false},
		{"4 MiB of NUL fits as base64", bytes.Repeat([]byte{0}, 4<<20), 0, 200, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := Adapt(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tt.header > 0 {
					w.Header().Set("X-Big", strings.Repeat("a", tt.header))
				}
				_, _ = w.Write(tt.body)
			}))
			res, err := h(context.Background(), ev)
			if err != nil {
				t.Fatal(err)
			}
			for _, escapeHTML := range []bool{false, true} {
				var buf bytes.Buffer
				enc := json.NewEncoder(&buf)
				enc.SetEscapeHTML(escapeHTML)
				if err := enc.Encode(res); err != nil {
					t.Fatal(err)
				}
				if buf.Len() > maxPayload {
					t.Errorf("escapeHTML=%v: payload %d bytes, over %d", escapeHTML, buf.Len(), maxPayload)
				}
			}
			if res.StatusCode != tt.status || res.IsBase64Encoded != tt.base64 {
				t.Fatalf("status %d base64=%v, want %d base64=%v", res.StatusCode, res.IsBase64Encoded, tt.status, tt.base64)
			}
			if tt.status != 200 {
				return
			}
			got := []byte(res.Body)
			if res.IsBase64Encoded {
				if got, err = base64.StdEncoding.DecodeString(res.Body); err != nil {
					t.Fatal(err)
				}
			}
			if !bytes.Equal(got, tt.body) {
				t.Errorf("body of %d bytes came back as %d different bytes", len(tt.body), len(got))
			}
		})
	}
}

// TestEarlyHintsAreNotTheStatus: an origin sending 103 Early Hints before
// its response answers with its final status through the proxy.
func TestEarlyHintsAreNotTheStatus(t *testing.T) {
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</a.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, "hello")
	}))
	defer origin.Close()
	u, err := url.Parse(origin.URL)
	if err != nil {
		t.Fatal(err)
	}
	ev := event(t, "functionurl-get.json")
	ev.RequestContext.HTTP.SourceIP = "203.0.113.7"
	res, err := Adapt(httpapi.NewProxy(u, slog.New(slog.DiscardHandler), nil))(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusAccepted || res.Body != "hello" {
		t.Errorf("got %d %q, want 202 \"hello\"", res.StatusCode, res.Body)
	}
	for _, code := range []int{100, 103, 199} {
		w := &writer{header: http.Header{}}
		w.WriteHeader(code)
		_, _ = io.WriteString(w, "x")
		if got := w.response().StatusCode; got != http.StatusOK {
			t.Errorf("WriteHeader(%d) then Write: status %d, want 200", code, got)
		}
	}
}

// TestProxyTellsOriginHTTPS: Function URLs and HTTP APIs take HTTPS only, so
// the origin behind the proxy is told X-Forwarded-Proto: https.
func TestProxyTellsOriginHTTPS(t *testing.T) {
	var got http.Header
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer origin.Close()
	u, err := url.Parse(origin.URL)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Adapt(httpapi.NewProxy(u, nil, nil))(context.Background(), event(t, "functionurl-get.json"))
	if err != nil || res.StatusCode != http.StatusNoContent {
		t.Fatalf("Adapt = %d, %v; want 204, nil", res.StatusCode, err)
	}
	if p := got.Get("X-Forwarded-Proto"); p != "https" {
		t.Errorf("origin saw X-Forwarded-Proto %q, want https", p)
	}
	if f := got.Get("X-Forwarded-For"); f != "203.0.113.7" {
		t.Errorf("origin saw X-Forwarded-For %q, want the source IP 203.0.113.7", f)
	}
}

// arrival is what the origin saw of one request.
type arrival struct {
	method, uri, cookie, acceptEncoding, body string
}

// gunzip decompresses b.
func gunzip(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("gzip body: %v", err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("gzip body: %v", err)
	}
	return out
}

// TestProxyThroughLambda: behind the pre-filter and the adapter, the
// origin gets the request as the client sent it through API Gateway or a
// Function URL (path, rawQueryString, the cookies field as one Cookie
// header, Accept-Encoding, the body) and the client the answer as the
// origin sent it: a compressed or binary body as base64 with a
// Content-Length that matches it, HEAD bodiless, the rate-limit headers,
// and a 502 for an answer Lambda cannot carry or the origin broke off.
// (Statuses, Set-Cookie and repeated headers are the writer's:
// TestResponseFromHandler; through the runtime: TestBootstrapEndToEnd.)
func TestProxyThroughLambda(t *testing.T) {
	page := strings.Repeat("the origin's page. ", 200)
	zipped := testenv.Gzip(page)
	var got arrival
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = arrival{r.Method, r.RequestURI, strings.Join(r.Header.Values("Cookie"), "|"), r.Header.Get("Accept-Encoding"), string(b)}
		h := w.Header()
		body := page
		switch r.URL.Path {
		case "/gzip": // compressed whatever the client asked for
			h.Set("Content-Encoding", "gzip")
			body = string(zipped)
		case "/cut": // the origin fails after the first bytes of its answer
			if !r.URL.Query().Has("chunked") {
				h.Set("Content-Length", "100")
			}
			_, _ = io.WriteString(w, "short")
			_ = http.NewResponseController(w).Flush()
			panic(http.ErrAbortHandler) // the origin's server closes the connection
		case "/large":
			n, _ := strconv.Atoi(r.URL.Query().Get("n"))
			body = strings.Repeat(r.URL.Query().Get("c"), n)
		}
		h.Set("Content-Length", strconv.Itoa(len(body)))
		if r.Method != http.MethodHead {
			_, _ = io.WriteString(w, body)
		}
	}))
	t.Cleanup(origin.Close)
	u, err := url.Parse(origin.URL)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse([]byte(`{"plans": {"free": {"limits": [{"name": "minute", "limit": 1000, "window": "1m"}]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 22, 12, 0, 7, 0, time.UTC)
	h, err := httpapi.New(httpapi.Options{Config: cfg, Next: httpapi.NewProxy(u, nil, nil), ClientIP: sourceIP,
		Now: func() time.Time { return now }, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	handle := Adapt(h)
	fnURL, httpAPI := event(t, "functionurl-get.json"), event(t, "httpapi-get.json")

	tests := []struct {
		name    string
		ev      events.APIGatewayV2HTTPRequest
		edit    func(ev *events.APIGatewayV2HTTPRequest)
		arrived arrival // method defaults to GET, uri to rawPath?rawQueryString
		status  int
		headers map[string]string
		gzip    bool   // the body is the gzip of page
		body    string // decoded; for a 502, a part of the problem's detail
	}{
		{name: "request cookies", ev: httpAPI, edit: func(ev *events.APIGatewayV2HTTPRequest) { ev.RawQueryString = "" },
			arrived: arrival{uri: "/hello", cookie: "session=abc; theme=dark"}, status: 200, body: page},
		{name: "gzip, client accepts it", ev: fnURL, edit: func(ev *events.APIGatewayV2HTTPRequest) {
			ev.RawPath, ev.Headers = "/gzip", map[string]string{"accept-encoding": "gzip, deflate, br"}
		}, arrived: arrival{acceptEncoding: "gzip, deflate, br"}, status: 200, headers: map[string]string{"Content-Encoding": "gzip"}, gzip: true},
		{name: "gzip, client sent no Accept-Encoding", ev: fnURL, edit: func(ev *events.APIGatewayV2HTTPRequest) { ev.RawPath = "/gzip" },
			status: 200, headers: map[string]string{"Content-Encoding": "gzip"}, gzip: true},
		{name: "HEAD", ev: fnURL, edit: func(ev *events.APIGatewayV2HTTPRequest) { ev.RequestContext.HTTP.Method = "HEAD" },
			arrived: arrival{method: "HEAD"}, status: 200, headers: map[string]string{"Content-Length": strconv.Itoa(len(page))}},
		{name: "encoded and repeated query", ev: httpAPI, edit: func(ev *events.APIGatewayV2HTTPRequest) {
			ev.RawQueryString = "q=a%2Bb%20c&tag=x&tag=y&empty=&plus=a+b&utf=%C3%A9"
		}, arrived: arrival{cookie: "session=abc; theme=dark"}, status: 200, body: page},
		{name: "Function URL: %2F stays encoded", ev: fnURL, edit: func(ev *events.APIGatewayV2HTTPRequest) { ev.RawPath = "/files/a%2Fb/c%20d" },
			status: 200, body: page},
		// An HTTP API decodes rawPath: a client's %3F, %23, %25 and %20
		// arrive as ?, #, % and a space, and must not be read as the
		// start of a query, a fragment or an escape.
		{name: "HTTP API: decoded ? in the path", ev: httpAPI, edit: func(ev *events.APIGatewayV2HTTPRequest) {
			ev.RawPath, ev.RawQueryString = "/files/what?.txt", "x=1"
		}, arrived: arrival{uri: "/files/what%3F.txt?x=1", cookie: "session=abc; theme=dark"}, status: 200, body: page},
		{name: "HTTP API: decoded # in the path", ev: httpAPI, edit: func(ev *events.APIGatewayV2HTTPRequest) {
			ev.RawPath, ev.RawQueryString = "/notes/#1", "x=1"
		}, arrived: arrival{uri: "/notes/%231?x=1", cookie: "session=abc; theme=dark"}, status: 200, body: page},
		{name: "HTTP API: decoded %, space, UTF-8 in the path", ev: httpAPI, edit: func(ev *events.APIGatewayV2HTTPRequest) {
			ev.RawPath, ev.RawQueryString = "/100%/a b/é/%zz", ""
		}, arrived: arrival{uri: "/100%25/a%20b/%C3%A9/%25zz", cookie: "session=abc; theme=dark"}, status: 200, body: page},
		{name: "binary request body", ev: fnURL, edit: func(ev *events.APIGatewayV2HTTPRequest) {
			ev.RequestContext.HTTP.Method, ev.Body, ev.IsBase64Encoded = "POST", base64.StdEncoding.EncodeToString([]byte("\x00\x01bin\xff")), true
		}, arrived: arrival{method: "POST", body: "\x00\x01bin\xff"}, status: 200, body: page},
		{name: "4.4 MB binary request body", ev: fnURL, edit: func(ev *events.APIGatewayV2HTTPRequest) {
			ev.RequestContext.HTTP.Method, ev.IsBase64Encoded = "PUT", true
			ev.Body = base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xff, 0}, 2_200_000))
		}, arrived: arrival{method: "PUT", body: strings.Repeat("\xff\x00", 2_200_000)}, status: 200, body: page},
		{name: "body cut short of its Content-Length is a 502", ev: fnURL, edit: func(ev *events.APIGatewayV2HTTPRequest) { ev.RawPath = "/cut" },
			status: 502, headers: map[string]string{"Content-Type": "application/problem+json"}, body: "cut short"},
		{name: "chunked body cut short is a 502", ev: fnURL, edit: func(ev *events.APIGatewayV2HTTPRequest) {
			ev.RawPath, ev.RawQueryString = "/cut", "chunked"
		}, status: 502, headers: map[string]string{"Content-Type": "application/problem+json"}, body: "cut short"},
		{name: "5.9 MB text answer fits", ev: fnURL, edit: func(ev *events.APIGatewayV2HTTPRequest) {
			ev.RawPath, ev.RawQueryString = "/large", "n=5900000&c=x"
		}, status: 200, body: strings.Repeat("x", 5_900_000)},
		{name: "4.4 MB binary answer fits as base64", ev: fnURL, edit: func(ev *events.APIGatewayV2HTTPRequest) {
			ev.RawPath, ev.RawQueryString = "/large", "n=4400000&c=%FF"
		}, status: 200, body: strings.Repeat("\xff", 4_400_000)},
		{name: "6.1 MB text answer is a 502", ev: fnURL, edit: func(ev *events.APIGatewayV2HTTPRequest) {
			ev.RawPath, ev.RawQueryString = "/large", "n=6100000&c=x"
		}, status: 502, headers: map[string]string{"Content-Type": "application/problem+json"}, body: "too large"},
		{name: "4.6 MB binary answer is a 502", ev: fnURL, edit: func(ev *events.APIGatewayV2HTTPRequest) {
			ev.RawPath, ev.RawQueryString = "/large", "n=4600000&c=%FF"
		}, status: 502, headers: map[string]string{"Content-Type": "application/problem+json"}, body: "too large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := tt.ev
			ev.Headers = maps.Clone(ev.Headers)
			tt.edit(&ev)
			got = arrival{}
			res, err := handle(context.Background(), ev)
			if err != nil {
				t.Fatalf("Adapt error %v: every outcome must be a response", err)
			}
			if res.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %.200s", res.StatusCode, tt.status, res.Body)
			}
			want := tt.arrived
			if want.method == "" {
				want.method = "GET"
			}
			if want.uri == "" {
				want.uri = ev.RawPath
				if ev.RawQueryString != "" {
					want.uri += "?" + ev.RawQueryString
				}
			}
			if got != want {
				t.Errorf("origin saw %+v, want %+v", got, want)
			}
			for k, v := range tt.headers {
				if g := res.Headers[k]; g != v {
					t.Errorf("header %s %q, want %q (headers %v)", k, g, v, res.Headers)
				}
			}
			if tt.status == 502 {
				if !strings.Contains(res.Body, tt.body) {
					t.Errorf("502 %s, want %q in it", res.Body, tt.body)
				}
				return
			}
			for _, k := range []string{"Ratelimit", "Ratelimit-Policy", "X-Ratelimit-Remaining"} {
				if res.Headers[k] == "" {
					t.Errorf("no %s on the proxied answer: %v", k, res.Headers)
				}
			}
			body := []byte(res.Body)
			if res.IsBase64Encoded {
				if body, err = base64.StdEncoding.DecodeString(res.Body); err != nil {
					t.Fatal(err)
				}
			} else if !utf8.Valid(body) {
				t.Errorf("binary body not base64")
			}
			if cl, ok := res.Headers["Content-Length"]; ok && ev.RequestContext.HTTP.Method != "HEAD" && cl != strconv.Itoa(len(body)) {
				t.Errorf("Content-Length %s, body %d bytes", cl, len(body))
			}
			if tt.gzip {
				body, tt.body = gunzip(t, body), page
			}
			if string(body) != tt.body {
				t.Errorf("body of %d bytes, want %d bytes", len(body), len(tt.body))
			}
		})
	}
}

// escapePathCases: rawPath as an HTTP API (decoded) or a Function URL
// (escaped) sends it, and the escaped path the request gets.
var escapePathCases = []struct{ in, want string }{
	{"/hello", "/hello"},
	{"/a%2Fb/%C3%A9/%7e", "/a%2Fb/%C3%A9/%7e"}, // escaped already: unchanged
	{"/what?.txt", "/what%3F.txt"},
	{"/notes/#1", "/notes/%231"},
	{"/100%", "/100%25"},
	{"/%zz/%4", "/%25zz/%254"},
	{"/a b/é/\x00\x7f", "/a%20b/%C3%A9/%00%7F"},
	{"", ""},
}

func TestEscapePath(t *testing.T) {
	for _, tt := range escapePathCases {
		if got := escapePath(tt.in); got != tt.want {
			t.Errorf("escapePath(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// FuzzEscapePath: the result is a path url.Parse takes whole (no query or
// fragment split off, no invalid escape), escaping it again changes
// nothing, and a path without '%' (a decoded one) unescapes to itself.
func FuzzEscapePath(f *testing.F) {
	for _, tt := range escapePathCases {
		f.Add(tt.in)
	}
	f.Fuzz(func(t *testing.T, p string) {
		e := escapePath(p)
		back, err := url.PathUnescape(e)
		if err != nil {
			t.Fatalf("escapePath(%q) = %q: %v", p, e, err)
		}
		if u, err := url.Parse("https://h/" + e); err != nil || u.Path != "/"+back || u.RawQuery != "" || u.Fragment != "" {
			t.Fatalf("escapePath(%q) = %q parses as %#v, %v; want the path %q alone", p, e, u, err, "/"+back)
		}
		if again := escapePath(e); again != e {
			t.Errorf("escapePath(%q) = %q, escaped again %q", p, e, again)
		}
		if !strings.Contains(p, "%") && back != p {
			t.Errorf("escapePath(%q) = %q unescapes to %q", p, e, back)
		}
	})
}
