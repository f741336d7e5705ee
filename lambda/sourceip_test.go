package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/slidegate/slidegate/config"
	"github.com/slidegate/slidegate/httpapi"
)

// TestSourceIPWithPort: API Gateway sends some requests'
// requestContext.http.sourceIp with a port (a custom domain with mutual
// TLS: "10.1.22.195:32554"). The address is the peer the handler gets all
// the same; without it, every such client was one unknown address to the
// pre-filter.
func TestSourceIPWithPort(t *testing.T) {
	tests := []struct {
		sourceIP   string
		ip, remote string // what the handler gets: sourceIP (PeerIP), RemoteAddr
	}{
		{"203.0.113.7", "203.0.113.7", "203.0.113.7:0"},
		{"203.0.113.7:32554", "203.0.113.7", "203.0.113.7:0"},
		{"2001:db8::1", "2001:db8::1", "[2001:db8::1]:0"},
		{"[2001:db8::1]:443", "2001:db8::1", "[2001:db8::1]:0"},
		{"", "invalid IP", ":0"},
		{"not an address", "invalid IP", "not an address:0"},
	}
	for _, tt := range tests {
		var got seen
		ev := event(t, "functionurl-get.json")
		ev.RequestContext.HTTP.SourceIP = tt.sourceIP
		if _, err := Adapt(record(&got))(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
		if got.ip != tt.ip || got.remote != tt.remote {
			t.Errorf("sourceIp %q: handler got %s, RemoteAddr %q; want %s, %q", tt.sourceIP, got.ip, got.remote, tt.ip, tt.remote)
		}
	}
}

// TestSourceIPWithPortIsItsClient: clients whose sourceIp carries a port
// are counted each under its own address, and the origin is told that
// address.
func TestSourceIPWithPortIsItsClient(t *testing.T) {
	cfg, err := config.Parse([]byte(testConfig)) // 3 a day per client
	if err != nil {
		t.Fatal(err)
	}
	var xff string
	handle := proxiedAt(t, cfg, time.Date(2026, 11, 22, 12, 0, 7, 0, time.UTC), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		xff = r.Header.Get("X-Forwarded-For")
		_, _ = io.WriteString(w, "hello from the origin\n")
	}))
	for i, client := range []string{"198.51.100.1", "198.51.100.1", "198.51.100.1", "198.51.100.2"} {
		ev := event(t, "httpapi-get.json")
		ev.RequestContext.HTTP.SourceIP = fmt.Sprintf("%s:%d", client, 40000+i)
		res, err := handle(context.Background(), ev)
		if err != nil || res.StatusCode != http.StatusOK || xff != client {
			t.Errorf("request %d from %s: %d, origin told X-Forwarded-For %q, %v; want 200, %s", i, ev.RequestContext.HTTP.SourceIP, res.StatusCode, xff, err, client)
		}
	}
}

// proxiedAt returns the Lambda handler of cfg at the instant now, in front
// of origin served on 127.0.0.1 through the proxy the function uses.
func proxiedAt(t *testing.T, cfg *config.Config, now time.Time, origin http.Handler) Handler {
	t.Helper()
	srv := httptest.NewServer(origin)
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	h, err := httpapi.New(httpapi.Options{Config: cfg, Next: httpapi.NewProxy(u, nil, cfg.Identity.Prefixes()), PeerIP: sourceIP,
		Now: func() time.Time { return now }, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return Adapt(h)
}

// TestSourceIPWithPortTrusted: where the sourceIp with a port is a private
// address inside AWS and the peer is in X-Forwarded-For (the mutual TLS
// report), listing the private range in identity.trusted_proxies, as
// docs/lambda.md advises, counts each peer under its own address.
func TestSourceIPWithPortTrusted(t *testing.T) {
	cfg, err := config.Parse([]byte(`{
  "identity": {"trusted_proxies": ["10.0.0.0/8"]},
  "plans": {"free": {"limits": [{"name": "day", "limit": 1, "window": "24h"}]}}
}`))
	if err != nil {
		t.Fatal(err)
	}
	handle := proxiedAt(t, cfg, time.Date(2026, 11, 22, 12, 0, 7, 0, time.UTC), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "hello from the origin\n")
	}))
	for i, tt := range []struct {
		sourceIP, xff string
		want          int
	}{
		{"10.1.22.195:32554", "162.158.118.190", http.StatusOK},
		{"10.1.22.195:32555", "162.158.118.191", http.StatusOK},
		{"10.1.15.242:39870", "162.158.118.190", http.StatusTooManyRequests},
	} {
		ev := event(t, "httpapi-get.json")
		ev.RequestContext.HTTP.SourceIP, ev.Headers["x-forwarded-for"] = tt.sourceIP, tt.xff
		res, err := handle(context.Background(), ev)
		if err != nil || res.StatusCode != tt.want {
			t.Errorf("request %d (sourceIp %s, X-Forwarded-For %s): %d, %v; want %d", i, tt.sourceIP, tt.xff, res.StatusCode, err, tt.want)
		}
	}
}
