package httpapi

import (
	"cmp"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/slidegate/slidegate/internal/testenv"
)

// TestProxyErrorLog: an origin that cuts its response body short, of its
// Content-Length or in a chunk, makes the proxy complain in a JSON line of
// the given logger at level WARN, not a plain line on the standard logger,
// and the client cannot take the part it got for the whole answer: the
// request or the reading of the body fails.
func TestProxyErrorLog(t *testing.T) {
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		head := "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n"
		if r.URL.Query().Has("chunked") {
			head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n"
		}
		_, _ = buf.WriteString(head + "short")
		_ = buf.Flush()
	}))
	defer origin.Close()
	u, err := url.Parse(origin.URL)
	if err != nil {
		t.Fatal(err)
	}
	var logs testenv.Buffer
	front := httptest.NewServer(NewProxy(u, slog.New(slog.NewJSONHandler(&logs, nil)), nil))
	defer front.Close()

	for _, query := range []string{"", "?chunked"} {
		res, err := front.Client().Get(front.URL + "/v1/items" + query)
		if err != nil {
			continue // the connection closed before the headers went out
		}
		b, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err == nil {
			t.Errorf("%q: the client read %q as a complete answer", query, b)
		}
	}
	var found int
	for _, line := range strings.Split(logs.String(), "\n") {
		if line == "" {
			continue
		}
		var rec struct{ Level, Msg string }
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q is not JSON: %v", line, err)
		}
		if rec.Level == "WARN" && strings.Contains(rec.Msg, "read error during body copy") {
			found++
		}
	}
	if found != 2 {
		t.Errorf("%d WARN lines about the cut body, want 2: %q", found, logs.String())
	}
}

// TestProxyForwardedHeaders: the origin gets the X-Forwarded-For and
// Forwarded chains a trusted proxy sent with the proxy appended (in
// Forwarded an IPv6 address is bracketed and quoted, RFC 7239 6, and an
// obfuscated identifier goes on as sent), and its X-Forwarded-Proto and
// -Host; from any other peer, only what slidegate saw itself.
func TestProxyForwardedHeaders(t *testing.T) {
	var got http.Header
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
	}))
	defer origin.Close()
	u, err := url.Parse(origin.URL)
	if err != nil {
		t.Fatal(err)
	}
	p := NewProxy(u, nil, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8::/32")})
	const fwd = `for="[2001:db8:cafe::17]";proto=https, for=_hidden`
	for _, tc := range []struct {
		peer, in               string // in: the X-Forwarded-For sent; empty means 203.0.113.7
		xff, fwd, proto, fhost string
	}{
		// trusted balancers
		{"10.0.0.1:5000", "", "203.0.113.7, 10.0.0.1", fwd + "|for=10.0.0.1", "https", "api.example.com"},
		{"[2001:db8::5]:5000", "", "203.0.113.7, 2001:db8::5", fwd + `|for="[2001:db8::5]"`, "https", "api.example.com"},
		// ... that wrote their peer's address already (API Gateway's
		// sourceIp, for the Lambda): not twice
		{"10.0.0.1:5000", "203.0.113.7, 10.0.0.1", "203.0.113.7, 10.0.0.1", fwd + "|for=10.0.0.1", "https", "api.example.com"},
		{"[2001:db8::5]:5000", "203.0.113.7,2001:DB8:0::5", "203.0.113.7,2001:DB8:0::5", fwd + `|for="[2001:db8::5]"`, "https", "api.example.com"},
		// a client forging them
		{"198.51.100.9:5000", "", "198.51.100.9", "", "http", "slidegate.test"},
		{"[2001:db9::9]:5000", "", "2001:db9::9", "", "http", "slidegate.test"},
		{"198.51.100.9:5000", "198.51.100.9", "198.51.100.9", "", "http", "slidegate.test"},
	} {
		r := httptest.NewRequest("GET", "http://slidegate.test/v1/items", nil)
		r.RemoteAddr = tc.peer
		r.Header.Set("X-Forwarded-For", cmp.Or(tc.in, "203.0.113.7"))
		r.Header.Set("X-Forwarded-Proto", "https")
		r.Header.Set("X-Forwarded-Host", "api.example.com")
		r.Header.Set("Forwarded", fwd)
		w := httptest.NewRecorder()
		p.ServeHTTP(w, r)
		if w.Code != 200 {
			t.Fatalf("%s: status %d", tc.peer, w.Code)
		}
		for k, want := range map[string]string{"X-Forwarded-For": tc.xff, "Forwarded": tc.fwd, "X-Forwarded-Proto": tc.proto, "X-Forwarded-Host": tc.fhost} {
			if v := strings.Join(got.Values(k), "|"); v != want {
				t.Errorf("peer %s: origin got %s %q, want %q", tc.peer, k, v, want)
			}
		}
	}
}

// arrival is what the origin saw of one request.
type arrival struct {
	method, uri, cookie, acceptEncoding, body string
}

// passOrigin answers by path, as an origin would, and records each
// request as it arrived.
func passOrigin(t *testing.T, page string, got *arrival) *httptest.Server {
	t.Helper()
	zipped := testenv.Gzip(page)
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		*got = arrival{r.Method, r.RequestURI, strings.Join(r.Header.Values("Cookie"), "|"), r.Header.Get("Accept-Encoding"), string(b)}
		h := w.Header()
		switch r.URL.Path {
		case "/cookies":
			h.Add("Set-Cookie", "a=1; Path=/; HttpOnly")
			h.Add("Set-Cookie", "b=2; Expires=Wed, 21 Oct 2026 07:28:00 GMT")
			h.Add("Vary", "Accept")
			h.Add("Vary", "Origin")
		case "/gzip": // compressed whatever the client asked for
			h.Set("Content-Type", "text/plain")
			h.Set("Content-Encoding", "gzip")
			h.Set("Content-Length", strconv.Itoa(len(zipped)))
			_, _ = w.Write(zipped)
			return
		case "/moved":
			h.Set("Location", "/elsewhere?x=1")
			w.WriteHeader(http.StatusMovedPermanently)
			return
		case "/found":
			h.Set("Location", "https://other.example/next")
			w.WriteHeader(http.StatusFound)
			return
		case "/empty":
			w.WriteHeader(http.StatusNoContent)
			return
		case "/cached":
			h.Set("ETag", `"v1"`)
			if r.Header.Get("If-None-Match") == `"v1"` {
				w.WriteHeader(http.StatusNotModified)
				return
			}
		}
		h.Set("Content-Type", "text/plain")
		h.Set("Content-Length", strconv.Itoa(len(page)))
		if r.Method != http.MethodHead {
			_, _ = io.WriteString(w, page)
		}
	}))
	t.Cleanup(origin.Close)
	return origin
}

// TestProxyPassesThrough: behind the pre-filter, the local server's proxy
// hands the origin the request as the client sent it (path, query,
// cookies, body) and the client the answer as the origin sent it: every
// Set-Cookie, redirects not followed, 204 and 304 bodiless, a compressed
// body decodable whether or not the client asked for gzip, a
// Content-Length that matches the body, and the rate-limit headers.
func TestProxyPassesThrough(t *testing.T) {
	page := strings.Repeat("the origin's page. ", 200)
	var got arrival
	origin := passOrigin(t, page, &got)
	u, err := url.Parse(origin.URL)
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, func(m map[string]any) {
		m["plans"].(map[string]any)["free"] = map[string]any{"limits": []any{map[string]any{"name": "minute", "limit": 1000, "window": "1m"}}}
	})
	f := newFixture(t, cfg, func(o *Options) { o.Next = NewProxy(u, nil, nil) })
	front := httptest.NewServer(f.h)
	t.Cleanup(front.Close)
	tr := &http.Transport{DisableCompression: true} // the test sees the bytes on the wire
	t.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	tests := []struct {
		name, method, target string
		header               map[string]string
		body                 string
		arrived              arrival // what the origin must see; method is the request's, uri defaults to target
		status               int
		headers              map[string]string // "|" joins a header's values
		gzip                 bool              // the client gets the gzip bytes, Content-Encoding: gzip
		wantBody             string
	}{
		{name: "several Set-Cookie", target: "/cookies", status: 200,
			headers:  map[string]string{"Set-Cookie": "a=1; Path=/; HttpOnly|b=2; Expires=Wed, 21 Oct 2026 07:28:00 GMT", "Vary": "Accept|Origin"},
			wantBody: page},
		{name: "request cookies", target: "/page", header: map[string]string{"Cookie": "session=abc; theme=dark"},
			arrived: arrival{cookie: "session=abc; theme=dark"}, status: 200, wantBody: page},
		{name: "gzip, client accepts it", target: "/gzip", header: map[string]string{"Accept-Encoding": "gzip"},
			arrived: arrival{acceptEncoding: "gzip"}, status: 200, gzip: true, wantBody: page},
		{name: "gzip, client sent no Accept-Encoding", target: "/gzip", status: 200, gzip: true, wantBody: page},
		{name: "gzip, client asked for identity", target: "/gzip", header: map[string]string{"Accept-Encoding": "identity"},
			arrived: arrival{acceptEncoding: "identity"}, status: 200, gzip: true, wantBody: page},
		{name: "301 not followed", target: "/moved", status: 301, headers: map[string]string{"Location": "/elsewhere?x=1"}},
		{name: "302 to another host not followed", target: "/found", status: 302, headers: map[string]string{"Location": "https://other.example/next"}},
		{name: "204", target: "/empty", status: 204, wantBody: ""},
		{name: "304", target: "/cached", header: map[string]string{"If-None-Match": `"v1"`}, status: 304,
			headers: map[string]string{"ETag": `"v1"`}, wantBody: ""},
		{name: "HEAD", method: "HEAD", target: "/page", status: 200,
			headers: map[string]string{"Content-Length": strconv.Itoa(len(page))}, wantBody: ""},
		{name: "encoded and repeated query", target: "/search?q=a%2Bb%20c&tag=x&tag=y&empty=&plus=a+b&utf=%C3%A9", status: 200, wantBody: page},
		{name: "query parameters Go cannot parse are dropped", target: "/search?a=1;b=2&q=100%&c=3", status: 200,
			arrived: arrival{uri: "/search?c=3"}, wantBody: page},
		{name: "%2F in the path", target: "/files/a%2Fb/c%20d", status: 200, wantBody: page},
		{name: "POST body", method: "POST", target: "/upload", body: "\x00\x01binary\xff", status: 200,
			arrived: arrival{body: "\x00\x01binary\xff"}, wantBody: page},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.method == "" {
				tt.method = "GET"
			}
			r, err := http.NewRequest(tt.method, front.URL+tt.target, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tt.header {
				r.Header.Set(k, v)
			}
			got = arrival{}
			res, err := client.Do(r)
			if err != nil {
				t.Fatal(err)
			}
			raw, err := io.ReadAll(res.Body)
			res.Body.Close()
			if err != nil {
				t.Fatalf("reading the answer (%d bytes so far): %v", len(raw), err)
			}
			want := tt.arrived
			want.method = tt.method
			if want.uri == "" {
				want.uri = tt.target
			}
			if got != want {
				t.Errorf("origin saw %+v, want %+v", got, want)
			}
			if res.StatusCode != tt.status {
				t.Fatalf("status %d, want %d", res.StatusCode, tt.status)
			}
			for k, v := range tt.headers {
				if g := strings.Join(res.Header.Values(k), "|"); g != v {
					t.Errorf("%s %q, want %q", k, g, v)
				}
			}
			for _, k := range []string{"RateLimit", "RateLimit-Policy", "X-RateLimit-Remaining"} {
				if res.Header.Get(k) == "" {
					t.Errorf("no %s on the proxied answer: %v", k, res.Header)
				}
			}
			if cl := res.Header.Get("Content-Length"); cl != "" && tt.method != "HEAD" && cl != strconv.Itoa(len(raw)) {
				t.Errorf("Content-Length %s, body %d bytes", cl, len(raw))
			}
			body := raw
			if enc := res.Header.Get("Content-Encoding"); (enc == "gzip") != tt.gzip {
				t.Fatalf("Content-Encoding %q, want gzip %v", enc, tt.gzip)
			}
			if tt.gzip {
				body = testenv.Gunzip(t, raw)
			}
			if string(body) != tt.wantBody {
				t.Errorf("body of %d bytes, want %d bytes", len(body), len(tt.wantBody))
			}
		})
	}
}

// TestProxyRefusesH2CUpgrade: a request asking to upgrade to cleartext
// HTTP/2 reaches the origin as a plain request. An origin that took the
// upgrade would then serve any number of HTTP/2 requests over the
// connection, counted here as one (h2c smuggling); WebSocket upgrades go on.
func TestProxyRefusesH2CUpgrade(t *testing.T) {
	got := make(chan http.Header, 1)
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
	}))
	t.Cleanup(origin.Close)
	u, err := url.Parse(origin.URL)
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(NewProxy(u, nil, nil))
	t.Cleanup(front.Close)
	for _, tt := range []struct {
		upgrade, want string
	}{
		{"h2c", ""},
		{"H2C", ""},
		{"foo, h2c", ""},
		{"websocket", "websocket"},
	} {
		t.Run(tt.upgrade, func(t *testing.T) {
			r, err := http.NewRequest(http.MethodGet, front.URL+"/x", nil)
			if err != nil {
				t.Fatal(err)
			}
			r.Header.Set("Connection", "Upgrade, HTTP2-Settings")
			r.Header.Set("Upgrade", tt.upgrade)
			r.Header.Set("HTTP2-Settings", "AAMAAABkAAQAoAAAAAIAAAAA")
			res, err := http.DefaultClient.Do(r)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			h := <-got
			if g := h.Get("Upgrade"); g != tt.want {
				t.Errorf("the origin got Upgrade %q, want %q", g, tt.want)
			}
			if tt.want == "" && (h.Get("Connection") != "" || h.Get("HTTP2-Settings") != "") {
				t.Errorf("the origin got Connection %q, HTTP2-Settings %q", h.Get("Connection"), h.Get("HTTP2-Settings"))
			}
		})
	}
}

// TestParseOriginHidesPassword: ParseOrigin's error never shows the
// password or the query of the URL it refuses, also when the URL does not
// parse. The
// error goes to the Worker's log, serve's standard error and the Lambda's
// init error; the password was shown whole whenever url.Parse failed (a
// bad escape, a bad port, a space), since Redacted needs a parsed URL
// (found by review).
func TestParseOriginHidesPassword(t *testing.T) {
	for _, s := range []string{
		"https://svc:originSECRET%zz@origin.example",
		"https://svc:originSECRET@origin.example:99x",
		"https://svc:origin SECRET@origin.example",
		"https://svc:originSECRET@origin.example/%zz",
		"https://svc:originSECRET@origin.example?%zz",
		"//svc:originSECRET@origin.example:99x",
		"svc:originSECRET@origin.example:99x",
		"https://svc:originSECRET@origin.example", // parsed: user info refused
		"ftp://svc:originSECRET@origin.example",
		// A password holding "/", "?" or "#" (base64 holds "/"); a query
		// may hold a token (found by a second review).
		"https://svc:origin/SECRET@origin.example/",
		"https://svc:origin#SECRET@origin.example/",
		"https://svc:origin?SECRET@origin.example/",
		"https://origin.example:0/?token=originSECRET",
		"https://origin.example/%zz?token=originSECRET",
		"ftp://origin.example/?token=originSECRET",
		// An "@" in the query (found by a third review), or in a
		// password of a URL without "//".
		"https://origin.example:0/?contact=ops@corp.example&token=originSECRET",
		"https://origin.example:0/#ops@corp.example&token=originSECRET",
		"ftp://origin.example/?to=ops@corp.example&key=originSECRET",
		"svc:origin//SECRET@origin.example",
		"svc:originSECRET@origin.example:0",
		// A password Go parses as a port and a path (found by a fifth
		// review).
		"https://svc:0/originSECRET@origin.example/",
		"http://svc:70000/originSECRET@origin.example",
		"ftp://svc:2024/originSECRET@origin.example",
		"ftp://svc:/originSECRET@origin.example",
		// ... and its digits as the port (found by a sixth review); a
		// URL that Go accepts with the password in its path is refused.
		"https://deploy:98765SECRET/x@origin.example",
		"https://deploy:9876543/SECRET@origin.example",
		"https://deploy:4242/SECRET@origin.example",
		"https://deploy:4242?SECRET@origin.example",
		// User info Go reads as the host (found by an eighth review).
		"https://originSECRET/x@origin.example",
		"https://originSECRET?x@origin.example",
		"https://originSECRET#x@origin.example",
		"https://SECRETuser:4242/pw@origin.example",
	} {
		t.Run(s, func(t *testing.T) {
			_, err := ParseOrigin(s)
			if err == nil {
				t.Fatal("accepted")
			}
			if strings.Contains(err.Error(), "SECRET") {
				t.Errorf("the error shows the password: %v", err)
			}
		})
	}
}

// TestParseOriginRefusesSpace: "http://127.0.0.1:8081/ " (a space left at
// the end, as from an env file) parsed, and every request went to
// "/%20/v1/items" and got the origin's 404. White space where url.Parse
// refuses it (after a host or a port, as "http://127.0.0.1:8081 " from
// an env file; before the scheme; a carriage return from a file saved with
// CRLF) was refused as "must be an absolute http or https URL with a
// host", which the URL is; it is named too, and a password stays hidden.
func TestParseOriginRefusesSpace(t *testing.T) {
	for _, s := range []string{
		"http://127.0.0.1:8081/ ",
		"https://origin.example/api ",
		"https://origin.example/a b",
		"https://origin.example/?q= ",
		"http://127.0.0.1:8081 ",
		"https://origin.example ",
		"http://127.0.0.1:8081\t",
		" https://origin.example",
		"https://origin.example/\r",
		"https://origin.example\r\n",
		"https://origin.example/\n", // a YAML block scalar's last line break
		"https://origin.example\v",
		"https://origin.example\f",
		// Pasted from a page or a chat: a no-break space, an ideographic
		// one, a line separator (the path went to /api%C2%A0/...).
		"https://origin.example/api\u00a0",
		"https://origin.example\u00a0",
		"https://origin.example/a\u3000b",
		"https://origin.example/\u2028",
		"https://deploy:SECRET\u00a0@origin.example",
		"https://deploy:SECRET @origin.example",
		"https://deploy:4242/SECRET @origin.example",
	} {
		u, err := ParseOrigin(s)
		if err == nil || !strings.Contains(err.Error(), "white space") {
			t.Errorf("ParseOrigin(%q) = %v, %v; want the white space named", s, u, err)
		}
		if err != nil && strings.Contains(err.Error(), "SECRET") {
			t.Errorf("ParseOrigin(%q): the error shows the password: %v", s, err)
		}
	}
}

// TestParseOriginRefusesInvisible: a character that shows as nothing (a
// format character: zero-width space, which pages put in long URLs so that
// they wrap; a byte order mark from a file saved by a Windows editor; a
// soft hyphen; a bidi control) was taken as b5bfae7 took a no-break space:
// after the path every request went to /v1%E2%80%8B/... and got the
// origin's 404, after the host into the host name (a 502 for every
// request). It is named, as its \u escape, and a password stays hidden.
func TestParseOriginRefusesInvisible(t *testing.T) {
	for _, tt := range []struct{ in, named string }{
		{"https://api.example.com/v1\u200b", `\u200b`},
		{"https://api.example.com\u200b", `\u200b`},
		{"https://api.exa\u200bmple.com/", `\u200b`},
		{"\ufeffhttps://api.example.com", `\ufeff`},
		{"https://api.example.com/v1\u00ad", `\u00ad`},
		{"https://api.example.com/\u2060", `\u2060`},
		{"https://api.example.com/\u202e", `\u202e`},
		{"https://api.example.com/?q=\u200d", `\u200d`},
		{"https://deploy:SECRET\u200b@origin.example", `\u200b`},
	} {
		u, err := ParseOrigin(tt.in)
		if err == nil || !strings.Contains(err.Error(), "invisible") || !strings.Contains(err.Error(), tt.named) {
			t.Errorf("ParseOrigin(%q) = %v, %v; want the invisible %s named", tt.in, u, err, tt.named)
		}
		if err != nil && strings.Contains(err.Error(), "SECRET") {
			t.Errorf("ParseOrigin(%q): the error shows the password: %v", tt.in, err)
		}
	}
	// Non-ASCII that shows stays: an IDN host, a path in another script.
	for _, s := range []string{"https://bücher.example/", "https://api.example.com/café", "https://例え.jp/パス"} {
		if _, err := ParseOrigin(s); err != nil {
			t.Errorf("ParseOrigin(%q) = %v, want it taken", s, err)
		}
	}
}

// TestParseOriginPortHidesPasswordDigits: a password that starts with
// digits and holds "/", "?" or "#" is parsed by Go as a port and a path,
// a query or a fragment; the port error quoted the port, the digits of the
// password (found by a sixth review).
func TestParseOriginPortHidesPasswordDigits(t *testing.T) {
	for _, s := range []string{
		"https://deploy:9876543/x@origin.example",
		"https://deploy:9876543?x@origin.example",
		"https://deploy:9876543#x@origin.example",
	} {
		if _, err := ParseOrigin(s); err == nil || strings.Contains(err.Error(), "9876543") {
			t.Errorf("ParseOrigin(%q): %v; want an error without the password's digits", s, err)
		}
	}
}

// TestParseOriginRefusesEmptyPort: "http://api:$PORT" with PORT unset
// came out as "http://api:", which Go parses as the scheme's default port:
// every request went to port 80 without a word (found by review).
func TestParseOriginRefusesEmptyPort(t *testing.T) {
	for _, s := range []string{"http://api:", "https://api.example.com:/v1", "http://[::1]:", "http://10.0.0.7:?x=1"} {
		if u, err := ParseOrigin(s); err == nil || !strings.Contains(err.Error(), `port "": must be 1 to 65535`) {
			t.Errorf("ParseOrigin(%q) = %v, %v; want an empty port refused", s, u, err)
		}
	}
	for _, s := range []string{"http://api", "http://api:80", "http://[::1]", "http://[::1]:8080/"} {
		if _, err := ParseOrigin(s); err != nil {
			t.Errorf("ParseOrigin(%q) = %v, want it taken", s, err)
		}
	}
}

// TestProxyOriginPathAndQuery: what README's Command line says of an
// origin URL with a path or a query: its path goes before the request's
// (one slash between them, an escaped slash kept), its query before the
// request's.
//
// A path holding an escaped slash and a byte Go's url package does not
// take unescaped in an escaped path ("|", "^", "{", a backslash, a byte of
// 0x80 or more), the request's or the origin URL's, reaches the origin
// with "%2F" kept and that byte escaped. url.URL's EscapedPath refused
// such a RawPath and escaped the decoded Path instead: "/files/a%2Fb|x"
// reached the origin as "/files/a/b%7Cx", another resource to an origin
// that routes on "%2F" than the one the client asked for and the
// pre-filter priced.
func TestProxyOriginPathAndQuery(t *testing.T) {
	got := make(chan string, 1)
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.RequestURI
	}))
	t.Cleanup(origin.Close)
	for _, tc := range []struct{ origin, target, want string }{
		{"/base", "/v1/items?x=1", "/base/v1/items?x=1"},
		{"/base/", "/v1/items", "/base/v1/items"},
		{"/base", "/v1/a%2Fb", "/base/v1/a%2Fb"},
		{"/base?token=abc", "/v1/items?x=1", "/base/v1/items?token=abc&x=1"},
		{"?token=abc", "/v1/items", "/v1/items?token=abc"},
		{"", "/files/a%2Fb|x", "/files/a%2Fb%7Cx"},
		{"", "/files/a%2Fb^x?q=1", "/files/a%2Fb%5Ex?q=1"},
		{"", "/files/{a%2Fb}/`\"<>\\", "/files/%7Ba%2Fb%7D/%60%22%3C%3E%5C"},
		{"", "/files/a%2Fb/caf\xc3\xa9", "/files/a%2Fb/caf%C3%A9"},
		{"", "/files/a%2fb|x", "/files/a%2fb%7Cx"}, // the client's escapes, as sent
		{"", "/files/%41|x", "/files/%41%7Cx"},
		{"", "/files/a|b", "/files/a%7Cb"}, // no "%2F": escaped as before
		{"/base", "/files/a%2Fb|x", "/base/files/a%2Fb%7Cx"},
		{"/b%2Fse|", "/files/a", "/b%2Fse%7C/files/a"},
	} {
		u, err := ParseOrigin(origin.URL + tc.origin)
		if err != nil {
			t.Fatal(err)
		}
		w := httptest.NewRecorder()
		NewProxy(u, nil, nil).ServeHTTP(w, httptest.NewRequest("GET", tc.target, nil))
		if w.Code != http.StatusOK {
			t.Fatalf("origin %s, request %s: %d %s", tc.origin, tc.target, w.Code, w.Body)
		}
		if uri := <-got; uri != tc.want {
			t.Errorf("origin %s, request %s: the origin got %s, want %s", tc.origin, tc.target, uri, tc.want)
		}
	}
}
