package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log"
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
		// A custom domain's HTTP API decodes too: rawPath holds the
		// characters /notes/100%/%41, which reach the origin as such.
		{"httpapi-custom-domain-percent.json", seen{
			method: "GET", url: "https://api.example.com/notes/100%25/%2541?v=2",
			host: "api.example.com", remote: "203.0.113.8:0",
			accept: "*/*", proto: "HTTP/1.1", ip: "203.0.113.8",
		}},
		// A Function URL gives a "+" of the client's query as a space
		// (aws/aws-lambda-web-adapter#491): the client sent
		// ?q=rate+limit&scope=openid+profile&tag=a%2Bb.
		{"functionurl-plus-query.json", seen{
			method: "GET", url: "https://abcdefghijklmnopqrstuvwxyz012345.lambda-url.eu-west-1.on.aws/search?q=rate+limit&scope=openid+profile&tag=a%2Bb",
			host: "abcdefghijklmnopqrstuvwxyz012345.lambda-url.eu-west-1.on.aws", remote: "198.51.100.30:0",
			accept: "*/*", proto: "HTTP/1.1", ip: "198.51.100.30",
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
		}, 200, map[string]string{"Content-Type": "application/octet-stream"}, nil, base64.StdEncoding.EncodeToString([]byte{0xff, 0x00, 0xfe}), true},
		{"nothing written", func(w http.ResponseWriter, r *http.Request) {}, 200, map[string]string{}, nil, "", false},
		// As net/http: a Content-Type key without values asks for no
		// type, neither sniffed nor empty.
		{"no type asked for", func(w http.ResponseWriter, r *http.Request) {
			w.Header()["Content-Type"] = nil
			_, _ = io.WriteString(w, "<html>")
		}, 200, map[string]string{}, nil, "<html>", false},
		// No trailer section: the header section as it stood at the
		// status, without Trailer (TestOriginTrailersAreNotFields).
		// A value set between two writes and a cookie added after the
		// body are no more of it than a trailer's value.
		{"trailers", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Server-Timing", "db;dur=1")
			w.Header().Set("Trailer", "Server-Timing, X-Sum")
			w.Header().Add("Set-Cookie", "a=1")
			_, _ = io.WriteString(w, "bo")
			w.Header().Set("X-Sum", "abc")
			_, _ = io.WriteString(w, "dy")
			w.Header().Add("Server-Timing", "total;dur=9")
			w.Header().Add("Set-Cookie", "late=1")
			w.Header().Set(http.TrailerPrefix+"X-Late", "1")
		}, 200, map[string]string{"Server-Timing": "db;dur=1", "Content-Type": "text/plain; charset=utf-8"}, []string{"a=1"}, "body", false},
		// Trailers none was announced for: ReverseProxy sets them under
		// http.TrailerPrefix, with no Trailer header before the status.
		{"unannounced trailers", func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, "body")
			w.Header().Set(http.TrailerPrefix+"X-Late", "1")
		}, 200, map[string]string{"Content-Type": "text/plain; charset=utf-8"}, nil, "body", false},
		{"redirect", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Location", "https://other.example/next?x=1")
			w.WriteHeader(http.StatusFound)
		}, 302, map[string]string{"Location": "https://other.example/next?x=1"}, nil, "", false},
		{"204", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }, 204, map[string]string{}, nil, "", false},
		{"304", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("ETag", `"v1"`)
			w.WriteHeader(http.StatusNotModified)
		}, 304, map[string]string{"Etag": `"v1"`}, nil, "", false},
		// As net/http: no body on a 204 or 304, whatever the handler writes.
		{"204 written to", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusNoContent)
			if _, err := io.WriteString(w, "not sent"); err != http.ErrBodyNotAllowed {
				panic(fmt.Sprintf("write after 204: %v, want http.ErrBodyNotAllowed", err))
			}
		}, 204, map[string]string{}, nil, "", false},
		{"304 written to", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusNotModified)
			_, _ = io.WriteString(w, "not sent")
		}, 304, map[string]string{}, nil, "", false},
		// An answer the adapter replaces keeps the pre-filter's fields
		// (the marks too), nothing else the handler set.
		{"panic", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Slidegate-Shadow", "denied")
			w.Header().Set("X-Origin", "yes")
			panic("boom")
		},
			500, map[string]string{"Content-Type": "application/problem+json", "Cache-Control": "no-store", "Slidegate-Shadow": "denied"}, nil,
			`{"type":"about:blank","title":"Internal Server Error","status":500,"detail":"internal error"}` + "\n", false},
		{"aborted", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Slidegate-Store", "error-allowed")
			w.Header().Set("X-Origin", "yes")
			_, _ = io.WriteString(w, "the first half")
			panic(http.ErrAbortHandler)
		}, 502, map[string]string{"Content-Type": "application/problem+json", "Cache-Control": "no-store", "Slidegate-Store": "error-allowed"}, nil,
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

// TestNoBodyForHEAD: an answer to HEAD carries no body, as net/http's
// server sends none: the handler's writes (the health check's "ok", the
// origin's page) were passed to the event source.
func TestNoBodyForHEAD(t *testing.T) {
	ev := event(t, "functionurl-get.json")
	ev.RequestContext.HTTP.Method = http.MethodHead
	res, err := Adapt(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "5")
		if n, err := io.WriteString(w, "hello"); n != 5 || err != nil {
			panic(fmt.Sprintf("write to HEAD: %d, %v; want the bytes taken, as net/http takes them", n, err))
		}
	}))(context.Background(), ev)
	if err != nil || res.StatusCode != 200 || res.Body != "" || res.Headers["Content-Length"] != "5" {
		t.Errorf("got %d %q %v, %v; want 200, no body, Content-Length 5", res.StatusCode, res.Body, res.Headers, err)
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
	h, err := httpapi.New(httpapi.Options{Config: cfg, Next: origin, PeerIP: sourceIP,
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
	// An event of another integration names what is supported.
	for fixture, says := range map[string]string{
		"httpapi-check-invalid.json": "JSON", "httpapi-bad-base64.json": "base64",
		"httpapi-v1-get.json": "payload format 1.0", "restapi-get.json": "not an HTTP API (payload format 2.0) or Function URL event",
		"alb-get.json": "not an HTTP API (payload format 2.0) or Function URL event",
	} {
		res, err := handle(context.Background(), event(t, fixture))
		if err != nil || res.StatusCode != http.StatusBadRequest || res.Headers["Content-Type"] != "application/problem+json" || !strings.Contains(res.Body, says) {
			t.Errorf("%s: %d %v %s, %v; want a 400 problem+json response saying %q", fixture, res.StatusCode, res.Headers, res.Body, err, says)
		}
	}
}

// TestTrustedSourceIP: a Lambda behind CloudFront sees CloudFront as its
// sourceIp. Listed in trusted_proxies, it is not the client of everyone it
// forwards: each client, read from X-Forwarded-For (which API Gateway ends
// with the sourceIp), has its own quota, and the origin gets the chain
// without the sourceIp twice.
func TestTrustedSourceIP(t *testing.T) {
	var xff []string
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		xff = r.Header.Values("X-Forwarded-For")
	}))
	t.Cleanup(origin.Close)
	u, err := url.Parse(origin.URL)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse([]byte(`{
		"plans": {"free": {"limits": [{"name": "day", "limit": 3, "window": "24h"}]}},
		"identity": {"trusted_proxies": ["203.0.113.0/24"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 22, 12, 0, 7, 0, time.UTC)
	h, err := httpapi.New(httpapi.Options{Config: cfg, Next: httpapi.NewProxy(u, nil, cfg.Identity.Prefixes()), PeerIP: sourceIP,
		Now: func() time.Time { return now }, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	handle := Adapt(h)
	from := func(client string) events.LambdaFunctionURLResponse {
		ev := event(t, "httpapi-get.json") // sourceIp 203.0.113.7
		ev.Headers["x-forwarded-for"] = client + ", 203.0.113.7"
		res, err := handle(context.Background(), ev)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	for i := range 3 {
		if res := from("198.51.100.1"); res.StatusCode != http.StatusOK {
			t.Fatalf("request %d: %d %s", i+1, res.StatusCode, res.Body)
		}
	}
	if want := []string{"198.51.100.1, 203.0.113.7"}; !slices.Equal(xff, want) {
		t.Errorf("the origin got X-Forwarded-For %q, want %q", xff, want)
	}
	check429(t, from("198.51.100.1"))
	if res := from("198.51.100.2"); res.StatusCode != http.StatusOK {
		t.Errorf("another client behind the same proxy: %d, want 200 (counted as the proxy?)", res.StatusCode)
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

// TestResponsePayloadWithinLambdaLimit: the payload returned to Lambda, as
// the runtime encodes it (JSON and a newline), takes at most maxPayload
// bytes, or the answer is the adapter's 502. The bound is exact: an answer
// that takes maxPayload bytes goes back, one a byte larger is a 502. A
// body of control bytes, valid UTF-8, is 6 times larger as JSON text, so
// it goes as base64.
func TestResponsePayloadWithinLambdaLimit(t *testing.T) {
	ev := event(t, "functionurl-get.json")
	// What the answers below take besides their body, as the runtime
	// encodes them: the text answer of "x" takes one byte more.
	textRest := runtimeLen(t, events.LambdaFunctionURLResponse{StatusCode: 200, Headers: map[string]string{}, Body: "x"}, false) - 1
	base64Rest := runtimeLen(t, events.LambdaFunctionURLResponse{StatusCode: 200, Headers: map[string]string{}, Body: "xxxx", IsBase64Encoded: true}, false) - 4
	textMax := maxPayload - textRest               // text bytes that fit
	binaryMax := (maxPayload - base64Rest) / 4 * 3 // binary bytes that fit
	// A header of pad bytes makes a binary answer of over bytes take
	// exactly one byte too many, its encoder's newline.
	var pad, over int
	for pad = 1; ; pad++ {
		rest := runtimeLen(t, events.LambdaFunctionURLResponse{StatusCode: 200, Headers: map[string]string{"X-Big": strings.Repeat("a", pad)}, Body: "xxxx", IsBase64Encoded: true}, false) - 4
		if (maxPayload+1-rest)%4 == 0 {
			over = (maxPayload + 1 - rest) / 4 * 3
			break
		}
	}
	tests := []struct {
		name   string
		body   []byte
		header int // bytes of one extra response header
		status int
		base64 bool
		min    int // the payload, as the runtime encodes it, takes at least this
	}{
		{"text at the limit fits", bytes.Repeat([]byte{'x'}, textMax), 0, 200, false, maxPayload},
		{"text a byte over the limit is a 502", bytes.Repeat([]byte{'x'}, textMax+1), 0, 502, false, 0},
		{"escaped text at the limit fits", append(bytes.Repeat([]byte{'x'}, textMax-8), "\"\b\f\n"...), 0, 200, false, maxPayload},
		{"escaped text a byte over is a 502", append(bytes.Repeat([]byte{'x'}, textMax-7), "\"\b\f\n"...), 0, 502, false, 0},
		{"binary at the limit fits", bytes.Repeat([]byte{0xff}, binaryMax), 0, 200, true, maxPayload - 3},
		{"binary a byte over the limit is a 502", bytes.Repeat([]byte{0xff}, binaryMax+1), 0, 502, false, 0},
		{"binary at the limit but for the newline is a 502", bytes.Repeat([]byte{0xff}, over), pad, 502, false, 0},
		{"binary at the limit fits, with a header", bytes.Repeat([]byte{0xff}, over-3), pad, 200, true, maxPayload - 3},
		{"3 MiB of NUL goes as base64", bytes.Repeat([]byte{0}, 3<<20), 0, 200, true, 0},
		{"escaped text that fits stays text", bytes.Repeat([]byte{'\n'}, 1<<20), 0, 200, false, 0},
		{"900 kB of control bytes fits as text", bytes.Repeat([]byte{1}, 900_000), 0, 200, false, 0},
		{"HTML characters counted escaped", bytes.Repeat([]byte{'<'}, 1_100_000), 0, 200, true, 0},
		{"4 MiB binary with large headers", bytes.Repeat([]byte{0xff}, 4<<20), 500_000, 502, false, 0},
		{"4 MiB of NUL fits as base64", bytes.Repeat([]byte{0}, 4<<20), 0, 200, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := Adapt(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header()["Content-Type"] = nil // none: the sizes above have none
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
			if n := runtimeLen(t, res, false); n < tt.min {
				t.Errorf("payload %d bytes, want at least %d: the bound is not exact", n, tt.min)
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

// runtimeLen is the size of the payload the runtime of aws-lambda-go sends
// Lambda for res: its json.Encoder's output, HTML escaped if escapeHTML
// (lambda.WithSetEscapeHTML; off by default).
func runtimeLen(t *testing.T, res events.LambdaFunctionURLResponse, escapeHTML bool) int {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(escapeHTML)
	if err := enc.Encode(res); err != nil {
		t.Fatal(err)
	}
	return buf.Len()
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

// TestOriginTrailersAreNotFields: a Lambda answer has no trailer section,
// so the origin's trailer fields are dropped, as is its Trailer header,
// which would announce a section that never comes. ReverseProxy hands
// them over after the body under their names, or, when the origin sent
// one it had not announced, every one as "Trailer:" + name: the answer
// carried header names holding a colon, which no HTTP field name does.
func TestOriginTrailersAreNotFields(t *testing.T) {
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Trailer", "X-Checksum")
		_, _ = io.WriteString(w, "hello")
		w.Header().Set("X-Checksum", "abc")
		if r.URL.Query().Has("unannounced") {
			w.Header().Set(http.TrailerPrefix+"X-Extra", "late")
		}
	}))
	defer origin.Close()
	u, err := url.Parse(origin.URL)
	if err != nil {
		t.Fatal(err)
	}
	handle := Adapt(httpapi.NewProxy(u, slog.New(slog.DiscardHandler), nil))
	for _, query := range []string{"", "unannounced"} {
		t.Run("query "+query, func(t *testing.T) {
			ev := event(t, "functionurl-get.json")
			ev.RawQueryString = query
			res, err := handle(context.Background(), ev)
			if err != nil || res.StatusCode != http.StatusOK || res.Body != "hello" {
				t.Fatalf("got %d %q, %v; want 200 \"hello\"", res.StatusCode, res.Body, err)
			}
			for k := range res.Headers {
				if !fieldName(k) {
					t.Errorf("header name %q is not an HTTP field name (headers %v)", k, res.Headers)
				}
			}
			for _, k := range []string{"Trailer", "X-Checksum", "X-Extra"} {
				if v, ok := res.Headers[k]; ok {
					t.Errorf("header %s: %q; want none, the answer has no trailer section", k, v)
				}
			}
			if res.Headers["Content-Type"] != "text/plain" {
				t.Errorf("headers %v, want the origin's Content-Type", res.Headers)
			}
		})
	}
}

// fieldName reports whether k is an RFC 9110 token, as a field name is.
func fieldName(k string) bool {
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return k != ""
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
	h, err := httpapi.New(httpapi.Options{Config: cfg, Next: httpapi.NewProxy(u, nil, nil), PeerIP: sourceIP,
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
		// A Function URL gives a "+" of the query as a space, which as
		// such would split the origin's request line: "GET /hello?q=a
		// b HTTP/1.1" was the origin's 400 (Go's server: malformed HTTP
		// version), counted, and the origin's handler never ran.
		{name: "Function URL: a + the event gives as a space", ev: fnURL, edit: func(ev *events.APIGatewayV2HTTPRequest) {
			ev.RawQueryString = "q=rate limit&scope=openid profile&sig=ab c/d=="
		}, arrived: arrival{uri: "/hello?q=rate+limit&scope=openid+profile&sig=ab+c/d=="}, status: 200, body: page},
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
		// Every % in a decoded rawPath is a client's %25: the origin gets
		// it escaped, never a character it would stand for as an escape.
		{name: "HTTP API: client's %2541, %252e%252e, %252F, %2525", ev: httpAPI, edit: func(ev *events.APIGatewayV2HTTPRequest) {
			ev.RawPath, ev.RawQueryString = "/files/%41/%2e%2e/a%2Fb/100%25", ""
		}, arrived: arrival{uri: "/files/%2541/%252e%252e/a%252Fb/100%2525", cookie: "session=abc; theme=dark"}, status: 200, body: page},
		{name: "custom-domain HTTP API: decoded too", ev: httpAPI, edit: func(ev *events.APIGatewayV2HTTPRequest) {
			ev.RequestContext.DomainName, ev.Headers["host"], ev.RawPath, ev.RawQueryString = "api.example.com", "api.example.com", "/files/%41", ""
		}, arrived: arrival{uri: "/files/%2541", cookie: "session=abc; theme=dark"}, status: 200, body: page},
		{name: "Function URL: %2F stays encoded next to bytes Go escapes", ev: fnURL, edit: func(ev *events.APIGatewayV2HTTPRequest) { ev.RawPath = "/a%2Fb/{x}" },
			arrived: arrival{uri: "/a%2Fb/%7Bx%7D"}, status: 200, body: page},
		{name: "Function URL: %2F stays encoded next to | and ^", ev: fnURL, edit: func(ev *events.APIGatewayV2HTTPRequest) { ev.RawPath = "/files/a%2Fb|x^y" },
			arrived: arrival{uri: "/files/a%2Fb%7Cx%5Ey"}, status: 200, body: page},
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
			// A 502 that replaces the origin's answer keeps them too: the
			// request was counted.
			for _, k := range []string{"Ratelimit", "Ratelimit-Policy", "X-Ratelimit-Remaining"} {
				if res.Headers[k] == "" {
					t.Errorf("no %s on the answer: %v", k, res.Headers)
				}
			}
			if tt.status == 502 {
				if !strings.Contains(res.Body, tt.body) {
					t.Errorf("502 %s, want %q in it", res.Body, tt.body)
				}
				return
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
				body, tt.body = testenv.Gunzip(t, body), page
			}
			if string(body) != tt.body {
				t.Errorf("body of %d bytes, want %d bytes", len(body), len(tt.body))
			}
		})
	}
}

// Domain names of the events in the path tests.
const (
	fnURLDomain   = "abcdefghijklmnopqrstuvwxyz012345.lambda-url.eu-west-1.on.aws"
	httpAPIDomain = "abcdef1234.execute-api.eu-west-1.amazonaws.com"
)

// TestFunctionURLDomain: only a Function URL's own domain name marks an
// escaped rawPath; an HTTP API's, a custom domain's, none at all or a name
// that merely looks alike mark a decoded one.
func TestFunctionURLDomain(t *testing.T) {
	tests := []struct {
		domain string
		want   bool
	}{
		{fnURLDomain, true},
		{"ABCDEF.Lambda-Url.us-east-1.On.Aws.", true}, // DNS names ignore case and may end in a dot
		{httpAPIDomain, false},
		{"api.example.com", false},        // HTTP API custom domain
		{"lambda-url.example.com", false}, // a custom domain named alike
		{"x.lambda-url.eu-west-1.on.aws.example.com", false},
		{"x.lambda-url.on.aws", false},             // no region
		{".lambda-url.eu-west-1.on.aws", false},    // no URL id
		{"a.b.lambda-url.eu-west-1.on.aws", false}, // not the Function URL format
		{"x.lambda-url.eu.west-1.on.aws", false},
		{"service-0123.7d67968.vpc-lattice-svcs.eu-west-1.on.aws", false},
		{"", false},
	}
	for _, tt := range tests {
		t.Run(tt.domain, func(t *testing.T) {
			if got := functionURL(tt.domain); got != tt.want {
				t.Errorf("functionURL(%q) = %v, want %v", tt.domain, got, tt.want)
			}
		})
	}
}

// escapePathCases: rawPath as a Function URL (escaped) or an HTTP API
// (decoded) sends it, and the escaped path the request gets.
var escapePathCases = []struct {
	name    string
	in      string
	decoded bool
	want    string
}{
	{"plain", "/hello", false, "/hello"},
	{"plain, decoded", "/hello", true, "/hello"},
	{"escapes kept", "/a%2Fb/%C3%A9/%7e", false, "/a%2Fb/%C3%A9/%7e"},
	{"sub-delims, : @ [ ] stay", "/a(b)!$&'*+,;=:@[x]~", true, "/a(b)!$&'*+,;=:@[x]~"},
	{"sub-delims, : @ [ ] stay, escaped", "/a(b)!$&'*+,;=:@[x]~", false, "/a(b)!$&'*+,;=:@[x]~"},
	{"? escaped", "/what?.txt", true, "/what%3F.txt"},
	{"# escaped", "/notes/#1", true, "/notes/%231"},
	{"? and # escaped in an escaped path", "/a?b#c", false, "/a%3Fb%23c"},
	{"stray %", "/100%", false, "/100%25"},
	{"stray % before non-hex", "/%zz/%4", false, "/%25zz/%254"},
	{"space, UTF-8, controls", "/a b/é/\x00\x7f", true, "/a%20b/%C3%A9/%00%7F"},
	{"space, UTF-8, controls, escaped", "/a b/é/\x00\x7f", false, "/a%20b/%C3%A9/%00%7F"},
	{"bytes Go would escape itself", `/{x}|^"<>\` + "`", false, "/%7Bx%7D%7C%5E%22%3C%3E%5C%60"},
	// An HTTP API's % is a client's %25 (or %2525): a character, never an escape.
	{"client's %2541", "/files/%41", true, "/files/%2541"},
	{"client's %252e%252e", "/files/%2e%2e/secret", true, "/files/%252e%252e/secret"},
	{"client's %252F", "/files/a%2Fb", true, "/files/a%252Fb"},
	{"client's %2525", "/100%25", true, "/100%2525"},
	{"lone %", "/100%", true, "/100%25"},
	{"% ? # together", "/a%3F?b#%23", true, "/a%253F%3Fb%23%2523"},
	{"empty", "", false, ""},
}

func TestEscapePath(t *testing.T) {
	for _, tt := range escapePathCases {
		t.Run(tt.name, func(t *testing.T) {
			if got := httpapi.EscapePath(tt.in, tt.decoded); got != tt.want {
				t.Errorf("httpapi.EscapePath(%q, decoded=%v) = %q, want %q", tt.in, tt.decoded, got, tt.want)
			}
		})
	}
}

// TestRequestPath: the path the handler gets, per event source. The
// domain name decides: a Function URL's keeps its escapes, every other
// event's rawPath is decoded. requestContext.http.path, used when rawPath
// is missing, is decoded for both.
func TestRequestPath(t *testing.T) {
	tests := []struct {
		name, domain, rawPath, httpPath string
		wantURI, wantPath               string // RequestURI (what reaches the origin), URL.Path
	}{
		{"Function URL keeps %2F", fnURLDomain, "/files/a%2Fb", "/files/a/b", "/files/a%2Fb", "/files/a/b"},
		{"Function URL keeps %2541", fnURLDomain, "/files/%2541", "/files/%41", "/files/%2541", "/files/%41"},
		{"Function URL with { } keeps %2F", fnURLDomain, "/a%2Fb/{x}", "/a/b/{x}", "/a%2Fb/%7Bx%7D", "/a/b/{x}"},
		{"HTTP API client's %2541", httpAPIDomain, "/files/%41", "/files/%41", "/files/%2541", "/files/%41"},
		{"HTTP API client's %252e%252e", httpAPIDomain, "/files/%2e%2e/x", "/files/%2e%2e/x", "/files/%252e%252e/x", "/files/%2e%2e/x"},
		{"HTTP API client's %252F", httpAPIDomain, "/files/a%2Fb", "/files/a%2Fb", "/files/a%252Fb", "/files/a%2Fb"},
		{"HTTP API client's %2525", httpAPIDomain, "/100%25", "/100%25", "/100%2525", "/100%25"},
		{"HTTP API ? and #", httpAPIDomain, "/a?b#c", "/a?b#c", "/a%3Fb%23c", "/a?b#c"},
		{"custom domain HTTP API", "api.example.com", "/files/%41", "/files/%41", "/files/%2541", "/files/%41"},
		{"no domain name: decoded", "", "/files/%41", "/files/%41", "/files/%2541", "/files/%41"},
		{"Function URL without rawPath: http.path is decoded", fnURLDomain, "", "/files/%41", "/files/%2541", "/files/%41"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := event(t, "httpapi-get.json")
			ev.RequestContext.DomainName, ev.RawPath, ev.RequestContext.HTTP.Path, ev.RawQueryString = tt.domain, tt.rawPath, tt.httpPath, "q=1"
			r, err := request(context.Background(), &ev)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := r.RequestURI, tt.wantURI+"?q=1"; got != want {
				t.Errorf("RequestURI %q, want %q", got, want)
			}
			if r.URL.Path != tt.wantPath || r.URL.RawQuery != "q=1" || r.URL.Fragment != "" {
				t.Errorf("URL path %q, query %q, fragment %q; want %q, q=1, none", r.URL.Path, r.URL.RawQuery, r.URL.Fragment, tt.wantPath)
			}
		})
	}
	// A "#" in the query is the client's data, not a fragment.
	ev := event(t, "httpapi-get.json")
	ev.RawQueryString = "x=1#frag&admin=1"
	r, err := request(context.Background(), &ev)
	if err != nil {
		t.Fatal(err)
	}
	if r.URL.RawQuery != "x=1%23frag&admin=1" || r.URL.Fragment != "" || r.URL.Query().Get("admin") != "1" {
		t.Errorf("query %q, fragment %q; want x=1%%23frag&admin=1 and none", r.URL.RawQuery, r.URL.Fragment)
	}
	// Without a domain name the Host header names the host; it cannot
	// carry a path, query or user.
	for _, host := range []string{"origin.example/admin?", "a@b.example", "b.example#x"} {
		for _, field := range []string{"requestContext.domainName", "headers.host"} {
			ev := event(t, "httpapi-get.json")
			ev.RequestContext.DomainName, ev.Headers["host"] = host, "ok.example"
			if field == "headers.host" {
				ev.RequestContext.DomainName, ev.Headers["host"] = "", host
			}
			res, _ := Adapt(http.NotFoundHandler())(context.Background(), ev)
			if res.StatusCode != http.StatusBadRequest || !strings.Contains(res.Body, field) {
				t.Errorf("%s %q: %d %s, want a 400 naming %s", field, host, res.StatusCode, res.Body, field)
			}
		}
	}
	// A path without its leading / would run into the host name.
	for _, bad := range []struct{ rawPath, httpPath, field string }{
		{"evil.example/x", "/x", "rawPath"},
		{"", "evil.example/x", "requestContext.http.path"},
	} {
		ev := event(t, "httpapi-get.json")
		ev.RawPath, ev.RequestContext.HTTP.Path = bad.rawPath, bad.httpPath
		res, _ := Adapt(http.NotFoundHandler())(context.Background(), ev)
		if res.StatusCode != http.StatusBadRequest || !strings.Contains(res.Body, bad.field+` \"evil.example/x\"`) {
			t.Errorf("%s evil.example/x: %d %s, want a 400 naming %s", bad.field, res.StatusCode, res.Body, bad.field)
		}
	}
}

// lenientUnescape is what an escaped rawPath stands for: every %XX the
// byte it escapes, every other byte itself.
func lenientUnescape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil { // no sign, no prefix in base 16
				b.WriteByte(byte(n))
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// FuzzEscapePath: for either event source, the request's path is what the
// client sent: a decoded rawPath (HTTP API) exactly, '%' included, and an
// escaped one (Function URL) unescaped, stray '%' included as a character.
// No query or fragment is split off, and the origin gets the same escaped
// path (RequestURI) that parses back to it. Escaping the result again, as
// an escaped path, changes nothing.
func FuzzEscapePath(f *testing.F) {
	for _, tt := range escapePathCases {
		f.Add(tt.in, tt.decoded)
	}
	f.Fuzz(func(t *testing.T, p string, decoded bool) {
		ev := events.APIGatewayV2HTTPRequest{RawPath: p}
		ev.RequestContext.HTTP.Method = "GET"
		ev.RequestContext.DomainName = fnURLDomain
		want := lenientUnescape(p)
		if decoded {
			ev.RequestContext.DomainName, want = httpAPIDomain, p
		}
		if p == "" {
			want = "/"
		}
		r, err := request(context.Background(), &ev)
		if p != "" && p[0] != '/' {
			if err == nil {
				t.Fatalf("rawPath %q: no error", p)
			}
			return
		}
		if err != nil {
			t.Fatalf("rawPath %q: %v", p, err)
		}
		if r.URL.Path != want || r.URL.RawQuery != "" || r.URL.Fragment != "" {
			t.Fatalf("rawPath %q (decoded=%v): URL path %q, query %q, fragment %q; want the path %q alone", p, decoded, r.URL.Path, r.URL.RawQuery, r.URL.Fragment, want)
		}
		u, err := url.ParseRequestURI(r.RequestURI)
		if err != nil || u.Path != want || u.RawQuery != "" {
			t.Fatalf("rawPath %q (decoded=%v): RequestURI %q parses as %v, %v; want the path %q", p, decoded, r.RequestURI, u, err, want)
		}
		if e := httpapi.EscapePath(p, decoded); httpapi.EscapePath(e, false) != e || r.RequestURI != e && p != "" {
			t.Errorf("rawPath %q (decoded=%v): escaped %q, again %q, RequestURI %q", p, decoded, e, httpapi.EscapePath(e, false), r.RequestURI)
		}
	})
}

// TestSlowOriginBeforeInvocationTimeout: an origin that has not answered
// when the invocation is about to time out gets the pre-filter's 504, with
// the rate-limit headers, returned before the invocation's deadline. At
// the deadline itself Lambda ends the invocation instead: the client got
// an error from AWS without the headers, and Lambda restarted the
// instance, which lost its local-scope counts and its caches.
func TestSlowOriginBeforeInvocationTimeout(t *testing.T) {
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // answers nobody in time
	}))
	t.Cleanup(origin.Close)
	u, err := url.Parse(origin.URL)
	if err != nil {
		t.Fatal(err)
	}
	h, err := httpapi.New(httpapi.Options{Config: config.Default(), Next: httpapi.NewProxy(u, nil, nil), PeerIP: sourceIP,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	// The invocation's context as aws-lambda-go makes it: its deadline is
	// the function's Timeout from now.
	ctx, cancel := context.WithTimeout(context.Background(), reserve+time.Second)
	defer cancel()
	res, err := Adapt(h)(ctx, event(t, "functionurl-get.json"))
	if ctx.Err() != nil {
		t.Errorf("answered after the invocation's deadline: %v", ctx.Err())
	}
	if err != nil || res.StatusCode != http.StatusGatewayTimeout {
		t.Errorf("answer %d, %v; want 504", res.StatusCode, err)
	}
	for _, k := range []string{"Ratelimit", "Ratelimit-Policy", "X-Ratelimit-Remaining"} {
		if res.Headers[k] == "" {
			t.Errorf("the 504 lacks %s: %v", k, res.Headers)
		}
	}
}

// TestHandlerDeadline: the handler's request ends reserve before the
// invocation, or halfway to it when less than twice reserve is left.
func TestHandlerDeadline(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		left, want time.Duration
	}{
		{10 * time.Second, 10*time.Second - reserve},
		{2 * reserve, reserve},
		{reserve, reserve / 2},
		{0, 0},
		{-time.Second, -time.Second / 2},
	}
	for _, tt := range tests {
		t.Run(tt.left.String(), func(t *testing.T) {
			if got := handlerDeadline(now, now.Add(tt.left)); !got.Equal(now.Add(tt.want)) {
				t.Errorf("handlerDeadline(now, now+%s) = now+%s, want now+%s", tt.left, got.Sub(now), tt.want)
			}
		})
	}
}

// TestBadGatewaysAreLogged: a 502 the adapter answers in place of the
// origin's response leaves an ERROR line, as an origin that failed before
// it answered does (README, Logs): the client sees only the 502, and
// without the line the operator would see nothing at all.
func TestBadGatewaysAreLogged(t *testing.T) {
	ev := event(t, "functionurl-get.json")
	binary := bytes.Repeat([]byte{0xff}, 4_600_000) // fits as bytes, not as base64
	tests := []struct {
		name   string
		h      http.HandlerFunc
		status int
		line   string // "" when no ERROR line is wanted
	}{
		{"cut short", func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, "the first half")
			panic(http.ErrAbortHandler)
		}, 502, "the response was cut short"},
		{"too large as text", func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write(bytes.Repeat([]byte("x"), maxPayload+1))
		}, 502, "the response is too large for AWS Lambda"},
		{"too large as base64", func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write(binary)
		}, 502, "the response is too large for AWS Lambda"},
		{"served", func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write(binary[:1000])
		}, 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logs := defaultLogs(t)
			res, err := Adapt(tt.h)(context.Background(), ev)
			if err != nil || res.StatusCode != tt.status {
				t.Fatalf("got %d, %v; want %d", res.StatusCode, err, tt.status)
			}
			var lines []map[string]any
			for l := range strings.Lines(logs.String()) {
				var m map[string]any
				if err := json.Unmarshal([]byte(l), &m); err != nil {
					t.Fatalf("log line %q: %v", l, err)
				}
				lines = append(lines, m)
			}
			if tt.line == "" {
				if len(lines) != 0 {
					t.Errorf("logged %v, want nothing", lines)
				}
				return
			}
			if len(lines) != 1 || lines[0]["level"] != "ERROR" || lines[0]["error"] != tt.line ||
				lines[0]["status"] != float64(502) || lines[0]["method"] != "GET" || lines[0]["path"] == nil {
				t.Errorf("logged %v, want one ERROR line with error %q, status 502, method and path", lines, tt.line)
			}
		})
	}
	t.Run("long path", func(t *testing.T) {
		// As httpapi's lines: a client's path is cut at 512 bytes.
		logs := defaultLogs(t)
		long := event(t, "functionurl-get.json")
		long.RawPath = "/" + strings.Repeat("p", 4000)
		if _, err := Adapt(tests[0].h)(context.Background(), long); err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(logs.Bytes(), &m); err != nil {
			t.Fatalf("log %q: %v", logs.String(), err)
		}
		if p, _ := m["path"].(string); p != long.RawPath[:512]+"…" {
			t.Errorf("path of %d bytes logged, want the first 512 and …", len(p))
		}
	})
}

// defaultLogs sends the default slog logger's lines, as JSON, to the buffer
// it returns until the test ends. Restoring slog's default alone leaves the
// log package writing to the test's buffer (slog.SetDefault redirects it,
// and setting the default back does not), so its output and flags are put
// back too.
func defaultLogs(t *testing.T) *bytes.Buffer {
	t.Helper()
	logger, out, flags := slog.Default(), log.Writer(), log.Flags()
	t.Cleanup(func() {
		slog.SetDefault(logger)
		log.SetOutput(out)
		log.SetFlags(flags)
	})
	var logs bytes.Buffer
	slog.SetDefault(slog.New(slog.NewJSONHandler(&logs, nil)))
	return &logs
}
