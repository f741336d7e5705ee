package httpapi

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestPreflight: a CORS preflight carries no API key; it is decided on
// ip_limits alone, so that the preflights of every user behind one address
// do not spend that address's default_plan quota (and then fail their
// pages' requests). Without ip_limits it passes undecided. An OPTIONS that
// is not a preflight is counted as any request.
func TestPreflight(t *testing.T) {
	pre := func(f *fixture) int {
		return f.do(req{method: http.MethodOptions, header: map[string]string{"Origin": "https://app.example.com", "Access-Control-Request-Method": "POST"}}).Code
	}
	t.Run("no ip_limits", func(t *testing.T) {
		f := newFixture(t, testConfig(t, nil), nil) // free: 3 a minute
		for i := range 5 {
			w := f.do(req{method: http.MethodOptions, header: map[string]string{"Origin": "https://app.example.com", "Access-Control-Request-Method": "POST"}})
			if w.Code != 200 {
				t.Fatalf("preflight %d: %d; want 200 undecided", i+1, w.Code)
			}
			for _, k := range Fields() { // undecided: no field at all, not empty ones
				if vs, ok := w.Header()[k]; ok {
					t.Fatalf("preflight %d: %s %q; want undecided", i+1, k, vs)
				}
			}
		}
		w := f.do(req{})
		wantHeader(t, w, "X-RateLimit-Remaining", "2") // the plan's first request
		if f.served != 6 {
			t.Errorf("origin served %d, want 6", f.served)
		}
		// OPTIONS without Access-Control-Request-Method, or without
		// Origin, is no preflight.
		f.do(req{method: http.MethodOptions, header: map[string]string{"Origin": "https://app.example.com"}})
		f.do(req{method: http.MethodOptions, header: map[string]string{"Access-Control-Request-Method": "POST"}})
		if w := f.do(req{}); w.Code != http.StatusTooManyRequests {
			t.Errorf("after 4 counted requests: %d, want 429", w.Code)
		}
	})
	t.Run("ip_limits", func(t *testing.T) {
		f := newFixture(t, testConfig(t, func(m map[string]any) {
			m["ip_limits"] = []any{map[string]any{"name": "ip-minute", "limit": 4, "window": "1m", "scope": "local"}}
		}), nil)
		for i, want := range []int{200, 200, 200, 200, 429} {
			if got := pre(f); got != want {
				t.Errorf("preflight %d: %d, want %d", i+1, got, want)
			}
		}
		// The plan (3 a minute) was not charged; ip_limits were.
		w := f.do(req{remote: "192.0.2.1:1"})
		if w.Code != http.StatusTooManyRequests || w.Header().Get("X-RateLimit-Limit") != "4" {
			t.Errorf("after 4 preflights: %d, limit %q; want 429 by ip-minute (4)", w.Code, w.Header().Get("X-RateLimit-Limit"))
		}
		w = f.do(req{remote: "192.0.2.1:1", method: http.MethodOptions, header: map[string]string{"Origin": "https://a.example", "Access-Control-Request-Method": "GET"}})
		wantHeader(t, w, "RateLimit-Policy", `"ip-minute";q=4;w=60`)
	})
}

// TestPreflightWeighsItsRoute holds README's sizing example: with
// ip-minute 4 and a route of cost 3 for any method, a page's POST after its
// preflight is refused (3 + 3); a route for POST alone does not weigh the
// preflight, though it names POST (1 + 3 fits).
func TestPreflightWeighsItsRoute(t *testing.T) {
	for method, want := range map[string]int{"": http.StatusTooManyRequests, "POST": http.StatusOK} {
		f := newFixture(t, testConfig(t, func(m map[string]any) {
			m["ip_limits"] = []any{map[string]any{"name": "ip-minute", "limit": 4, "window": "1m"}}
			m["costs"] = []any{map[string]any{"method": method, "path_prefix": "/v1/search", "cost": 3}}
		}), nil)
		pre := f.do(req{method: http.MethodOptions, path: "/v1/search", header: map[string]string{"Origin": "https://app.example.com", "Access-Control-Request-Method": "POST"}})
		if got := f.do(req{method: http.MethodPost, path: "/v1/search"}).Code; pre.Code != http.StatusOK || got != want {
			t.Errorf("route for %q: preflight %d (RateLimit %s), then POST %d; want 200, then %d", method, pre.Code, pre.Header().Get("RateLimit"), got, want)
		}
	}
}

// TestPreflightWithKey: a browser's preflight never carries the API key
// (the Fetch standard's CORS-preflight request holds Accept and the
// Access-Control-Request-* fields, no credentials, none of the page's
// headers). An OPTIONS that does is a client's request like any other,
// counted on its key: taken for a preflight, it reached the origin
// uncounted by the plan (and by anything, without ip_limits), and an
// origin whose handler does not look at the method served it by the key.
func TestPreflightWithKey(t *testing.T) {
	for _, name := range []string{"X-API-Key", "Authorization"} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, testConfig(t, nil), nil) // pro: 10 a minute
			for i := range 11 {
				w := f.do(req{method: http.MethodOptions, header: map[string]string{
					"Origin": "https://app.example.com", "Access-Control-Request-Method": "POST", name: proKey,
				}})
				want := http.StatusOK
				if i == 10 {
					want = http.StatusTooManyRequests
				}
				if w.Code != want || w.Header().Get("X-RateLimit-Limit") != "10" {
					t.Fatalf("OPTIONS %d with the key: %d, limit %q; want %d on the key's plan (10)", i+1, w.Code, w.Header().Get("X-RateLimit-Limit"), want)
				}
			}
			if f.served != 10 {
				t.Errorf("origin served %d, want 10", f.served)
			}
		})
	}
}

// TestPreflightWithBody: an OPTIONS shaped like a preflight but with a body
// (sized or chunked) is no browser's preflight: it is counted on its
// client's plan like any request.
func TestPreflightWithBody(t *testing.T) {
	f := newFixture(t, testConfig(t, nil), nil) // free: 3 a minute
	for i, want := range []int{200, 200, 200, 429} {
		hr := httptest.NewRequest(http.MethodOptions, "/api", strings.NewReader("upload"))
		if i%2 == 1 {
			hr.ContentLength = -1 // chunked
		}
		hr.RemoteAddr = "192.0.2.1:51000"
		hr.Header.Set("Origin", "https://app.example.com")
		hr.Header.Set("Access-Control-Request-Method", "POST")
		w := httptest.NewRecorder()
		f.h.ServeHTTP(w, hr)
		if w.Code != want || w.Header().Get("X-RateLimit-Limit") != "3" {
			t.Errorf("OPTIONS %d with a body: %d, limit %q; want %d on the plan (3)", i+1, w.Code, w.Header().Get("X-RateLimit-Limit"), want)
		}
	}
}

// TestPreflightWithOverride: a browser's preflight never carries
// X-HTTP-Method-Override (it holds none of the page's headers), and an
// origin may serve an OPTIONS that does as the method it names: Slim's
// MethodOverrideMiddleware (and the PSR-15 ones copied from it) takes it
// on any method, so "OPTIONS /v1/items" with it set to POST is a POST
// there. Taken for a preflight, it passed undecided without ip_limits,
// and counted on ip_limits alone with them: an anonymous client sent any
// number of requests of any method past default_plan. It is counted on
// its client's plan like any request.
func TestPreflightWithOverride(t *testing.T) {
	for _, ipLimits := range []bool{false, true} {
		t.Run(fmt.Sprintf("ip_limits %v", ipLimits), func(t *testing.T) {
			f := newFixture(t, testConfig(t, func(m map[string]any) {
				if ipLimits {
					m["ip_limits"] = []any{map[string]any{"name": "ip-minute", "limit": 50, "window": "1m"}}
				}
			}), nil) // free: 3 a minute
			for i, want := range []int{200, 200, 200, 429} {
				w := f.do(req{method: http.MethodOptions, path: "/v1/items", header: map[string]string{
					"Origin": "https://app.example.com", "Access-Control-Request-Method": "POST", "X-HTTP-Method-Override": "POST",
				}})
				if w.Code != want || w.Header().Get("X-RateLimit-Limit") != "3" {
					t.Errorf("OPTIONS %d with X-HTTP-Method-Override: %d, limit %q; want %d on the plan (3)", i+1, w.Code, w.Header().Get("X-RateLimit-Limit"), want)
				}
			}
			if f.served != 3 {
				t.Errorf("origin served %d, want 3", f.served)
			}
		})
	}
}

// TestCORSOnOwnAnswers: a page of an origin in cors_origins can read
// slidegate's own 429 and 503 (Access-Control-Allow-Origin, and the
// rate-limit fields exposed); others get no CORS fields, so the browser
// keeps the answer from them.
func TestCORSOnOwnAnswers(t *testing.T) {
	const app = "https://app.example.com"
	for _, tt := range []struct {
		name    string
		origins []any
		origin  string
		allow   string // Access-Control-Allow-Origin; "" for no CORS fields
		vary    string
	}{
		{"listed", []any{app}, app, app, "Origin"},
		{"listed, the browser's case", []any{app}, "https://APP.example.com", "https://APP.example.com", "Origin"},
		{"not listed", []any{app}, "https://evil.example", "", "Origin"},
		{"any beside listed", []any{"*", app}, "https://evil.example", "*", "Origin"},
		{"listed beside any", []any{"*", app}, app, app, "Origin"},
		{"any", []any{"*"}, app, "*", ""},
		{"none configured", nil, app, "", ""},
		{"no Origin", []any{"*", app}, "", "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, store := range []string{"429", "503"} {
				cfg := testConfig(t, func(m map[string]any) {
					if tt.origins != nil {
						m["cors_origins"] = tt.origins
					}
					m["on_store_error"] = "deny"
				})
				f := newFixture(t, cfg, func(o *Options) {
					if store == "503" {
						o.Store = &failStore{}
					}
				})
				h := map[string]string{}
				if tt.origin != "" {
					h["Origin"] = tt.origin
				}
				var w = f.do(req{header: h})
				for range 3 {
					w = f.do(req{header: h})
				}
				if got := strconv.Itoa(w.Code); got != store {
					t.Fatalf("%s: status %s", store, got)
				}
				wantHeader(t, w, "Access-Control-Allow-Origin", tt.allow)
				want := ""
				if tt.allow != "" {
					want = exposed
				}
				wantHeader(t, w, "Access-Control-Expose-Headers", want)
				if tt.allow != "" {
					// Every field of slidegate's own a page may read:
					// Slidegate-Store on the 503 too.
					for name := range w.Header() {
						n := strings.ToLower(name)
						own := strings.HasPrefix(n, "ratelimit") || strings.HasPrefix(n, "x-ratelimit-") || n == "retry-after" || strings.HasPrefix(n, "slidegate-")
						if own && !slices.ContainsFunc(strings.Split(want, ","), func(e string) bool { return strings.EqualFold(strings.TrimSpace(e), name) }) {
							t.Errorf("%s: %s is not exposed (%q)", store, name, want)
						}
					}
				}
				creds := ""
				if tt.allow != "" && tt.allow != "*" {
					creds = "true"
				}
				wantHeader(t, w, "Access-Control-Allow-Credentials", creds)
				wantHeader(t, w, "Vary", tt.vary)
			}
		})
	}
}

// TestCORSExposeOnOriginAnswers: when the origin lets a page of a listed
// origin read its answer, the page may read the rate-limit fields too
// (Access-Control-Expose-Headers gains them after the origin's own); an
// answer the origin does not share, or a page not listed, gets nothing.
func TestCORSExposeOnOriginAnswers(t *testing.T) {
	const app = "https://app.example.com"
	for _, tt := range []struct {
		name, origin string
		share        bool
		want         []string
	}{
		{"shared", app, true, []string{"X-Request-Id", exposed}},
		{"not shared", app, false, nil},
		{"not listed", "https://evil.example", true, []string{"X-Request-Id"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, testConfig(t, func(m map[string]any) { m["cors_origins"] = []any{app} }), func(o *Options) {
				o.Next = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if tt.share {
						w.Header().Set("Access-Control-Allow-Origin", r.Header.Get("Origin"))
						w.Header().Set("Access-Control-Expose-Headers", "X-Request-Id")
					}
					_, _ = w.Write([]byte("origin"))
				})
			})
			w := f.do(req{header: map[string]string{"Origin": tt.origin}})
			if got := w.Header().Values("Access-Control-Expose-Headers"); !slices.Equal(got, tt.want) {
				t.Errorf("Access-Control-Expose-Headers %q, want %q", got, tt.want)
			}
		})
	}
}

// TestCORSVaryOnOriginAnswers: with cors_origins set, whether an answer the
// origin shares (Access-Control-Allow-Origin) gains the rate-limit fields
// depends on the request's Origin, so the answer says Vary: Origin, once,
// whatever the origin's own Vary; an answer the origin does not share, or
// any answer without cors_origins, is left as the origin wrote it.
func TestCORSVaryOnOriginAnswers(t *testing.T) {
	const app = "https://app.example.com"
	for _, tt := range []struct {
		name        string
		corsOrigins []any
		origin      string // the request's Origin ("": none)
		allow, vary string // the origin's Access-Control-Allow-Origin and Vary ("": none)
		want        []string
	}{
		{"listed, shared", []any{app}, app, app, "", []string{"Origin"}},
		{"listed, shared with *", []any{app}, app, "*", "", []string{"Origin"}},
		{"listed, the origin varies already", []any{app}, app, app, "Accept, origin", []string{"Accept, origin"}},
		{"listed, the origin varies on everything", []any{app}, app, "*", "*", []string{"*"}},
		{"not listed, shared", []any{app}, "https://other.example", "*", "", []string{"Origin"}},
		{"no Origin, shared with *", []any{app}, "", "*", "Accept", []string{"Accept", "Origin"}},
		{"any origin, shared with *", []any{"*"}, app, "*", "", []string{"Origin"}},
		{"listed, not shared", []any{app}, app, "", "", nil},
		{"no cors_origins", nil, app, "*", "", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, testConfig(t, func(m map[string]any) {
				if tt.corsOrigins != nil {
					m["cors_origins"] = tt.corsOrigins
				}
			}), func(o *Options) {
				o.Next = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if tt.allow != "" {
						w.Header().Set("Access-Control-Allow-Origin", tt.allow)
					}
					if tt.vary != "" {
						w.Header().Set("Vary", tt.vary)
					}
					_, _ = w.Write([]byte("origin"))
				})
			})
			hd := map[string]string{}
			if tt.origin != "" {
				hd["Origin"] = tt.origin
			}
			w := f.do(req{header: hd})
			if got := w.Header().Values("Vary"); !slices.Equal(got, tt.want) {
				t.Errorf("Vary %q, want %q", got, tt.want)
			}
		})
	}
}

// wrappedWriter is a ResponseWriter over another that lets
// http.ResponseController reach it (Unwrap), as the local server's
// closeUnread and silentWriter do between the Handler and its proxy.
type wrappedWriter struct{ http.ResponseWriter }

func (w wrappedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// TestCORSOnAnswersInsteadOfOrigin: the answers slidegate writes itself on
// a request it admitted, in place of the origin's (the proxy's 502 for an
// origin it cannot reach, its 504 for one that does not answer in time,
// its 400 for an Upgrade it refuses, its 408 for a client whose body did
// not come), carry the CORS fields of the pre-filter's 429: a page of a
// listed origin reads them and their rate-limit fields, where the browser
// reported a network error; other pages get none. It holds with the
// local server's writers between the Handler and the proxy (Unwrap). An
// answer the origin wrote itself, a 502 too, keeps what settle gives an
// origin's answer: nothing when it shares none, Expose-Headers once when
// it does.
func TestCORSOnAnswersInsteadOfOrigin(t *testing.T) {
	const app = "https://app.example.com"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := ln.Addr().String()
	_ = ln.Close() // nothing listens there now: connections are refused
	timedOut := roundTripFunc(func(*http.Request) (*http.Response, error) {
		return nil, &url.Error{Op: "Get", URL: "http://origin.test", Err: &net.OpError{Op: "read", Net: "tcp", Err: timeoutErr(true)}}
	})
	bodyFails := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		_, err := io.ReadAll(r.Body)
		return nil, err
	})
	answers := func(status int, share string) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			hd := http.Header{"Content-Type": {"application/problem+json"}}
			if share != "" {
				hd.Set("Access-Control-Allow-Origin", share)
			}
			return &http.Response{StatusCode: status, Header: hd, Body: io.NopCloser(strings.NewReader(`{"status":502}`)), Request: r}, nil
		})
	}
	kinds := []struct {
		name      string
		origin    *url.URL
		transport http.RoundTripper // nil: the proxy's own
		edit      func(r *http.Request)
		status    int
		ours      bool // the answer is slidegate's, not the origin's
		shared    bool // the origin shares its answer with any page
	}{
		{"unreachable", &url.URL{Scheme: "http", Host: refused}, nil, nil, http.StatusBadGateway, true, false},
		{"timed out", nil, timedOut, nil, http.StatusGatewayTimeout, true, false},
		{"Upgrade refused", nil, answers(200, ""), func(r *http.Request) {
			r.Header.Set("Connection", "Upgrade")
			r.Header.Set("Upgrade", "web\xe9socket")
		}, http.StatusBadRequest, true, false},
		{"client body timed out", nil, bodyFails, func(r *http.Request) {
			r.Method, r.ContentLength = http.MethodPost, -1
			r.Body = io.NopCloser(&failingBody{err: &net.OpError{Op: "read", Net: "tcp", Err: timeoutErr(true)}})
		}, http.StatusRequestTimeout, true, false},
		{"origin's 502", nil, answers(http.StatusBadGateway, ""), nil, http.StatusBadGateway, false, false},
		{"origin's 502, shared", nil, answers(http.StatusBadGateway, "*"), nil, http.StatusBadGateway, false, true},
	}
	pages := []struct {
		name    string
		origins []any
		origin  string
		allow   string // Access-Control-Allow-Origin of slidegate's answer
		vary    string // its Vary
	}{
		{"listed", []any{app}, app, app, "Origin"},
		{"not listed", []any{app}, "https://evil.example", "", "Origin"},
		{"any", []any{"*"}, app, "*", ""},
		{"none configured", nil, app, "", ""},
	}
	for _, k := range kinds {
		for _, pg := range pages {
			for _, wrapped := range []bool{false, true} {
				name := k.name + "/" + pg.name
				if wrapped {
					name += "/wrapped"
				}
				t.Run(name, func(t *testing.T) {
					target := k.origin
					if target == nil {
						target = &url.URL{Scheme: "http", Host: "origin.test"}
					}
					p := NewProxy(target, nil, nil)
					if k.transport != nil {
						p.Transport = k.transport
					}
					var next http.Handler = p
					if wrapped {
						next = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { p.ServeHTTP(wrappedWriter{w}, r) })
					}
					f := newFixture(t, testConfig(t, func(m map[string]any) {
						if pg.origins != nil {
							m["cors_origins"] = pg.origins
						}
					}), func(o *Options) { o.Next = next })
					r := httptest.NewRequest(http.MethodGet, "http://slidegate.test/api", nil)
					r.RemoteAddr = "192.0.2.1:51000"
					r.Header.Set("Origin", pg.origin)
					if k.edit != nil {
						k.edit(r)
					}
					w := httptest.NewRecorder()
					f.h.ServeHTTP(w, r)
					if w.Code != k.status {
						t.Fatalf("status %d, want %d: %s", w.Code, k.status, w.Body)
					}
					wantHeader(t, w, "X-RateLimit-Remaining", "2") // admitted and counted
					allow, creds, vary, expose := "", "", []string(nil), []string(nil)
					switch {
					case k.ours:
						allow = pg.allow
						if pg.vary != "" {
							vary = []string{pg.vary}
						}
					case k.shared:
						// settle's treatment of an answer the origin shares.
						allow = "*"
						if pg.origins != nil {
							vary = []string{"Origin"}
						}
					}
					if allow != "" && (k.ours || pg.allow != "") {
						expose = []string{exposed}
					}
					if k.ours && allow != "" && allow != "*" {
						creds = "true"
					}
					wantHeader(t, w, "Access-Control-Allow-Origin", allow)
					wantHeader(t, w, "Access-Control-Allow-Credentials", creds)
					if got := w.Header().Values("Access-Control-Expose-Headers"); !slices.Equal(got, expose) {
						t.Errorf("Access-Control-Expose-Headers %q, want %q", got, expose)
					}
					if got := w.Header().Values("Vary"); !slices.Equal(got, vary) {
						t.Errorf("Vary %q, want %q", got, vary)
					}
				})
			}
		}
	}
}
