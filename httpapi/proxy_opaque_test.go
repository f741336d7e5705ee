package httpapi

import (
	"bufio"
	"bytes"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// TestOpaqueTargetQueryNotLogged: a request target of no http form
// ("GET http:x?api_key=... HTTP/1.1", which Go's server takes, with the
// "x" as its URL's Opaque) goes to the origin at "/", where the pre-filter
// priced it, with its query, and its query reaches no log line. Through
// NewProxy to an origin that speaks HTTP/2, the transport refused it with
// `http2: invalid request :path "x?api_key=..."`, logged at ERROR as an
// origin error with the query (a key in it) for any client that sent one,
// and answered a 502; to an HTTP/1.1 origin it went on as "x?api_key=...".
func TestOpaqueTargetQueryNotLogged(t *testing.T) {
	const secret = "sk_live_opaque_secret"
	for _, h2 := range []bool{false, true} {
		t.Run(fmt.Sprintf("h2=%t", h2), func(t *testing.T) {
			var got []string // what the origin served
			origin := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got = append(got, r.Method+" "+r.RequestURI)
			}))
			var logs bytes.Buffer
			log := slog.New(slog.NewJSONHandler(&logs, nil))
			var next http.Handler
			if h2 {
				next = h2Proxy(t, origin, log)
			} else {
				origin.Start()
				t.Cleanup(origin.Close)
				u, err := url.Parse(origin.URL)
				if err != nil {
					t.Fatal(err)
				}
				next = NewProxy(u, log, nil)
			}
			f := newFixture(t, testConfig(t, nil), func(o *Options) { o.Next = next; o.Logger = log })
			srv := httptest.NewServer(f.h)
			t.Cleanup(srv.Close)
			for _, target := range []string{"http:x?api_key=" + secret, "mailto:x?api_key=" + secret} {
				got = nil
				c, err := net.Dial("tcp", srv.Listener.Addr().String())
				if err != nil {
					t.Fatal(err)
				}
				fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: api.example\r\n\r\n", target)
				res, err := http.ReadResponse(bufio.NewReader(c), nil)
				c.Close()
				if err != nil {
					t.Fatal(err)
				}
				res.Body.Close()
				if want := "GET /?api_key=" + secret; res.StatusCode != http.StatusOK || len(got) != 1 || got[0] != want {
					t.Errorf("%s: status %d, origin served %q; want 200 and %q", target, res.StatusCode, got, want)
				}
			}
			if strings.Contains(logs.String(), secret) {
				t.Errorf("a log line holds the query's key:\n%s", logs.String())
			}
		})
	}
}
