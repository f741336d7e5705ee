package httpapi

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// originFront is the Handler with the local server's proxy in front of
// origin, served over loopback; pro keys have 10 a minute.
func originFront(t *testing.T, origin http.Handler, edit func(*Options)) string {
	t.Helper()
	o := httptest.NewServer(origin)
	t.Cleanup(o.Close)
	u, err := url.Parse(o.URL)
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, testConfig(t, nil), func(opt *Options) {
		opt.Next = NewProxy(u, nil, nil)
		if edit != nil {
			edit(opt)
		}
	})
	front := httptest.NewServer(f.h)
	t.Cleanup(front.Close)
	return front.URL
}

// getPro sends a GET with the pro key and returns the answer, its body
// read; trace, when not nil, sees the informational answers.
func getPro(t *testing.T, target string, trace *httptrace.ClientTrace) *http.Response {
	t.Helper()
	r, err := http.NewRequest(http.MethodGet, target, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("X-API-Key", proKey)
	if trace != nil {
		r = r.WithContext(httptrace.WithClientTrace(r.Context(), trace))
	}
	res, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res
}

// trio is the X-RateLimit fields as the client got them, each field's lines
// joined by "|" and "-" for a field that is absent.
func trio(h http.Header) string {
	var out []string
	for _, k := range []string{"X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset"} {
		v := strings.Join(h[k], "|")
		if v == "" {
			v = "-"
		}
		out = append(out, v)
	}
	return strings.Join(out, " ")
}

// TestOriginRateLimitHeaders: an origin that limits too sends its own
// X-RateLimit trio. The client gets one trio, never two values of a field:
// the origin's, whole, when it has fewer requests remaining than the
// pre-filter (9 after the first request of a pro key), else the
// pre-filter's. The origin's RateLimit and RateLimit-Policy items follow
// the pre-filter's, as lists do.
func TestOriginRateLimitHeaders(t *testing.T) {
	const ours = "10 9 1800000061" // pro: 10 a minute, t0+10s, reset in 51 s
	tests := []struct {
		name   string
		origin map[string][]string
		want   string
	}{
		{"none", nil, ours},
		{"more remaining", map[string][]string{"X-RateLimit-Limit": {"5000"}, "X-RateLimit-Remaining": {"4999"}, "X-RateLimit-Reset": {"1800003600"}}, ours},
		{"as many remaining", map[string][]string{"X-RateLimit-Limit": {"50"}, "X-RateLimit-Remaining": {"9"}, "X-RateLimit-Reset": {"1800003600"}}, ours},
		{"fewer remaining", map[string][]string{"X-RateLimit-Limit": {"5000"}, "X-RateLimit-Remaining": {"3"}, "X-RateLimit-Reset": {"1800003600"}}, "5000 3 1800003600"},
		{"fewer, no reset", map[string][]string{"X-RateLimit-Limit": {"5000"}, "X-RateLimit-Remaining": {"0"}}, "5000 0 -"},
		{"remaining only", map[string][]string{"X-RateLimit-Remaining": {" 2 "}}, "- 2 -"},
		{"no remaining", map[string][]string{"X-RateLimit-Limit": {"1"}, "X-RateLimit-Reset": {"1"}}, ours},
		{"remaining not a number", map[string][]string{"X-RateLimit-Limit": {"1"}, "X-RateLimit-Remaining": {"none"}}, ours},
		{"remaining twice", map[string][]string{"X-RateLimit-Remaining": {"1", "0"}}, ours},
		{"negative remaining", map[string][]string{"X-RateLimit-Remaining": {"-1"}}, "- -1 -"},
		{"limit and remaining equal to ours", map[string][]string{"X-RateLimit-Limit": {"10"}, "X-RateLimit-Remaining": {"8"}}, "10 8 -"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			origin := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				maps := w.Header()
				for k, vs := range tt.origin {
					maps[textproto.CanonicalMIMEHeaderKey(k)] = vs
				}
				maps.Set("RateLimit-Policy", `"origin";q=5000;w=3600`)
				maps.Set("RateLimit", `"origin";r=4000;t=100`)
				_, _ = io.WriteString(w, "origin")
			})
			res := getPro(t, originFront(t, origin, nil), nil)
			if res.StatusCode != http.StatusOK {
				t.Fatalf("status %d, want 200", res.StatusCode)
			}
			if got := trio(res.Header); got != tt.want {
				t.Errorf("X-RateLimit trio %q, want %q", got, tt.want)
			}
			if got, want := res.Header.Values("RateLimit-Policy"), []string{`"minute";q=10;w=60`, `"origin";q=5000;w=3600`}; !slices.Equal(got, want) {
				t.Errorf("RateLimit-Policy %q, want %q", got, want)
			}
			if got, want := res.Header.Values("RateLimit"), []string{`"minute";r=9;t=51`, `"origin";r=4000;t=100`}; !slices.Equal(got, want) {
				t.Errorf("RateLimit %q, want %q", got, want)
			}
		})
	}
}

// TestOriginTrioAfterStoreError: when a store error left the pre-filter
// without a decision (on_store_error allow), the origin's trio is the only
// one and reaches the client as the origin sent it.
func TestOriginTrioAfterStoreError(t *testing.T) {
	origin := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()["X-Ratelimit-Remaining"] = []string{"7", "6"}
		w.Header().Set("X-RateLimit-Limit", "100")
	})
	target := originFront(t, origin, func(o *Options) { o.Store = &failStore{} })
	res := getPro(t, target, nil)
	if got := res.Header.Get(StoreHeader); got != StoreErrorAllowed {
		t.Fatalf("%s = %q, want %q", StoreHeader, got, StoreErrorAllowed)
	}
	if got, want := trio(res.Header), "100 7|6 -"; got != want {
		t.Errorf("X-RateLimit trio %q, want %q", got, want)
	}
}

// earlyHints sends a 103 Early Hints with a Link, which the final answer
// does not repeat.
func earlyHints(w http.ResponseWriter) {
	w.Header().Set("Link", "</a.css>; rel=preload")
	w.WriteHeader(http.StatusEarlyHints)
	w.Header().Del("Link")
}

// TestEarlyHints: an origin's 103 Early Hints reaches the client without
// the pre-filter's fields, and its final answer with them. ReverseProxy
// empties the header map after a 1xx; the final answer had lost every
// rate-limit field.
func TestEarlyHints(t *testing.T) {
	origin := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		earlyHints(w)
		w.Header().Set("X-RateLimit-Remaining", "1")
		w.Header().Set("RateLimit", `"origin";r=1;t=5`)
		_, _ = io.WriteString(w, "page")
	})
	var hints []textproto.MIMEHeader
	trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
		if code == http.StatusEarlyHints {
			hints = append(hints, h)
		}
		return nil
	}}
	res := getPro(t, originFront(t, origin, nil), trace)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d, want 200", res.StatusCode)
	}
	if len(hints) != 1 || hints[0].Get("Link") != "</a.css>; rel=preload" {
		t.Fatalf("103s %v, want one with the origin's Link", hints)
	}
	for _, k := range ownHeaders {
		if v := hints[0].Values(k); len(v) > 0 {
			t.Errorf("the 103 has %s %q", k, v)
		}
	}
	if got, want := trio(res.Header), "- 1 -"; got != want {
		t.Errorf("X-RateLimit trio %q, want %q (the origin's, fewer remaining)", got, want)
	}
	if got, want := res.Header.Values("RateLimit"), []string{`"minute";r=9;t=51`, `"origin";r=1;t=5`}; !slices.Equal(got, want) {
		t.Errorf("RateLimit %q, want %q", got, want)
	}
	if got, want := res.Header.Get("RateLimit-Policy"), `"minute";q=10;w=60`; got != want {
		t.Errorf("RateLimit-Policy %q, want %q", got, want)
	}
	if got := res.Header.Get("Link"); got != "" {
		t.Errorf("final answer has the 103's Link %q", got)
	}
}

// TestOriginUpgrade: a protocol upgrade the origin accepts goes through the
// originWriter (ReverseProxy hijacks the connection and writes the 101 from
// the header map itself): the 101 has the pre-filter's fields, and bytes
// pass both ways.
func TestOriginUpgrade(t *testing.T) {
	origin := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "echo" {
			http.Error(w, "upgrade: echo expected", http.StatusBadRequest)
			return
		}
		w.Header().Set("Connection", "Upgrade")
		w.Header().Set("Upgrade", "echo")
		w.WriteHeader(http.StatusSwitchingProtocols)
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		line, _ := brw.ReadString('\n')
		_, _ = brw.WriteString("echo: " + line)
		_ = brw.Flush()
	})
	target := originFront(t, origin, nil)
	r, err := http.NewRequest(http.MethodGet, target+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("X-API-Key", proKey)
	r.Header.Set("Connection", "Upgrade")
	r.Header.Set("Upgrade", "echo")
	res, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("status %d, want 101", res.StatusCode)
	}
	if got, want := res.Header.Get("RateLimit"), `"minute";r=9;t=51`; got != want {
		t.Errorf("RateLimit %q, want %q", got, want)
	}
	rw, ok := res.Body.(io.ReadWriter)
	if !ok {
		t.Fatalf("101 body is a %T, not a connection", res.Body)
	}
	if _, err := io.WriteString(rw, "hello\n"); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(rw).ReadString('\n')
	if err != nil || line != "echo: hello\n" {
		t.Errorf("read %q, %v; want %q", line, err, "echo: hello\n")
	}
}

// TestOriginStreams: what the origin flushes reaches the client while the
// origin is still answering (the originWriter passes flushes on), with the
// rate-limit fields on the header that the first flush sent.
func TestOriginStreams(t *testing.T) {
	next := make(chan struct{})
	origin := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: one\n\n")
		w.(http.Flusher).Flush()
		<-next // the client has read the first event
		_, _ = io.WriteString(w, "data: two\n\n")
	})
	target := originFront(t, origin, nil)
	r, err := http.NewRequest(http.MethodGet, target+"/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("X-API-Key", proKey)
	res, err := http.DefaultClient.Do(r)
	if err != nil {
		close(next)
		t.Fatal(err)
	}
	defer res.Body.Close()
	if got, want := trio(res.Header), "10 9 1800000061"; got != want {
		t.Errorf("X-RateLimit trio %q, want %q", got, want)
	}
	br := bufio.NewReader(res.Body)
	first, err := br.ReadString('\n')
	close(next)
	if err != nil || first != "data: one\n" {
		t.Fatalf("first line %q, %v; want %q", first, err, "data: one\n")
	}
	rest, err := io.ReadAll(br)
	if err != nil || string(rest) != "\ndata: two\n\n" {
		t.Errorf("rest %q, %v", rest, err)
	}
}

// TestOriginWriterReadFrom: an origin handler that copies a reader into the
// writer (io.Copy finds ReadFrom) sends the fields settled, and the bytes.
func TestOriginWriterReadFrom(t *testing.T) {
	f := newFixture(t, testConfig(t, nil), func(o *Options) {
		o.Next = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Add("X-RateLimit-Remaining", "0")
			if _, ok := w.(io.ReaderFrom); !ok {
				t.Errorf("the origin's writer %T is no io.ReaderFrom", w)
			}
			_, _ = io.Copy(w, strings.NewReader("copied"))
		})
	})
	w := f.do(req{header: map[string]string{"X-API-Key": proKey}})
	if got, want := trio(w.Header()), "- 0 -"; got != want || w.Body.String() != "copied" {
		t.Errorf("trio %q, body %q; want %q, %q", got, w.Body.String(), want, "copied")
	}
}

// TestOriginWritesNothing: an origin handler that returns without writing
// its final status (the server answers 200 from the header map), after an
// informational answer or with only fields set, still sends the
// pre-filter's fields, settled.
func TestOriginWritesNothing(t *testing.T) {
	for _, tt := range []struct {
		name  string
		early bool
	}{{"after a 103", true}, {"fields only", false}} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, testConfig(t, nil), func(o *Options) {
				o.Next = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if tt.early {
						w.Header().Set("Link", "</a.css>; rel=preload")
						w.WriteHeader(http.StatusEarlyHints)
						clear(w.Header()) // as httputil.ReverseProxy does
					}
					w.Header().Add("X-RateLimit-Remaining", "20")
				})
			})
			w := f.do(req{header: map[string]string{"X-API-Key": proKey}})
			if got, want := trio(w.Header()), "10 9 1800000061"; got != want {
				t.Errorf("trio %q, want %q", got, want)
			}
			if got, want := w.Header().Get("RateLimit"), `"minute";r=9;t=51`; got != want {
				t.Errorf("RateLimit %q, want %q", got, want)
			}
		})
	}
}

// serveFront serves the Handler with next as its origin in this process
// (Options.Next, no proxy in between) over loopback; pro keys have 10 a
// minute.
func serveFront(t *testing.T, next http.HandlerFunc) string {
	t.Helper()
	f := newFixture(t, testConfig(t, nil), func(o *Options) { o.Next = next })
	front := httptest.NewServer(f.h)
	t.Cleanup(front.Close)
	return front.URL
}

// TestOriginSetsItsFields: an origin in the same process (Options.Next)
// that Sets its rate-limit fields, so replacing the pre-filter's values
// rather than adding its own after them, as httprate and most Go
// middleware do, is settled as one that adds: one trio, whole, the one with
// fewer remaining, and the pre-filter's RateLimit items before the
// origin's; also after a 103. The client got the origin's Remaining with
// the pre-filter's Limit and Reset ("10 4999 1800000061"), or the origin's
// trio with more remaining than the pre-filter's, and lost the
// pre-filter's RateLimit.
func TestOriginSetsItsFields(t *testing.T) {
	const ours = "10 9 1800000061" // pro: 10 a minute, t0+10s, reset in 51 s
	tests := []struct {
		name string
		set  map[string]string
		want string
	}{
		{"remaining only, more", map[string]string{"X-RateLimit-Remaining": "4999"}, ours},
		{"remaining only, fewer", map[string]string{"X-RateLimit-Remaining": "2"}, "- 2 -"},
		{"remaining with spaces, fewer", map[string]string{"X-RateLimit-Remaining": " 2 "}, "- 2 -"},
		{"trio, more", map[string]string{"X-RateLimit-Limit": "5000", "X-RateLimit-Remaining": "4999", "X-RateLimit-Reset": "1800003600"}, ours},
		{"trio, as many", map[string]string{"X-RateLimit-Limit": "5000", "X-RateLimit-Remaining": "9", "X-RateLimit-Reset": "1800003600"}, ours},
		{"trio, fewer", map[string]string{"X-RateLimit-Limit": "5000", "X-RateLimit-Remaining": "3", "X-RateLimit-Reset": "1800003600"}, "5000 3 1800003600"},
		{"limit equal to ours, fewer", map[string]string{"X-RateLimit-Limit": "10", "X-RateLimit-Remaining": "3"}, "10 3 -"},
		{"limit and reset, no remaining", map[string]string{"X-RateLimit-Limit": "5000", "X-RateLimit-Reset": "1"}, ours},
	}
	for _, tt := range tests {
		for _, early := range []bool{false, true} {
			name := tt.name
			if early {
				name += ", after a 103"
			}
			t.Run(name, func(t *testing.T) {
				target := serveFront(t, func(w http.ResponseWriter, r *http.Request) {
					if early {
						earlyHints(w)
					}
					for k, v := range tt.set {
						w.Header()[textproto.CanonicalMIMEHeaderKey(k)] = []string{v}
					}
					w.Header().Set("RateLimit", `"origin";r=1;t=5`)
					_, _ = io.WriteString(w, "origin")
				})
				res := getPro(t, target, nil)
				if got := trio(res.Header); got != tt.want {
					t.Errorf("X-RateLimit trio %q, want %q", got, tt.want)
				}
				if got, want := res.Header.Values("RateLimit"), []string{`"minute";r=9;t=51`, `"origin";r=1;t=5`}; !slices.Equal(got, want) {
					t.Errorf("RateLimit %q, want %q", got, want)
				}
				if got, want := res.Header.Values("RateLimit-Policy"), []string{`"minute";q=10;w=60`}; !slices.Equal(got, want) {
					t.Errorf("RateLimit-Policy %q, want %q", got, want)
				}
			})
		}
	}
}

// TestOriginWriterSendsSettled: each way an origin handler can send the
// header (WriteHeader, Write, WriteString, io.Copy from a reader that is
// no io.WriterTo, which finds ReadFrom, Flush, and
// http.ResponseController's Flush) sends it settled. The handler adds to
// the header after sending it: the settling after it returns must not be
// what the test sees.
func TestOriginWriterSendsSettled(t *testing.T) {
	for name, send := range map[string]func(http.ResponseWriter){
		"WriteHeader": func(w http.ResponseWriter) { w.WriteHeader(http.StatusOK) },
		"Write":       func(w http.ResponseWriter) { _, _ = w.Write([]byte("x")) },
		"WriteString": func(w http.ResponseWriter) { _, _ = io.WriteString(w, "x") },
		"ReadFrom": func(w http.ResponseWriter) {
			if _, ok := w.(io.ReaderFrom); !ok {
				t.Errorf("the origin's writer %T is no io.ReaderFrom", w)
			}
			_, _ = io.Copy(w, io.LimitReader(strings.NewReader("copied"), 6))
		},
		"Flush":              func(w http.ResponseWriter) { w.(http.Flusher).Flush() },
		"ResponseController": func(w http.ResponseWriter) { _ = http.NewResponseController(w).Flush() },
	} {
		t.Run(name, func(t *testing.T) {
			sent := make(chan struct{})
			target := serveFront(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Add("X-RateLimit-Remaining", "0")
				send(w)
				if _, err := w.Write([]byte("\n")); err != nil {
					t.Error(err)
				}
				_ = http.NewResponseController(w).Flush()
				<-sent // the client has the header
				w.Header().Add("X-RateLimit-Remaining", "late")
			})
			r, err := http.NewRequest(http.MethodGet, target, nil)
			if err != nil {
				t.Fatal(err)
			}
			r.Header.Set("X-API-Key", proKey)
			res, err := http.DefaultClient.Do(r)
			close(sent)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if got, want := trio(res.Header), "- 0 -"; got != want {
				t.Errorf("X-RateLimit trio %q, want %q", got, want)
			}
		})
	}
}

// TestEarlyHintsKeepMarks: the marks of a store error and of shadow mode
// are not on a 103 and are on the final answer once, through the local
// server's proxy (which empties the header map after the 103).
func TestEarlyHintsKeepMarks(t *testing.T) {
	origin := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		earlyHints(w)
		_, _ = io.WriteString(w, "page")
	})
	for _, tt := range []struct {
		name, mark, want string
		edit             func(*Options)
		before           int // requests sent first
	}{
		{"store error", StoreHeader, StoreErrorAllowed, func(o *Options) { o.Store = &failStore{} }, 0},
		{"shadow", ShadowHeader, "denied", func(o *Options) {
			o.Config = testConfig(t, func(m map[string]any) { m["shadow"] = true })
		}, 10},
	} {
		t.Run(tt.name, func(t *testing.T) {
			target := originFront(t, origin, tt.edit)
			for range tt.before {
				getPro(t, target, nil)
			}
			var hints []textproto.MIMEHeader
			trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
				hints = append(hints, h)
				return nil
			}}
			res := getPro(t, target, trace)
			if len(hints) != 1 || len(hints[0][tt.mark]) != 0 {
				t.Errorf("1xx answers %v, want one without %s", hints, tt.mark)
			}
			if got := res.Header[tt.mark]; !slices.Equal(got, []string{tt.want}) {
				t.Errorf("%s %q, want %q once", tt.mark, got, tt.want)
			}
		})
	}
}

// TestKeyHeaderNamedInConnection: a key header the request's Connection
// field names is dropped as hop-by-hop before the origin, so it is no key
// here either: a client sent a made-up X-API-Key (a fresh quota each time)
// with Connection: X-API-Key, and the origin served it by the real key in
// Authorization, which was never counted.
func TestKeyHeaderNamedInConnection(t *testing.T) {
	var seen http.Header
	origin := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen = r.Header.Clone() })
	target := originFront(t, origin, nil)
	for i := range 11 {
		r, err := http.NewRequest(http.MethodGet, target, nil)
		if err != nil {
			t.Fatal(err)
		}
		r.Header.Set("X-API-Key", "made-up-"+strconv.Itoa(i))
		r.Header.Set("Connection", "keep-alive, x-api-key")
		r.Header.Set("Authorization", proKey)
		res, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		want := http.StatusOK
		if i == 10 { // pro: 10 a minute, counted on Authorization
			want = http.StatusTooManyRequests
		}
		if res.StatusCode != want || res.Header.Get("X-RateLimit-Limit") != "10" {
			t.Fatalf("request %d: %d, limit %q; want %d, 10 (the Authorization key's plan)", i+1, res.StatusCode, res.Header.Get("X-RateLimit-Limit"), want)
		}
	}
	if seen.Get("X-API-Key") != "" || seen.Get("Authorization") != proKey {
		t.Errorf("origin saw X-API-Key %q, Authorization %q", seen.Get("X-API-Key"), seen.Get("Authorization"))
	}
}

// TestConnectionTokensAsTheProxyReads: a key header is no key exactly when
// the proxy drops it as one the Connection field names: the token trimmed
// of ASCII spaces and tabs only, its name matched in ASCII case only.
// Unicode trimming or folding here (U+00A0 or U+0085 around the name, the
// Kelvin sign for K) skipped an X-API-Key that the proxy passed on: the
// client was counted on a made-up Authorization, a fresh quota each time,
// and the origin served the real key, never counted.
func TestConnectionTokensAsTheProxyReads(t *testing.T) {
	for _, tt := range []struct {
		name, token string
		dropped     bool // the proxy drops X-API-Key
	}{
		{"tab and space", "\tx-api-key ", true},
		{"no-break space", "\u00a0X-API-Key", false},
		{"next line", "X-API-Key\u0085", false},
		{"Kelvin sign", "X-API-\u212Aey", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var seen http.Header
			origin := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen = r.Header.Clone() })
			target := originFront(t, origin, nil)
			r, err := http.NewRequest(http.MethodGet, target, nil)
			if err != nil {
				t.Fatal(err)
			}
			r.Header.Set("X-API-Key", proKey)
			r.Header.Set("Connection", "keep-alive,"+tt.token)
			r.Header.Set("Authorization", "made-up")
			res, err := http.DefaultClient.Do(r)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if got := seen.Get("X-API-Key") == ""; got != tt.dropped {
				t.Fatalf("the proxy dropped X-API-Key: %t, want %t", got, tt.dropped)
			}
			want := "10" // pro: counted on the key the origin got
			if tt.dropped {
				want = "3" // free: counted on the made-up Authorization
			}
			if got := res.Header.Get("X-RateLimit-Limit"); got != want {
				t.Errorf("X-RateLimit-Limit %q, want %q (origin saw X-API-Key %q)", got, want, seen.Get("X-API-Key"))
			}
		})
	}
}

// TestKeyHeaderNamedInConnectionInProcess: an origin in this process
// (Options.Next a handler, no proxy between) does not get a key header the
// Connection field names either: the pre-filter took it for no key (the
// proxies drop it), and the origin served the pro key, used up, to a client
// counted as an anonymous IP.
func TestKeyHeaderNamedInConnectionInProcess(t *testing.T) {
	var seen http.Header
	f := newFixture(t, testConfig(t, nil), func(o *Options) {
		o.Next = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen = r.Header.Clone() })
	})
	for _, conn := range []string{"x-api-key", "keep-alive, X-API-Key"} {
		t.Run(conn, func(t *testing.T) {
			seen = nil
			w := f.do(req{remote: "192.0.2.9:1", header: map[string]string{"X-API-Key": proKey, "Connection": conn}})
			if w.Code != http.StatusOK {
				t.Fatalf("status %d", w.Code)
			}
			wantHeader(t, w, "X-RateLimit-Limit", "3") // counted as the free IP
			if got := seen.Values("X-API-Key"); len(got) > 0 {
				t.Errorf("the origin got X-API-Key %q, which was not counted", got)
			}
		})
	}
}

// TestNoInformationalToHTTP10: an origin's 1xx answers (103 Early Hints,
// 102 Processing, an unasked 100 Continue) do not reach a client that
// asked in HTTP/1.0, which has no 1xx and takes the first status line for
// the answer (RFC 9110 15.2: a server must not send one to it). The proxy
// asks the origin in HTTP/1.1 whatever the client spoke, so the origin
// cannot tell (nginx asks in HTTP/1.0 unless proxy_http_version says
// otherwise). The final answer keeps its rate-limit fields; a client of
// HTTP/1.1 still gets the 1xx (TestEarlyHints).
func TestNoInformationalToHTTP10(t *testing.T) {
	origin := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusContinue)
		w.WriteHeader(http.StatusProcessing)
		earlyHints(w)
		_, _ = io.WriteString(w, "page")
	})
	front := originFront(t, origin, nil)
	c, err := net.Dial("tcp", strings.TrimPrefix(front, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// A bound on a failure, not a timing: a server that kept the
	// connection would otherwise hold the test to go test's timeout.
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(c, "GET /page HTTP/1.0\r\nHost: front.test\r\nX-API-Key: "+proKey+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	// HTTP/1.0 without keep-alive: the answer ends when the server closes.
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(got), "HTTP/1.0 200 OK\r\n") {
		t.Fatalf("an HTTP/1.0 client got:\n%s\nwant the 200 alone", got)
	}
	res, err := http.ReadResponse(bufio.NewReader(strings.NewReader(string(got))), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	if got, want := res.Header.Get("RateLimit"), `"minute";r=9;t=51`; got != want || string(body) != "page" {
		t.Errorf("RateLimit %q, body %q; want %q and the page", got, body, want)
	}
	if v := res.Header.Get("Link"); v != "" {
		t.Errorf("the answer has the 103's Link %q", v)
	}
}
