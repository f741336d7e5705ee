package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slidegate/slidegate/config"
	"github.com/slidegate/slidegate/httpapi"
	"github.com/slidegate/slidegate/kvstore/workerskv"
)

func TestClientIP(t *testing.T) {
	tests := []struct {
		header string
		want   string
		ok     bool
		v6     string // CF-Connecting-IPv6
	}{
		{"203.0.113.7", "203.0.113.7", true, ""},
		{" 2001:db8::1 ", "2001:db8::1", true, ""},
		{"::ffff:198.51.100.2", "198.51.100.2", true, ""},
		{"", "", false, ""},
		{"203.0.113.7, 10.0.0.1", "", false, ""},
		{"not-an-ip", "", false, ""},
		{"240.16.0.1", "240.16.0.1", true, ""}, // no CF-Connecting-IPv6: as it came
		// Pseudo IPv4 "Overwrite Headers": the address in CF-Connecting-IPv6.
		{"240.16.0.1", "2001:db8:1:2::5", true, "2001:db8:1:2::5"},
		// A CF-Connecting-IPv6 that is no address (two lines, a client's
		// beside Cloudflare's, joined by the runtime) is none: the
		// shared ip:unknown, not the Class E address, which may be a
		// fresh one for each address of the client's /64.
		{"240.16.0.1", "", false, "2001:db8::1, 2001:db8:1:2::5"},
		{"240.16.0.1", "", false, "2001:db8::zz"},
		{"203.0.113.7", "203.0.113.7", true, "2001:db8:1:2::5"}, // a real IPv4 client's is not read
	}
	for _, tt := range tests {
		t.Run(tt.header+" "+tt.v6, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			if tt.header != "" {
				r.Header.Set("CF-Connecting-IP", tt.header)
			}
			if tt.v6 != "" {
				r.Header.Set("CF-Connecting-IPv6", tt.v6)
			}
			a, ok := clientIP(r)
			if ok != tt.ok || (ok && a.String() != tt.want) {
				t.Errorf("clientIP = %v, %v; want %s, %v", a, ok, tt.want, tt.ok)
			}
		})
	}
}

// TestPseudoIPv4Client: a zone with Pseudo IPv4 set to "Overwrite
// Headers" gives an IPv6 client a Class E CF-Connecting-IP hashed from its
// address (a different one per address here), and the address in
// CF-Connecting-IPv6. A host rotating
// through the addresses of its /64 is one client of ipv6_prefix 64, as
// without Pseudo IPv4: its fourth request against a limit of 3 is refused.
// Counted on CF-Connecting-IP, each address was an IPv4 client of its own
// and every request was admitted. CF-Connecting-IPv6 is read only beside
// such an address: a client with a real IPv4 address can send one.
func TestPseudoIPv4Client(t *testing.T) {
	cfg, err := config.Parse([]byte(`{"plans": {"free": {"limits": [{"name": "minute", "limit": 3, "window": "1m"}]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	h, err := httpapi.New(httpapi.Options{
		Config: cfg, ClientIP: clientIP,
		Next: http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}),
		Now:  func() time.Time { return time.Unix(1_800_000_000, 0) },
	})
	if err != nil {
		t.Fatal(err)
	}
	send := func(cfIP, cfIPv6 string) int {
		r := httptest.NewRequest("GET", "https://api.example.com/v1/items", nil)
		r.Header.Set("CF-Connecting-IP", cfIP)
		if cfIPv6 != "" {
			r.Header.Set("CF-Connecting-IPv6", cfIPv6)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	for i := range 4 {
		want := http.StatusOK
		if i == 3 {
			want = http.StatusTooManyRequests
		}
		if got := send(fmt.Sprintf("240.16.0.%d", i+1), fmt.Sprintf("2001:db8:1:2::%x", i+1)); got != want {
			t.Errorf("request %d from another address of 2001:db8:1:2::/64 = %d, want %d", i+1, got, want)
		}
	}
	// A real IPv4 client naming addresses of other /64s in
	// CF-Connecting-IPv6 is counted on its own address (24/8 is no Class E
	// network, though its text begins like 240's).
	for _, ip := range []string{"203.0.113.7", "24.0.0.7"} {
		for i := range 4 {
			want := http.StatusOK
			if i == 3 {
				want = http.StatusTooManyRequests
			}
			if got := send(ip, fmt.Sprintf("2001:db8:%x::1", i+10)); got != want {
				t.Errorf("request %d of %s = %d, want %d", i+1, ip, got, want)
			}
		}
	}
}

func TestOriginHandlerSpec(t *testing.T) {
	tests := []struct {
		spec    string
		wantNil bool
		wantErr bool
	}{
		{"", true, false},
		{"  ", true, false},
		{"self", false, false},
		{"https://origin.example.com", false, false},
		{"http://127.0.0.1:9000/base/", false, false},
		{"origin.example.com", false, true},
		{"ftp://origin.example.com", false, true},
		{"https://origin.example.com/?x=1", false, true},
		{"https://", false, true},
		{"https://:443", false, true},
		{"https://origin.example.com:99999", false, true},
		{"https://u@origin.example.com", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			h, err := originHandler(tt.spec, nil)
			if (err != nil) != tt.wantErr {
				t.Fatalf("originHandler(%q) error = %v, want error %v", tt.spec, err, tt.wantErr)
			}
			if err != nil {
				// The value is named, without its query (which may hold
				// a token) and user info.
				shown, _, _ := strings.Cut(tt.spec, "?")
				if i := strings.LastIndexByte(shown, '@'); i >= 0 {
					shown = shown[i:]
				}
				if !errors.Is(err, ErrOrigin) || !strings.Contains(err.Error(), shown) {
					t.Errorf("error %q does not name ORIGIN_URL and the value", err)
				}
				return
			}
			if (h == nil) != tt.wantNil {
				t.Errorf("originHandler(%q) = %v, want nil %v", tt.spec, h, tt.wantNil)
			}
		})
	}
}

// fakeOrigin is a RoundTripper that records the request and answers.
type fakeOrigin struct {
	mu     sync.Mutex
	got    *http.Request
	body   string
	err    error
	header http.Header // more headers of the answer
	status int         // zero means 201
	answer io.Reader   // the answer's body; nil means "from origin"
}

func (f *fakeOrigin) RoundTrip(r *http.Request) (*http.Response, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	f.got = r
	if r.Body != nil {
		b, _ := io.ReadAll(r.Body)
		f.body = string(b)
	}
	h := http.Header{}
	h.Set("X-Origin", "yes")
	h.Set("Connection", "close")
	for k, vs := range f.header {
		h[k] = vs
	}
	body := f.answer
	if body == nil {
		body = strings.NewReader("from origin")
	}
	return &http.Response{StatusCode: cmp.Or(f.status, http.StatusCreated), Header: h, Body: io.NopCloser(body)}, nil
}

// jsSplit is what syumai's conversion from JavaScript makes of headers h:
// Headers joins a repeated field with ", " (Set-Cookie apart), and syumai
// splits every value at its commas.
func jsSplit(h http.Header) http.Header {
	out := http.Header{}
	for k, vs := range h {
		if k != "Set-Cookie" {
			vs = []string{strings.Join(vs, ", ")}
		}
		for _, v := range vs {
			out[k] = append(out[k], strings.Split(v, ",")...)
		}
	}
	return out
}

// TestProxyHeadersAsSent: header values split at their commas on the way
// into Go (jsSplit) leave the proxy as the client and the origin sent them.
func TestProxyHeadersAsSent(t *testing.T) {
	cookies := []string{
		"session=abc123; Path=/; Expires=Wed, 21 Oct 2037 07:28:00 GMT; HttpOnly",
		"theme=dark; Path=/a,b; Max-Age=3600",
		`pref="en,session=evil"; Path=/`,
		"=nameless",
		"lang=en",
	}
	o := &fakeOrigin{header: jsSplit(http.Header{
		"Set-Cookie":     cookies,
		"Location":       {"/next?ids=1,2,3"},
		"Cache-Control":  {"no-cache", "private"},
		"Connection":     {"X-Hop, close"},
		"X-Hop":          {"1"},
		"Content-Length": {"11"},
	})}
	h, _ := originHandler("https://origin.example.com", o)
	r := httptest.NewRequest("GET", "https://w.example.com/x", nil)
	r.Header = jsSplit(http.Header{"X-List": {"a,b"}, "If-None-Match": {`"x,y", W/"z"`}, "Proxy-Authorization": {"Basic c2VjcmV0"}, "Expect": {"100-continue"}})
	joinRequestHeader(r.Header) // as serve does before any handler
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	for k, want := range map[string][]string{"X-List": {"a,b"}, "If-None-Match": {`"x,y", W/"z"`}, "Proxy-Authorization": nil, "Expect": nil} {
		if got := o.got.Header[k]; !slices.Equal(got, want) {
			t.Errorf("the origin got %s %q, want %q", k, got, want)
		}
	}
	for k, want := range map[string][]string{
		"Set-Cookie": cookies, "Location": {"/next?ids=1,2,3"}, "Cache-Control": {"no-cache, private"},
		"Content-Length": {"11"}, "Connection": nil, "X-Hop": nil,
	} {
		if got := w.Result().Header[k]; !slices.Equal(got, want) {
			t.Errorf("the client got %s %q, want %q", k, got, want)
		}
	}
}

// TestProxyForwardingHeaders: the origin learns the client's address,
// the Worker's host and scheme from headers the Worker sets, never from
// forwarding headers the client made up (an X-Original-URL would have the
// origin serve a path the pre-filter did not price).
func TestProxyForwardingHeaders(t *testing.T) {
	forged := http.Header{
		"X-Original-Url":     {"/v1/search"},
		"X-Rewrite-Url":      {"/v1/search"},
		"X-Forwarded-Host":   {"evil.example"},
		"X-Forwarded-Port":   {"8443"},
		"X-Forwarded-Proto":  {"http"},
		"X-Client-Ip":        {"10.0.0.1"},
		"X-Real-Ip":          {"10.0.0.2"},
		"Forwarded":          {"for=10.0.0.3"},
		"X-Forwarded-Server": {"evil"},
	}
	tests := []struct {
		name    string
		header  http.Header // besides forged
		wantXFF []string
		wantIP  []string // X-Real-IP
		wantTCI []string // True-Client-IP
	}{
		{"chain from Cloudflare", http.Header{"Cf-Connecting-Ip": {"203.0.113.7"}, "X-Forwarded-For": {"10.9.9.9, 203.0.113.7"}},
			[]string{"10.9.9.9, 203.0.113.7"}, []string{"203.0.113.7"}, nil},
		{"chain without the client", http.Header{"Cf-Connecting-Ip": {"203.0.113.7"}, "X-Forwarded-For": {"10.9.9.9"}},
			[]string{"10.9.9.9, 203.0.113.7"}, []string{"203.0.113.7"}, nil},
		{"no chain", http.Header{"Cf-Connecting-Ip": {"2001:db8::1"}},
			[]string{"2001:db8::1"}, []string{"2001:db8::1"}, nil},
		{"IPv6 written another way", http.Header{"Cf-Connecting-Ip": {"2001:db8::1"}, "X-Forwarded-For": {"2001:DB8:0::1"}},
			[]string{"2001:DB8:0::1"}, []string{"2001:db8::1"}, nil},
		{"True-Client-IP", http.Header{"Cf-Connecting-Ip": {"203.0.113.7"}, "True-Client-Ip": {"10.0.0.4"}},
			[]string{"203.0.113.7"}, []string{"203.0.113.7"}, []string{"203.0.113.7"}},
		{"no client address", http.Header{"X-Forwarded-For": {"10.9.9.9"}, "True-Client-Ip": {"10.0.0.4"}},
			nil, nil, nil},
		// A zone whose Pseudo IPv4 is "Overwrite Headers" (for an origin
		// that reads IPv4 alone) writes the Class E address into
		// CF-Connecting-IP and X-Forwarded-For: the origin gets that
		// address, as Cloudflare wrote it, though the limits count the
		// IPv6 client (TestPseudoIPv4Client). Taken from clientIP, the
		// IPv6 address was X-Real-IP, True-Client-IP and the last hop.
		{"Pseudo IPv4", http.Header{"Cf-Connecting-Ip": {"240.16.0.1"}, "Cf-Connecting-Ipv6": {"2001:db8:1:2::1"},
			"X-Forwarded-For": {"240.16.0.1"}, "True-Client-Ip": {"240.16.0.1"}},
			[]string{"240.16.0.1"}, []string{"240.16.0.1"}, []string{"240.16.0.1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := &fakeOrigin{}
			h, _ := originHandler("https://origin.example.com", o)
			r := httptest.NewRequest("GET", "https://api.example.com/v1/cheap", nil)
			for k, v := range forged {
				r.Header[k] = v
			}
			for k, v := range tt.header {
				r.Header[k] = v
			}
			h.ServeHTTP(httptest.NewRecorder(), r)
			for k, want := range map[string][]string{
				"X-Forwarded-For": tt.wantXFF, "X-Real-Ip": tt.wantIP, "True-Client-Ip": tt.wantTCI,
				"X-Forwarded-Host": {"api.example.com"}, "X-Forwarded-Proto": {"https"},
				"Cf-Connecting-Ip": tt.header["Cf-Connecting-Ip"], "Cf-Connecting-Ipv6": tt.header["Cf-Connecting-Ipv6"],
				"X-Original-Url": nil, "X-Rewrite-Url": nil, "X-Forwarded-Port": nil, "X-Client-Ip": nil,
				"Forwarded": nil, "X-Forwarded-Server": nil,
			} {
				if got := o.got.Header[k]; !slices.Equal(got, want) {
					t.Errorf("the origin got %s %q, want %q", k, got, want)
				}
			}
			if v := r.Header["X-Original-Url"]; !slices.Equal(v, forged["X-Original-Url"]) {
				t.Errorf("the incoming request's header changed: X-Original-Url %q", v)
			}
		})
	}
}

// TestSetCookies: each Set-Cookie value, split at its commas as syumai
// splits them (JavaScript gives every cookie on its own), is one cookie
// again, and no comma inside one starts another.
func TestSetCookies(t *testing.T) {
	// net/http quotes a value holding a comma or a space; such a value
	// that holds user input must not become cookies of the user's choice.
	injected := (&http.Cookie{Name: "lang", Value: "en,session=evil", Path: "/"}).String()
	if injected != `lang="en,session=evil"; Path=/` {
		t.Fatalf("net/http sends %q", injected)
	}
	for _, tc := range []struct {
		name    string
		cookies []string
	}{
		{"quoted comma", []string{injected}},
		{"quoted comma, then a cookie", []string{injected, "session=abc123; HttpOnly"}},
		{"a cookie, then a quoted comma", []string{"theme=dark", injected}},
		{"quoted comma without attributes, then a cookie", []string{`a="x,y"`, "b=2"}},
		{"several quoted commas", []string{`a="x,y,z=1,w"; Path=/; Secure`, `b=" , "`, "c=3"}},
		{"quoted comma and space", []string{`a="x, y=1"`, "b=2"}},
		{"quoted comma last", []string{`a="x,"`, `b=","`, "c=3"}},
		{"Expires", []string{
			"session=abc123; Path=/; Expires=Wed, 21 Oct 2037 07:28:00 GMT; HttpOnly",
			"id=1; Expires=Wednesday, 21-Oct-37 07:28:00 GMT",
			"old=1; Expires=Sun,06 Nov 1994 08:49:37 GMT",
			`q="a,b"; Expires=Wed, 21 Oct 2037 07:28:00 GMT`,
		}},
		{"comma in a path", []string{"theme=dark; Path=/a,b; Max-Age=3600", "p=1; Path=/x,/y=z", "lang=en"}},
		{"nameless cookie", []string{"=nameless", "lang=en"}},
		// A quote nothing closes before the cookie's attributes or the
		// end is not a quoted value: the cookies after it stay apart.
		{"unclosed quote", []string{`a="x`, "b=1", "c=2"}},
		{"unclosed quote before attributes", []string{`a="x`, `b=1; Path=/`, `c="2"`}},
		{"quote inside a value", []string{`a=x"y`, "b=1"}},
		// Linear in the pieces: an origin's 80 KB cookie of this shape took
		// 144 s (the isolate blocked) when each piece rescanned the rest.
		{"unclosed quote and 20,000 commas", []string{`pref="` + strings.Repeat(",a", 20_000)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pieces := jsSplit(http.Header{"Set-Cookie": tc.cookies})["Set-Cookie"]
			if got := setCookies(pieces); !slices.Equal(got, tc.cookies) {
				t.Errorf("setCookies(%q) = %q, want %q", pieces, got, tc.cookies)
			}
		})
	}
}

// FuzzSetCookies: cookies as net/http sends them, whatever their values,
// come back from their comma-split pieces as sent.
func FuzzSetCookies(f *testing.F) {
	f.Add("en,session=evil", "x")
	f.Add("a b,c=d", ",")
	f.Add(`"x`, "a=1")
	f.Add("", "=")
	f.Fuzz(func(t *testing.T, v1, v2 string) {
		cookies := []string{
			(&http.Cookie{Name: "a", Value: v1}).String(),
			(&http.Cookie{Name: "b", Value: v2, Path: "/", Expires: time.Date(2037, 10, 21, 7, 28, 0, 0, time.UTC)}).String(),
			(&http.Cookie{Name: "c", Value: v1, Quoted: true, HttpOnly: true}).String(),
			(&http.Cookie{Name: "d", Value: v2}).String(),
		}
		pieces := jsSplit(http.Header{"Set-Cookie": cookies})["Set-Cookie"]
		if got := setCookies(pieces); !slices.Equal(got, cookies) {
			t.Errorf("setCookies(%q) = %q, want %q", pieces, got, cookies)
		}
	})
}

// TestJoinRequestHeader: a request's values, split at their commas on the
// way into Go, are whole again before the pre-filter reads them.
func TestJoinRequestHeader(t *testing.T) {
	sent := http.Header{
		"X-Api-Key":     {"K,a"},
		"Authorization": {"Bearer t0k,en, x"},
		"Accept":        {"text/html, application/json"},
		"X-One":         {"plain"},
	}
	h := jsSplit(sent)
	if len(h["X-Api-Key"]) != 2 {
		t.Fatalf("jsSplit: X-Api-Key %q, want two pieces", h["X-Api-Key"])
	}
	joinRequestHeader(h)
	for k, want := range sent {
		if got := h[k]; !slices.Equal(got, want) {
			t.Errorf("%s %q, want %q", k, got, want)
		}
	}
}

// failReader fails the test that reads it: fetch's body of an answer
// without one is a null stream, which syumai's reader cannot read.
type failReader struct{ t *testing.T }

func (f failReader) Read([]byte) (int, error) {
	f.t.Error("the proxy read the body of an answer that has none")
	return 0, io.EOF
}

func TestProxyAnswersWithoutBody(t *testing.T) {
	for _, tc := range []struct {
		method string
		status int
		enc    string // the origin's Content-Encoding
	}{
		{"HEAD", http.StatusOK, ""},
		{"HEAD", http.StatusNotFound, ""},
		// No body to decode and encode again: the length of the
		// encoded body is the one a GET would have from the origin.
		{"HEAD", http.StatusOK, "gzip"},
		{"GET", http.StatusNoContent, ""},
		{"GET", http.StatusNotModified, ""},
		{"POST", http.StatusResetContent, ""},
	} {
		t.Run(strings.TrimSpace(fmt.Sprint(tc.method, " ", tc.status, " ", tc.enc)), func(t *testing.T) {
			o := &fakeOrigin{status: tc.status, answer: failReader{t}, header: http.Header{"Content-Length": {"2097152"}, "Etag": {`"v1"`}}}
			if tc.enc != "" {
				o.header.Set("Content-Encoding", tc.enc)
			}
			h, _ := originHandler("https://origin.example.com", o)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest(tc.method, "https://w.example.com/x", nil))
			if w.Code != tc.status || w.Body.Len() != 0 || w.Header().Get("Etag") != `"v1"` {
				t.Errorf("%d %q, ETag %q; want %d, no body, the origin's ETag", w.Code, w.Body, w.Header().Get("Etag"), tc.status)
			}
			// syumai's writer makes a body of the length it finds under
			// the canonical name: a HEAD answer keeps its length under
			// another.
			if tc.method == "HEAD" {
				if got := w.Header()["content-length"]; w.Header().Get("Content-Length") != "" || !slices.Equal(got, []string{"2097152"}) {
					t.Errorf("Content-Length %q, content-length %q; want the origin's under the lower-case name only", w.Header().Get("Content-Length"), got)
				}
			}
		})
	}
}

func TestProxy(t *testing.T) {
	tests := []struct {
		name, spec, url, method, body string
		wantURL, wantBody             string
	}{
		{"absolute origin", "https://origin.example.com/base/", "https://worker.example.com/v1/items?q=1", "GET", "", "https://origin.example.com/base/v1/items?q=1", ""},
		{"self", "self", "https://api.example.com/v1/items?q=1", "GET", "", "https://api.example.com/v1/items?q=1", ""},
		{"post body", "http://127.0.0.1:9000", "https://w.example.com/v1/search", "POST", `{"q":"x"}`, "http://127.0.0.1:9000/v1/search", `{"q":"x"}`},
		// An escaped slash is part of a segment: decoding it would name
		// another resource.
		{"escaped path", "https://origin.example.com/base%20dir/", "https://w.example.com/files/a%2Fb?x=1", "GET", "", "https://origin.example.com/base%20dir/files/a%2Fb?x=1", ""},
		{"escaped path, self", "self", "https://api.example.com/files/a%2Fb", "GET", "", "https://api.example.com/files/a%2Fb", ""},
		{"base ending in an escaped slash", "https://origin.example.com/a%2F", "https://w.example.com/x%2Fy", "GET", "", "https://origin.example.com/a%2F/x%2Fy", ""},
		// Next to a byte Go does not take unescaped in an escaped path
		// (httpapi.ParseOrigin; a request's path, escapedURL).
		{"base with an escaped slash and a |", "https://origin.example.com/a%2Fb|/", "https://w.example.com/x", "GET", "", "https://origin.example.com/a%2Fb%7C/x", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := &fakeOrigin{}
			h, err := originHandler(tt.spec, o)
			if err != nil {
				t.Fatal(err)
			}
			r := httptest.NewRequest(tt.method, tt.url, strings.NewReader(tt.body))
			r.Header.Set("X-API-Key", "k")
			r.Header.Set("Connection", "keep-alive")
			w := httptest.NewRecorder()
			w.Header().Set("RateLimit", `"minute";r=4;t=60`) // set by the pre-filter
			h.ServeHTTP(w, r)
			if w.Code != http.StatusCreated || w.Body.String() != "from origin" {
				t.Errorf("answer %d %q, want the origin's 201", w.Code, w.Body.String())
			}
			if got := o.got.URL.String(); got != tt.wantURL {
				t.Errorf("forwarded to %s, want %s", got, tt.wantURL)
			}
			if o.body != tt.wantBody || o.got.Method != tt.method {
				t.Errorf("forwarded %s %q, want %s %q", o.got.Method, o.body, tt.method, tt.wantBody)
			}
			if o.got.Header.Get("X-API-Key") != "k" || o.got.Header.Get("Connection") != "" {
				t.Errorf("forwarded headers %v: want X-API-Key kept and Connection dropped", o.got.Header)
			}
			if w.Header().Get("X-Origin") != "yes" || w.Header().Get("RateLimit") == "" || w.Header().Get("Connection") != "" {
				t.Errorf("answer headers %v: want the origin's and the pre-filter's, no Connection", w.Header())
			}
		})
	}
	// fetch decodes the body; the runtime encodes it again for the
	// client. The encoded length would cut the decoded body short
	// (TestWorkerdCompressedOrigin shows it in workerd).
	for _, enc := range []string{"gzip", "br", "identity", ""} {
		t.Run("Content-Encoding "+enc, func(t *testing.T) {
			o := &fakeOrigin{header: http.Header{"Content-Length": {"11"}}}
			if enc != "" {
				o.header.Set("Content-Encoding", enc)
			}
			h, _ := originHandler("https://origin.example.com", o)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest("GET", "https://w.example.com/x", nil))
			keep := enc == "" || enc == "identity"
			if got := w.Header().Get("Content-Length"); (got == "11") != keep {
				t.Errorf("Content-Length %q; want it kept: %t", got, keep)
			}
			if got := w.Header().Get("Content-Encoding"); got != enc {
				t.Errorf("Content-Encoding %q, want %q", got, enc)
			}
		})
	}
	// An origin that fails is answered and logged as by the local server's
	// proxy (httpapi.OriginFailed): at ERROR; a client that went away
	// first, at INFO; a timeout with a 504. The Worker had its own copy,
	// which had drifted: a request whose context ran out was logged at
	// INFO as a client that went away, and its problem had another title.
	t.Run("origin down", func(t *testing.T) {
		expired, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
		defer cancel()
		gone, cancel := context.WithCancel(context.Background())
		cancel()
		for _, c := range []struct {
			name   string
			ctx    context.Context
			err    error
			status int
			log    string
		}{
			{"refused", context.Background(), errors.New("connection refused"), http.StatusBadGateway,
				`"level":"ERROR","msg":"origin error","error":"connection refused","status":502,"method":"GET","path":"/x"`},
			{"client gone", gone, errors.New("connection refused"), http.StatusBadGateway,
				`"level":"INFO","msg":"client went away before the origin answered","error":"connection refused","method":"GET","path":"/x"`},
			{"deadline", expired, context.DeadlineExceeded, http.StatusGatewayTimeout,
				`"level":"ERROR","msg":"origin error","error":"context deadline exceeded","status":504,"method":"GET","path":"/x"`},
		} {
			var logs strings.Builder
			e := env{Origin: "https://origin.example.com"}
			d := testDeps(t, nil)
			d.Transport = &fakeOrigin{err: c.err}
			d.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
			h, err := newHandler(e, d)
			if err != nil {
				t.Fatal(err)
			}
			r := httptest.NewRequestWithContext(c.ctx, "GET", "https://w.example.com/x?api_key=secret", nil)
			r.Header.Set("CF-Connecting-IP", "203.0.113.7")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			local := httptest.NewRecorder()
			httpapi.OriginFailed(nil, local, r, c.err)
			if w.Code != c.status || w.Body.String() != local.Body.String() || w.Header().Get("Content-Type") != "application/problem+json" {
				t.Errorf("%s: %d %s %s, want %d and the local server's problem %s", c.name, w.Code, w.Header().Get("Content-Type"), w.Body, c.status, local.Body)
			}
			if !strings.Contains(logs.String(), c.log) || strings.Contains(logs.String(), "secret") {
				t.Errorf("%s: logs\n%s\nwant a line with %s and no query", c.name, logs.String(), c.log)
			}
		}
	})
}

// TestBodyHandedToOriginIsLeftAlone: a request body the proxy gives to the
// origin's subrequest is no longer the Worker's to read (drain): the origin
// may answer before it has read the body, and the subrequest reads on after
// the handler has returned. Bodies the origin never gets stay the Worker's,
// and so does what is left of one when the subrequest failed: nothing else
// reads it.
func TestBodyHandedToOriginIsLeftAlone(t *testing.T) {
	for _, tc := range []struct {
		name, origin, method, path string
		transport                  http.RoundTripper
		unsent                     bool
	}{
		{"proxied POST", "https://origin.example.com", "POST", "/v1/items", &fakeOrigin{}, false},
		{"proxied POST, origin down", "https://origin.example.com", "POST", "/v1/items", &fakeOrigin{err: errors.New("connection refused")}, true},
		{"GET, body not forwarded", "https://origin.example.com", "GET", "/v1/items", &fakeOrigin{}, true},
		{"no origin", "", "POST", "/v1/items", &fakeOrigin{}, true},
		{"check API", "https://origin.example.com", "POST", httpapi.CheckPath, &fakeOrigin{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := testDeps(t, nil)
			d.Transport = tc.transport
			h, err := newHandler(env{Origin: tc.origin}, d)
			if err != nil {
				t.Fatal(err)
			}
			r := httptest.NewRequest(tc.method, "https://w.example.com"+tc.path, strings.NewReader(`{"key":"k"}`))
			r.Header.Set("CF-Connecting-IP", "203.0.113.7")
			b := trackBody(r)
			h.ServeHTTP(httptest.NewRecorder(), r)
			if got := b.unsent(); got != tc.unsent {
				t.Errorf("unsent() = %t, want %t", got, tc.unsent)
			}
			if o, ok := tc.transport.(*fakeOrigin); ok && o.err == nil && !tc.unsent && o.body != `{"key":"k"}` {
				t.Errorf("the origin got %q, want the body", o.body)
			}
		})
	}
	if b := trackBody(httptest.NewRequest("GET", "https://w.example.com/", nil)); b != nil || b.unsent() {
		t.Errorf("a request without a body: %v, want nil and nothing to drain", b)
	}
}

func testDeps(t *testing.T, debug *debug) deps {
	t.Helper()
	g := workerskv.NewMemGlobals("iso")
	st, err := workerskv.New(workerskv.Options{
		KV: nopKV{}, Globals: g, Later: func(time.Duration, func(context.Context)) {},
	})
	if err != nil {
		t.Fatal(err)
	}
	return deps{Store: st, Local: workerskv.NewLocal(g, nil), Transport: &fakeOrigin{}, Logger: slog.New(slog.DiscardHandler), Debug: debug}
}

// nopKV is an empty KV that accepts every write.
type nopKV struct{}

func (nopKV) Put(context.Context, string, string, int64, time.Duration) error { return nil }
func (nopKV) List(context.Context, string, string) (workerskv.Page, error) {
	return workerskv.Page{Done: true}, nil
}

func TestNewHandlerConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		e    env
		want string
	}{
		{"bad json", env{Config: text("{")}, varConfig},
		{"invalid config", env{Config: text(`{"plans": {"free": {"limits": []}}}`)}, varConfig},
		{"bad origin", env{Origin: "nope"}, "ORIGIN_URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := newHandler(tt.e, testDeps(t, nil))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("newHandler error = %v, want one naming %s", err, tt.want)
			}
		})
	}
}

// TestFailedNamesWhatNotTheValue: a Worker whose setup failed answers
// every client, on every path, with a 500 that names the variable or
// binding at fault; the error, which may quote a secret from
// SLIDEGATE_CONFIG or ORIGIN_URL, goes to the log only.
func TestFailedNamesWhatNotTheValue(t *testing.T) {
	tests := []struct {
		name, want, secret string
		e                  env
		err                error // instead of newHandler's
		logged             bool  // the secret may be in the log (a plan name is shown)
	}{
		{"raw key as api_keys", varConfig, "LEAKCANARY", env{Config: text(`{"api_keys": "sk_live_LEAKCANARY123"}`)}, nil, false},
		{"raw key as plan name", varConfig, "LEAKCANARY", env{Config: text(`{"api_keys": {"0c8abe0df2f8048e8fe4d9c5cec98da5f0d0bac101bc5b9f9a9801a43a57a5f4": "sk_live_LEAKCANARY123"}}`)}, nil, true},
		{"numeric check_token", varConfig, "98765432123456789", env{Config: text(`{"check_token": 98765432123456789}`)}, nil, false},
		{"origin password, bad escape", varOrigin, "originSECRET", env{Origin: "https://svc:originSECRET%zz@origin.example"}, nil, false},
		{"origin query token", varOrigin, "originSECRET", env{Origin: "https://origin.example/?token=originSECRET"}, nil, false},
		{"origin query token, bad port", varOrigin, "originSECRET", env{Origin: "https://origin.example:0/?token=originSECRET"}, nil, false},
		{"origin query token, bad escape", varOrigin, "originSECRET", env{Origin: "https://origin.example/%zz?token=originSECRET"}, nil, false},
		{"no KV binding", kvBinding, "", env{}, fmt.Errorf("%w: %q", workerskv.ErrBinding, kvBinding), false},
		{"other", "setup failed", "x-secret", env{}, errors.New("x-secret"), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.err
			if err == nil {
				if _, err = newHandler(tt.e, testDeps(t, nil)); err == nil {
					t.Fatal("newHandler accepted it")
				}
			}
			var logs strings.Builder
			h := failed(err, slog.New(slog.NewJSONHandler(&logs, nil)))
			for _, path := range []string{"/", "/v1/check", "/anything"} {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
				body := w.Body.String()
				if w.Code != 500 || w.Header().Get("Content-Type") != "application/problem+json" || !strings.Contains(body, tt.want) {
					t.Errorf("GET %s: %d %s, want a 500 problem+json naming %s", path, w.Code, body, tt.want)
				}
				if tt.secret != "" && strings.Contains(body, tt.secret) {
					t.Errorf("GET %s: the public 500 holds the secret: %s", path, body)
				}
			}
			if msg := err.Error(); !strings.Contains(logs.String(), msg[:min(len(msg), 20)]) {
				t.Errorf("the log lacks the error %q: %s", err, logs.String())
			}
			if tt.secret != "" && !tt.logged && strings.Contains(logs.String(), tt.secret) {
				t.Errorf("the log holds the secret: %s", logs.String())
			}
		})
	}
}

func TestNewHandlerServesCheckAPIWithoutOrigin(t *testing.T) {
	h, err := newHandler(env{}, testDeps(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]int{"/healthz": 200, "/anything": 404} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
		if w.Code != want {
			t.Errorf("GET %s = %d, want %d", path, w.Code, want)
		}
	}
}

// memLog is an eventLog in Go memory.
type memLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *memLog) Append(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, line)
}

func (l *memLog) Lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

func TestDebugRoute(t *testing.T) {
	now := time.UnixMilli(1_795_000_000_000)
	d := &debug{log: &memLog{}, now: func() time.Time { return now }, kv: listedKV{}, mem: func() uint64 { return 4 << 20 }}
	kv := recordingKV{KV: nopKV{}, d: d}
	_ = kv.Put(context.Background(), "sg:k", "1", 1, time.Minute)
	_, _ = kv.List(context.Background(), "sg:", "")
	h := d.wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))

	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/a", nil))
	if got := w.Header().Get(memHeader); got != "4194304" {
		t.Errorf("%s = %q, want the Go memory 4194304", memHeader, got)
	}

	w = httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", debugPath+"?list=sg:", nil))
	var rep debugReport
	if err := json.NewDecoder(w.Body).Decode(&rep); err != nil {
		t.Fatal(err)
	}
	want := []event{{"put", "sg:k", now.UnixMilli()}, {"list", "sg:", now.UnixMilli()}, {"req", "/a", now.UnixMilli()}}
	if len(rep.Events) != len(want) {
		t.Fatalf("events %+v, want %+v", rep.Events, want)
	}
	for i := range want {
		if rep.Events[i] != want[i] {
			t.Errorf("event %d = %+v, want %+v", i, rep.Events[i], want[i])
		}
	}
	if len(rep.Keys) != 3 || rep.Keys[2].N != 3 {
		t.Errorf("listed keys %+v, want the 3 keys of both pages", rep.Keys)
	}
}

// TestListParam: the debug route reads its list parameter as
// url.Values.Get does.
func TestListParam(t *testing.T) {
	for _, q := range []string{"", "list=sg:", "list=sg%3Abulk-day%3A", "a=1&list=sg:x&list=sg:y", "lister=1", "list=", "list=a+b", "list=%zz&list=ok", "list=a;b&list=c"} {
		t.Run(q, func(t *testing.T) {
			want, _ := url.ParseQuery(q)
			if got := listParam(q); got != want.Get("list") {
				t.Errorf("listParam(%q) = %q, want %q", q, got, want.Get("list"))
			}
		})
	}
}

// listedKV lists three keys over two pages.
type listedKV struct{ nopKV }

func (listedKV) List(_ context.Context, _, cursor string) (workerskv.Page, error) {
	if cursor == "" {
		return workerskv.Page{Keys: []workerskv.Key{{Name: "a", N: 1}, {Name: "b", N: 2}}, Cursor: "b"}, nil
	}
	return workerskv.Page{Keys: []workerskv.Key{{Name: "c", N: 3}}, Done: true}, nil
}

// TestWorkerBuildLeavesOutHeavyPackages guards the bundle size: these
// packages would add about 100 KiB of gzip to the Worker (docs/edge.md).
func TestWorkerBuildLeavesOutHeavyPackages(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", ".")
	cmd.Env = append(os.Environ(), "GOOS=js", "GOARCH=wasm")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	for _, heavy := range []string{"encoding/json", "log/slog", "github.com/aws/aws-sdk-go-v2/service/dynamodb", "github.com/slidegate/slidegate/kvstore/memstore"} {
		if slices.Contains(deps, heavy) {
			t.Errorf("the Worker build imports %s", heavy)
		}
	}
	if !slices.Contains(deps, "github.com/slidegate/slidegate/internal/jsonv") {
		t.Error("go list did not list the Worker's own packages")
	}
}

func TestWantsBody(t *testing.T) {
	for _, tc := range []struct {
		method, path string
		length       int64
		want         bool
	}{
		{"POST", httpapi.CheckPath, 19, true},
		{"POST", httpapi.CheckPath, httpapi.MaxCheckBody, true},
		{"POST", httpapi.CheckPath, httpapi.MaxCheckBody + 1, false}, // the handler rejects it, reading no more than its limit
		{"POST", httpapi.CheckPath, -1, false},                       // unknown length: a stream
		{"POST", httpapi.CheckPath, 0, false},
		{"GET", httpapi.CheckPath, 19, false},
		{"POST", "/v1/items", 19, false}, // proxied: the body streams to the origin
	} {
		r := httptest.NewRequest(tc.method, tc.path, nil)
		r.ContentLength = tc.length
		if got := wantsBody(r); got != tc.want {
			t.Errorf("%s %s length %d: wantsBody = %t, want %t", tc.method, tc.path, tc.length, got, tc.want)
		}
	}
}

// TestWranglerBuildIsMakeBuildEdge: wrangler.toml's [build] command (what
// `wrangler deploy` runs) is `make build-edge`'s recipe, wasmpack included.
func TestWranglerBuildIsMakeBuildEdge(t *testing.T) {
	mk, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	toml, err := os.ReadFile("../wrangler.toml")
	if err != nil {
		t.Fatal(err)
	}
	recipe := regexp.MustCompile(`(?m)^build-edge:\n((?:\t.*\n)+)`).FindSubmatch(mk)
	command := regexp.MustCompile(`(?m)^\[build\]\n(?:#.*\n)*command = "(.*)"\n`).FindSubmatch(toml)
	if recipe == nil || command == nil {
		t.Fatalf("no build-edge recipe (%t) or [build] command (%t)", recipe != nil, command != nil)
	}
	norm := func(s string) string {
		s = strings.NewReplacer("\\\n", " ", "$(GO)", "go").Replace(s)
		return strings.Join(strings.Fields(s), " ")
	}
	if m, w := norm(string(recipe[1])), norm(string(command[1])); m != w {
		t.Errorf("make build-edge:\n\t%s\nwrangler.toml [build] command:\n\t%s", m, w)
	}
	if !strings.Contains(string(command[1]), "./edge/cmd/wasmpack build/app.wasm") {
		t.Errorf("the build does not pack the module: %s", command[1])
	}
}

// mapConfigs is a configCache in a map, for the request whose source is
// src, counting its hits.
type mapConfigs struct {
	m    map[string][]byte
	src  string
	hits int
}

func (c *mapConfigs) Lookup() ([]byte, bool) {
	b, ok := c.m[c.src]
	if ok {
		c.hits++
	}
	return b, ok
}

func (c *mapConfigs) Keep(bin []byte) { c.m[c.src] = bin }

func TestLoadConfigKeepsTheBinaryForm(t *testing.T) {
	text := `{"plans": {"free": {"limits": [{"name": "minute", "limit": 5, "window": "1m"}]}}, "default_plan": "free",
	  "ip_limits": [{"name": "ip-second", "limit": 50, "window": "1s", "scope": "local"}]}`
	parsed, err := config.Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	cache := &mapConfigs{m: map[string][]byte{}}
	reads := 0
	load := func(s string) (*config.Config, error) {
		cache.src = s
		return loadConfig(func() string { reads++; return s }, cache)
	}
	for i := range 3 {
		c, err := load(text)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(c, parsed) {
			t.Fatalf("load %d: %#v, want what Parse gives", i+1, c)
		}
		if cache.hits != i {
			t.Errorf("load %d: %d cache hits, want %d", i+1, cache.hits, i)
		}
	}
	// A hit does not read the text.
	if reads != 1 {
		t.Errorf("the text was read %d times in 3 loads, want once", reads)
	}
	// Another configuration is parsed, not taken from the cache.
	if c, err := load(""); err != nil || !reflect.DeepEqual(c, config.Default()) {
		t.Errorf("empty configuration: %v, %v; want the defaults", c, err)
	}
	// A binary form that does not read back is ignored.
	cache.m[text] = []byte("garbage")
	if c, err := load(text); err != nil || !reflect.DeepEqual(c, parsed) {
		t.Errorf("garbage in the cache: %v, %v; want the parsed configuration", c, err)
	}
	// An invalid configuration is an error, and is not kept.
	bad := `{"plans": {}}`
	if _, err := load(bad); err == nil {
		t.Error("invalid configuration: no error")
	}
	if _, ok := cache.m[bad]; ok {
		t.Error("an invalid configuration was kept")
	}
	// Without a cache, loadConfig parses.
	if c, err := loadConfig(func() string { return text }, nil); err != nil || !reflect.DeepEqual(c, parsed) {
		t.Errorf("no cache: %v, %v", c, err)
	}
}

// text returns an env.Config that reads s.
func text(s string) func() string { return func() string { return s } }

func TestEnvConfig(t *testing.T) {
	if got := (env{}).config(); got != "" {
		t.Errorf("no Config: config() = %q, want empty", got)
	}
	if got := (env{Config: text("a")}).config(); got != "a" {
		t.Errorf("config() = %q, want what Config reads", got)
	}
}

// TestConfigVarOfAnyType: SLIDEGATE_CONFIG is read whatever JavaScript
// type wrangler gives it: an object (a TOML table, a JSON object in
// wrangler.jsonc) is the configuration it holds, not the default plans;
// a number is refused, naming the variable.
func TestConfigVarOfAnyType(t *testing.T) {
	const gold = `{"default_plan":"gold","plans":{"gold":{"limits":[{"name":"minute","limit":7,"window":"1m"}]}}}`
	for _, tc := range []struct {
		kind, str, json string
		plan            string // "": refused
	}{
		{"string", gold, "", "gold"},
		{"object", "[object Object]", gold, "gold"},
		{"undefined", "<undefined>", "", config.DefaultPlanName},
		{"number", "<number: 5>", "5", ""},
		{"boolean", "<boolean: true>", "true", ""},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			src := configText(tc.kind, text(tc.str), text(tc.json))
			h, err := newHandler(env{Config: text(src)}, testDeps(t, nil))
			if tc.plan == "" {
				if !errors.Is(err, ErrConfig) {
					t.Fatalf("newHandler: %v, want %v", err, ErrConfig)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest("POST", httpapi.CheckPath, strings.NewReader(`{"key":"k"}`)))
			if want := `"plan":"` + tc.plan + `"`; !strings.Contains(w.Body.String(), want) {
				t.Errorf("check answer %s, want %s", w.Body, want)
			}
		})
	}
}

// TestRemoveHopTrimsASCIIOnly: the Worker's proxy drops what a Connection
// element names as the pre-filter reads it (and Go's reverse proxy): the
// element trimmed of ASCII white space only. strings.TrimSpace also
// trimmed U+00A0, so X-API-Key went no further, while the pre-filter,
// which does not take "\u00a0X-API-Key" for it, had counted it as the key.
func TestRemoveHopTrimsASCIIOnly(t *testing.T) {
	h := http.Header{"Connection": {"\u00a0X-API-Key, \tX-Hop "}, "X-Api-Key": {"k"}, "X-Hop": {"v"}}
	removeHop(h)
	if got := h.Get("X-API-Key"); got != "k" {
		t.Errorf("X-API-Key %q, want it kept", got)
	}
	if _, ok := h["X-Hop"]; ok {
		t.Errorf("X-Hop kept, want it dropped: %v", h)
	}
}

// TestWorkerEgressIsNoProxy: every Worker of every Cloudflare
// customer that fetches this Worker's zone arrives with CF-Connecting-IP
// 2a06:98c0:3600::103 (Cloudflare's docs: cross-zone subrequests), and
// with whatever X-Forwarded-For that Worker set. CF-Connecting-IP is the
// client even when trusted_proxies lists it: with Cloudflare's published
// ranges listed there (the list a local server behind Cloudflare needs, in
// a configuration shared by the platforms), reading past it let anyone
// with a Worker pick the identity the limits count (found by review of
// 1ba0e9d).
func TestWorkerEgressIsNoProxy(t *testing.T) {
	const cfg = `{"plans": {"free": {"limits": [{"name": "day", "limit": 1, "window": "24h"}]}},
		"identity": {"headers": [], "trusted_proxies": ["173.245.48.0/20", "2400:cb00::/32", "2a06:98c0::/29"]}}`
	h, err := newHandler(env{Config: text(cfg), Origin: "https://origin.example.com"}, testDeps(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	codes := make([]int, 0, 3)
	for _, forged := range []string{"198.51.100.1", "198.51.100.2", "198.51.100.3"} {
		r := httptest.NewRequest("GET", "https://api.example.com/v1/items", nil)
		r.Header.Set("CF-Connecting-IP", "2a06:98c0:3600::103")
		r.Header.Set("CF-Worker", "attacker.example")
		r.Header.Set("X-Forwarded-For", forged)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		codes = append(codes, w.Code)
	}
	if codes[1] != http.StatusTooManyRequests || codes[2] != http.StatusTooManyRequests {
		t.Errorf("one caller (Cloudflare's Worker egress), a limit of 1, three X-Forwarded-For values: %v, want the second and third refused", codes)
	}
}

// TestClockStepBackAcrossRequests: the Worker builds its limiter per
// request, so the newest time a request saw is kept in the isolate
// (workerskv.Clock) for the next: a clock that steps back across a
// boundary does not reopen the bucket already counted past (found by the
// parity test: a limit of 2 a second admitted a third request 0.4 s
// after the first).
func TestClockStepBackAcrossRequests(t *testing.T) {
	const cfg = `{"plans": {"free": {"limits": [{"name": "second", "limit": 2, "window": "1s"}]}}}`
	base := time.Date(2026, 11, 22, 12, 0, 30, 0, time.UTC)
	g := workerskv.NewMemGlobals("iso")
	st, err := workerskv.New(workerskv.Options{KV: nopKV{}, Globals: g, Later: func(time.Duration, func(context.Context)) {}})
	if err != nil {
		t.Fatal(err)
	}
	var now time.Time
	d := deps{Store: st, Local: workerskv.NewLocal(g, nil), Transport: &fakeOrigin{},
		Logger: slog.New(slog.DiscardHandler), Now: func() time.Time { return now }, Clock: workerskv.NewClock(g)}
	send := func(at time.Duration) int {
		now = base.Add(at)
		return serveOnce(t, cfg, d).Code
	}
	for _, at := range []time.Duration{900 * time.Millisecond, 1100 * time.Millisecond, 1100 * time.Millisecond} {
		if code := send(at); code != http.StatusCreated {
			t.Fatalf("request at +%s: %d, want the origin's 201", at, code)
		}
	}
	// Back to 0.7 s: within the second of the first request, whose bucket
	// the clock re-enters.
	if code := send(700 * time.Millisecond); code != http.StatusTooManyRequests {
		t.Errorf("request at +0.7s, after the clock stepped back: %d, want 429", code)
	}
}

// heldOrigin answers 201 once release is closed; reached gets a value
// for every request that reached it.
type heldOrigin struct {
	reached chan struct{}
	release chan struct{}
}

func (o *heldOrigin) RoundTrip(r *http.Request) (*http.Response, error) {
	o.reached <- struct{}{}
	<-o.release
	return &http.Response{StatusCode: http.StatusCreated, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("ok"))}, nil
}

// isolate is one Worker isolate: each send builds the handler
// afresh, as the stock shim's fresh Go instance per request does, with the
// isolate's globals and Clock shared.
type isolate struct {
	t  *testing.T
	d  deps
	rt http.RoundTripper
}

func newIsolate(t *testing.T, rt http.RoundTripper) *isolate {
	g := workerskv.NewMemGlobals("iso")
	st, err := workerskv.New(workerskv.Options{KV: nopKV{}, Globals: g, Later: func(time.Duration, func(context.Context)) {}})
	if err != nil {
		t.Fatal(err)
	}
	return &isolate{t: t, rt: rt, d: deps{Store: st, Local: workerskv.NewLocal(g, nil), Transport: rt,
		Logger: slog.New(slog.DiscardHandler), Clock: workerskv.NewClock(g)}}
}

func (iso *isolate) send(at time.Time) *httptest.ResponseRecorder {
	const cfg = `{"plans": {"free": {"limits": [{"name": "second", "limit": 2, "window": "1s"}]}}}`
	d := iso.d
	d.Now = func() time.Time { return at }
	h, err := newHandler(env{Config: text(cfg), Origin: "https://origin.example.com"}, d)
	if err != nil {
		iso.t.Error(err)
		return httptest.NewRecorder()
	}
	r := httptest.NewRequest("GET", "https://w.example.com/x", nil)
	r.Header.Set("CF-Connecting-IP", "203.0.113.9")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// TestClockKeptBeforeOriginAnswers: the isolate keeps a request's time as
// soon as it reads the clock, before the origin answers. Two requests at +1.1 s
// fill the second bucket and wait on a slow origin; the clock steps back
// to +0.7 s. Kept only after the origin answered, the next request was
// decided at the +0.9 s the first had kept, in the bucket the two had moved
// past: admitted, a third request within 0.4 s under a limit of 2 a second
// (found by review). A long-lived limiter (the local server's) decides it
// at +1.1 s and refuses it.
func TestClockKeptBeforeOriginAnswers(t *testing.T) {
	base := time.Date(2026, 11, 22, 12, 0, 30, 0, time.UTC)
	o := &heldOrigin{reached: make(chan struct{}, 4), release: make(chan struct{})}
	iso := newIsolate(t, o)
	close(o.release)
	if w := iso.send(base.Add(900 * time.Millisecond)); w.Code != http.StatusCreated {
		t.Fatalf("+0.9s: %d", w.Code)
	}
	<-o.reached
	o.release = make(chan struct{})
	done := make(chan int, 2)
	for range 2 {
		go func() { done <- iso.send(base.Add(1100 * time.Millisecond)).Code }()
		<-o.reached // counted, now waiting on the origin
	}
	back := make(chan *httptest.ResponseRecorder, 1)
	go func() { back <- iso.send(base.Add(700 * time.Millisecond)) }()
	var w *httptest.ResponseRecorder
	select {
	case w = <-back: // refused: never reached the origin
		close(o.release)
	case <-o.reached: // admitted
		close(o.release)
		w = <-back
	}
	for range 2 {
		if code := <-done; code != http.StatusCreated {
			t.Errorf("+1.1s: %d, want 201", code)
		}
	}
	if w.Code != http.StatusTooManyRequests {
		t.Errorf("+0.7s, while two requests at +1.1s wait on the origin: %d, want 429", w.Code)
	}
}

// TestForwardGlitchDoesNotPinIsolate: one request that reads a clock an
// hour ahead (an NTP step forward then back) must not pin every later
// request of the isolate at that hour, refusing a client allowed 2 a
// second for the hour (found by review of 4b7e370, which keeps the
// isolate's newest time): the limiter follows a step back of more than a
// minute, and so does the isolate.
func TestForwardGlitchDoesNotPinIsolate(t *testing.T) {
	base := time.Date(2026, 11, 22, 12, 0, 30, 0, time.UTC)
	o := &heldOrigin{reached: make(chan struct{}, 64), release: make(chan struct{})}
	close(o.release)
	iso := newIsolate(t, o)
	iso.send(base.Add(time.Hour)) // the glitch
	admitted := 0
	var retry string
	for s := 1; s <= 10; s++ { // real time again, one request a second
		w := iso.send(base.Add(time.Duration(s) * time.Second))
		if w.Code == http.StatusCreated {
			admitted++
		} else {
			retry = w.Header().Get("Retry-After")
		}
	}
	if admitted < 9 {
		n, _ := strconv.Atoi(retry)
		t.Errorf("one request a second for 10 s after a +1h glitch, limit 2/s: %d admitted, last Retry-After %ds; want (nearly) all", admitted, n)
	}
}

// slowPathOrigin holds the requests for /slow until release is closed, and
// answers every other request at once.
type slowPathOrigin struct {
	reached chan struct{}
	release chan struct{}
}

func (o *slowPathOrigin) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Path == "/slow" {
		o.reached <- struct{}{}
		<-o.release
	}
	return &http.Response{StatusCode: http.StatusCreated, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("ok"))}, nil
}

// TestCorrectedKeepDoesNotLowerNewerTime: a request that followed a
// correction (the isolate's kept time an hour ahead, its own clock right)
// keeps its time twice: before the origin answers and again after
// ServeHTTP. The second Keep(from, t) was a "correction" again and
// lowered, unconditionally, the time that requests served meanwhile kept: the
// isolate forgets that they counted past a bucket, and a clock stepping
// back re-enters it (found by a sixth review). The local server's long-lived
// limiter holds the step back at +2.1 s and refuses the request.
func TestCorrectedKeepDoesNotLowerNewerTime(t *testing.T) {
	base := time.Date(2026, 11, 22, 12, 0, 30, 0, time.UTC)
	o := &slowPathOrigin{reached: make(chan struct{}, 1), release: make(chan struct{})}
	iso := newIsolate(t, o)
	send := func(path string, at time.Time) int {
		const cfg = `{"plans": {"free": {"limits": [{"name": "second", "limit": 2, "window": "1s"}]}}}`
		d := iso.d
		d.Now = func() time.Time { return at }
		h, err := newHandler(env{Config: text(cfg), Origin: "https://origin.example.com"}, d)
		if err != nil {
			t.Error(err)
			return 0
		}
		r := httptest.NewRequest("GET", "https://w.example.com"+path, nil)
		r.Header.Set("CF-Connecting-IP", "203.0.113.9")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	if code := send("/x", base.Add(time.Hour)); code != http.StatusCreated { // the glitch
		t.Fatalf("+1h: %d", code)
	}
	slow := make(chan int, 1)
	go func() { slow <- send("/slow", base.Add(500*time.Millisecond)) }() // follows the correction
	<-o.reached
	for range 2 {
		if code := send("/x", base.Add(2100*time.Millisecond)); code != http.StatusCreated {
			t.Fatalf("+2.1s: %d, want 201", code)
		}
	}
	close(o.release)
	if code := <-slow; code != http.StatusCreated {
		t.Fatalf("+0.5s (slow origin): %d, want 201", code)
	}
	if got, want := iso.d.Clock.Latest(), base.Add(2100*time.Millisecond); got.Before(want) {
		t.Errorf("kept time after the slow request ended: %v, want at least %v (kept by the requests at +2.1s)", got, want)
	}
	if code := send("/x", base.Add(1900*time.Millisecond)); code != http.StatusTooManyRequests {
		t.Errorf("+1.9s, after two requests at +2.1s (a step back of 0.2 s): %d, want 429", code)
	}
}

// TestClockReadWhenServed: the isolate's time is read when the request
// reads the clock, not when its handler is built: the Worker awaits the request's
// body in between, and other requests of the isolate run and keep newer
// times meanwhile (found by a sixth review).
func TestClockReadWhenServed(t *testing.T) {
	base := time.Date(2026, 11, 22, 12, 0, 30, 0, time.UTC)
	o := &heldOrigin{reached: make(chan struct{}, 8), release: make(chan struct{})}
	close(o.release)
	iso := newIsolate(t, o)
	iso.send(base.Add(900 * time.Millisecond))
	const cfg = `{"plans": {"free": {"limits": [{"name": "second", "limit": 2, "window": "1s"}]}}}`
	d := iso.d
	d.Now = func() time.Time { return base.Add(700 * time.Millisecond) } // the clock will have stepped back
	h, err := newHandler(env{Config: text(cfg), Origin: "https://origin.example.com"}, d)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // while this request's body is awaited
		if w := iso.send(base.Add(1100 * time.Millisecond)); w.Code != http.StatusCreated {
			t.Fatalf("+1.1s: %d", w.Code)
		}
	}
	r := httptest.NewRequest("GET", "https://w.example.com/x", nil)
	r.Header.Set("CF-Connecting-IP", "203.0.113.9")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusTooManyRequests {
		t.Errorf("+0.7s, served after two requests at +1.1s: %d, want 429", w.Code)
	}
}

// TestProxyWebSocket: a request asking for a WebSocket (Upgrade lists
// websocket, in any case) goes to the origin with Upgrade: websocket, and
// the origin's 101 is handed to upgraded with the pre-filter's and the
// origin's fields, less the handshake's own, which the runtime writes; a
// 101 upgraded cannot pass on is a 502. Other upgrades stay hop-by-hop.
func TestProxyWebSocket(t *testing.T) {
	for _, tc := range []struct {
		name, upgrade string
		passed        bool // upgraded takes the 101
		wantUpgrade   []string
		wantStatus    int
	}{
		{"websocket", "websocket", true, []string{"websocket"}, http.StatusOK},
		{"listed, any case", "foo, WebSocket", true, []string{"websocket"}, http.StatusOK},
		{"no WebSocket in the answer", "websocket", false, []string{"websocket"}, http.StatusBadGateway},
		{"h2c", "h2c", true, nil, http.StatusSwitchingProtocols},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &fakeOrigin{status: http.StatusSwitchingProtocols, answer: strings.NewReader(""), header: http.Header{
				"Upgrade": {"websocket"}, "Sec-Websocket-Accept": {"x"}, "Sec-Websocket-Extensions": {"permessage-deflate"}, "Sec-Websocket-Protocol": {"chat"},
			}}
			h, err := originHandler("https://origin.example.com", o)
			if err != nil {
				t.Fatal(err)
			}
			var got http.Header
			p := h.(*proxy)
			if tc.upgrade != "h2c" {
				p.upgraded = func() func(http.Header) {
					if !tc.passed {
						return nil
					}
					return func(h http.Header) { got = h.Clone() }
				}
			}
			r := httptest.NewRequest("GET", "https://w.example.com/ws", nil)
			r.Header.Set("Upgrade", tc.upgrade)
			w := httptest.NewRecorder()
			w.Header().Set("RateLimit", `"minute";r=4;t=60`) // set by the pre-filter
			h.ServeHTTP(w, r)
			if v := o.got.Header["Upgrade"]; !slices.Equal(v, tc.wantUpgrade) {
				t.Errorf("the origin got Upgrade %q, want %q", v, tc.wantUpgrade)
			}
			if w.Code != tc.wantStatus {
				t.Errorf("status %d, want %d", w.Code, tc.wantStatus)
			}
			if !tc.passed || tc.upgrade == "h2c" {
				return
			}
			for k, want := range map[string]string{"Ratelimit": `"minute";r=4;t=60`, "X-Origin": "yes", "Sec-Websocket-Protocol": "chat", "Sec-Websocket-Accept": "", "Sec-Websocket-Extensions": "", "Upgrade": ""} {
				if v := got.Get(k); v != want {
					t.Errorf("upgraded got %s %q, want %q", k, v, want)
				}
			}
		})
	}
}

// TestEscapedURL: a "%" of a request URL's path that begins no escape
// becomes "%25", so that Go's url package takes the URL, and a "|" or "^"
// is escaped, so that Go keeps the path's escapes ("%2F"); escapes, the
// query and URLs without such a byte are left as they are.
func TestEscapedURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"https://a.example/v1/items?q=1", ""},
		{"https://a.example/a%2Fb/caf%C3%a9", ""},
		{"https://a.example/100%", "https://a.example/100%25"},
		{"https://a.example/%zz/%41", "https://a.example/%25zz/%41"},
		{"https://a.example/a%2", "https://a.example/a%252"},
		{"https://a.example/a%2?x", "https://a.example/a%252?x"},
		{"https://a.example/%%41", "https://a.example/%25%41"},
		{"https://a.example/%u002e?q=50%&r=%zz", "https://a.example/%25u002e?q=50%&r=%zz"},
		{"https://a.example/files/a%2Fb|x^y?q=|", "https://a.example/files/a%2Fb%7Cx%5Ey?q=|"},
		{"https://a.example:8443/a|b#c|d", "https://a.example:8443/a%7Cb#c|d"},
		{"http://[::1]:8787/(a)[b]!$&'*+,;=:@~", ""},
	} {
		got, ok := escapedURL(tc.in)
		if want := cmp.Or(tc.want, tc.in); got != want || ok != (tc.want != "") {
			t.Errorf("escapedURL(%q) = %q, %t; want %q, %t", tc.in, got, ok, want, tc.want != "")
		}
		if u, err := url.Parse(got); err != nil || u.EscapedPath() != u.RawPath && u.RawPath != "" {
			t.Errorf("escapedURL(%q) = %q, which url.Parse refuses or whose RawPath it drops: %v", tc.in, got, err)
		}
	}
}

// TestProxyStatusJavaScriptRefuses: an origin's answer whose status a
// JavaScript Response cannot carry (outside 200 to 599, a WebSocket's 101
// aside) is the Worker's 502 problem+json, with the pre-filter's fields
// and none of the origin's, its body unread: syumai's writer panicked on
// it. workerd's fetch gives an origin's 103 Early Hints as the answer,
// the final answer's bytes as its body.
func TestProxyStatusJavaScriptRefuses(t *testing.T) {
	for _, status := range []int{http.StatusEarlyHints, http.StatusProcessing, http.StatusContinue, 600, 999} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			o := &fakeOrigin{status: status, answer: failReader{t}, header: http.Header{"Link": {"</a.css>; rel=preload"}}}
			h, _ := originHandler("https://origin.example.com", o)
			w := httptest.NewRecorder()
			w.Header().Set("RateLimit", `"minute";r=4;t=60`) // set by the pre-filter
			h.ServeHTTP(w, httptest.NewRequest("GET", "https://w.example.com/x", nil))
			if w.Code != http.StatusBadGateway || w.Header().Get("Content-Type") != "application/problem+json" {
				t.Errorf("%d %s %q, want the 502 problem+json", w.Code, w.Header().Get("Content-Type"), w.Body)
			}
			if got := w.Header().Get("RateLimit"); got != `"minute";r=4;t=60` {
				t.Errorf("RateLimit %q, want the pre-filter's", got)
			}
			if v, ok := w.Header()["Link"]; ok {
				t.Errorf("the origin's Link %q is on the 502", v)
			}
		})
	}
	// The statuses at the ends of the range pass as they are.
	for _, status := range []int{200, 599} {
		o := &fakeOrigin{status: status, answer: strings.NewReader("ok"), header: http.Header{"Content-Type": {"text/plain"}}}
		h, _ := originHandler("https://origin.example.com", o)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "https://w.example.com/x", nil))
		if w.Code != status || w.Body.String() != "ok" {
			t.Errorf("origin's %d: %d %q, want it as sent", status, w.Code, w.Body)
		}
	}
}
