package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/slidegate/slidegate/httpapi"
)

// TestOriginStatusZeroIsNotOK: an origin whose status line reads "000"
// (Go's transport takes any three digits) gets the client the proxy's 502,
// not the 200 that the writer made of the status 0 at the body's first
// write: the client took a broken origin's answer for a success.
func TestOriginStatusZeroIsNotOK(t *testing.T) {
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = io.WriteString(c, "HTTP/1.1 000 Zero\r\nContent-Length: 5\r\n\r\nhello")
	}))
	defer origin.Close()
	u, err := url.Parse(origin.URL)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Adapt(httpapi.NewProxy(u, slog.New(slog.DiscardHandler), nil))(context.Background(), event(t, "functionurl-get.json"))
	if err != nil || res.StatusCode != http.StatusBadGateway || res.Headers["Content-Type"] != "application/problem+json" {
		t.Errorf("got %d %q %q, %v; want the 502 problem", res.StatusCode, res.Headers["Content-Type"], res.Body, err)
	}
}
