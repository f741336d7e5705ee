package httpapi

import (
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/slidegate/slidegate/config"
)

// TestProxyUntrustedChainEndingWithPeer: with trusted_proxies set, a client
// that is not one of them and sends an X-Forwarded-For chain ending with
// its own address does not get its forged entries to the origin: the
// origin sees the client's address alone.
func TestProxyUntrustedChainEndingWithPeer(t *testing.T) {
	var got []string
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Values("X-Forwarded-For")
	}))
	defer origin.Close()
	u, err := url.Parse(origin.URL)
	if err != nil {
		t.Fatal(err)
	}
	p := NewProxy(u, nil, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")})
	for _, in := range []string{"6.6.6.6, 198.51.100.9", "6.6.6.6,198.51.100.9"} {
		t.Run(in, func(t *testing.T) {
			r := httptest.NewRequest("GET", "http://slidegate.test/v1/items", nil)
			r.RemoteAddr = "198.51.100.9:5000"
			r.Header.Set("X-Forwarded-For", in)
			w := httptest.NewRecorder()
			p.ServeHTTP(w, r)
			if w.Code != http.StatusOK {
				t.Fatalf("status %d", w.Code)
			}
			if v := strings.Join(got, "|"); v != "198.51.100.9" {
				t.Errorf("origin got X-Forwarded-For %q, want %q (the forged chain dropped)", v, "198.51.100.9")
			}
		})
	}
}

// TestProxyRefusedOriginIs502: an origin that refuses the connection is a
// 502 "did not answer", not the 504 of an origin that timed out, and not
// logged as a timeout.
func TestProxyRefusedOriginIs502(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // nothing listens there now: connections are refused
	p := NewProxy(&url.URL{Scheme: "http", Host: addr}, nil, nil)
	w := httptest.NewRecorder()
	p.ServeHTTP(w, httptest.NewRequest("GET", "http://slidegate.test/v1/items", nil))
	if w.Code != http.StatusBadGateway {
		t.Errorf("refused origin: status %d, want 502: %s", w.Code, w.Body)
	}
	if strings.Contains(w.Body.String(), "in time") {
		t.Errorf("refused origin described as a timeout: %s", w.Body)
	}
}

// TestSwitchingProtocolsKeepsFields: an in-process origin (Options.Next)
// that answers 101 Switching Protocols gives its final answer: the
// pre-filter's rate-limit fields go out on it, as on any other.
func TestSwitchingProtocolsKeepsFields(t *testing.T) {
	f := newFixture(t, config.Default(), func(o *Options) {
		o.Next = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Upgrade", "websocket")
			w.WriteHeader(http.StatusSwitchingProtocols)
		})
	})
	w := f.do(req{method: "GET", path: "/v1/items", remote: "198.51.100.1:1234"})
	if w.Code != http.StatusSwitchingProtocols {
		t.Fatalf("status %d, want 101", w.Code)
	}
	res := w.Result()
	for _, k := range []string{"X-Ratelimit-Limit", "X-Ratelimit-Remaining", "Ratelimit", "Ratelimit-Policy"} {
		if res.Header.Get(k) == "" {
			t.Errorf("101 without %s: %v", k, res.Header)
		}
	}
}

// TestLastHopIPv4Mapped: a proxy on a dual-stack socket writes an IPv4
// peer as ::ffff:a.b.c.d; that is the same hop as the peer's IPv4
// address, and the address is not appended to the chain a second time.
func TestLastHopIPv4Mapped(t *testing.T) {
	peer := netip.MustParseAddr("203.0.113.7")
	for _, xff := range [][]string{{"198.51.100.1, ::ffff:203.0.113.7"}, {"198.51.100.1", "::ffff:203.0.113.7"}, {"203.0.113.7"}} {
		if !LastHop(xff, peer) {
			t.Errorf("LastHop(%q, %s) = false, want true", xff, peer)
		}
	}
	if LastHop([]string{"203.0.113.7, 198.51.100.1"}, peer) {
		t.Error("LastHop true for a chain that ends elsewhere")
	}
}
