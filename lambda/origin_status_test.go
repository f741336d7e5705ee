package main

import (
	"context"
	"encoding/base64"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/slidegate/slidegate/httpapi"
	"github.com/slidegate/slidegate/internal/testenv"
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

// TestOriginAnswersBeforeBody: an origin that answers an upload before
// reading it and closes the connection (a 413 over its body limit) has its
// answer returned each time. The origin's kernel resets the connection,
// and the proxy's write of the rest of the body fails: Go's transport
// returned that error about one time in two when it came first, and the
// client got the proxy's 502 for the origin's 413.
func TestOriginAnswersBeforeBody(t *testing.T) {
	addr, stop, err := testenv.EarlyOrigin("HTTP/1.1 413 Content Too Large\r\nConnection: close\r\nContent-Length: 9\r\n\r\ntoo large")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	h := Adapt(httpapi.NewProxy(&url.URL{Scheme: "http", Host: addr}, slog.New(slog.DiscardHandler), nil))
	ev := event(t, "functionurl-get.json")
	ev.RequestContext.HTTP.Method = "POST"
	ev.Body, ev.IsBase64Encoded = base64.StdEncoding.EncodeToString(make([]byte, 4<<20)), true // more than the sockets hold
	for i := range 20 {
		res, err := h(context.Background(), ev)
		if err != nil || res.StatusCode != http.StatusRequestEntityTooLarge || res.Body != "too large" {
			t.Fatalf("upload %d: %d %q, %v; want the origin's 413", i+1, res.StatusCode, res.Body, err)
		}
	}
}
