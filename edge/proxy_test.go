package main

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

// TestProxyTypesAsNetHTTP: an origin's answer without Content-Type gets the
// type its first bytes show, as net/http's server gives it on the local
// server: not when the answer is empty (net/http sniffs only bytes
// written), and not when the origin sent the field, even empty (net/http
// looks for the key, not a value).
func TestProxyTypesAsNetHTTP(t *testing.T) {
	for _, tc := range []struct {
		name     string
		header   http.Header
		body     string
		wantType []string // nil: no Content-Type
	}{
		{"html", nil, "<!DOCTYPE html><p>caf\u00e9", []string{"text/html; charset=utf-8"}},
		{"empty, no length", nil, "", nil},
		{"an empty type", http.Header{"Content-Type": {""}}, "<!DOCTYPE html><p>x", []string{""}},
		{"typed", http.Header{"Content-Type": {"text/plain"}}, "<!DOCTYPE html><p>x", []string{"text/plain"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &fakeOrigin{status: http.StatusOK, header: tc.header, answer: strings.NewReader(tc.body)}
			h, err := originHandler("https://origin.example.com", o)
			if err != nil {
				t.Fatal(err)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest("GET", "https://w.example.com/x", nil))
			if got := w.Header()["Content-Type"]; w.Code != http.StatusOK || !slices.Equal(got, tc.wantType) || w.Body.String() != tc.body {
				t.Errorf("%d, Content-Type %q, body %q; want 200, %q and the origin's body", w.Code, got, w.Body, tc.wantType)
			}
		})
	}
}

// TestWebSocketAnswerSettlesFields: the fields an upgraded WebSocket's 101
// is answered with are settled by the pre-filter as a final answer's are:
// with cors_origins, an origin that lets the page read its 101 lets it
// read the rate-limit fields too (Access-Control-Expose-Headers), and the
// answer varies by Origin.
func TestWebSocketAnswerSettlesFields(t *testing.T) {
	d := testDeps(t, nil)
	d.Transport = &fakeOrigin{status: http.StatusSwitchingProtocols, answer: strings.NewReader(""), header: http.Header{
		"Upgrade": {"websocket"}, "Access-Control-Allow-Origin": {"https://app.example.com"},
	}}
	var got http.Header
	d.Upgraded = func() func(http.Header) { return func(h http.Header) { got = h.Clone() } }
	h, err := newHandler(env{Origin: "https://origin.example.com", Config: text(`{"cors_origins": ["https://app.example.com"]}`)}, d)
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("GET", "https://w.example.com/ws", nil)
	r.Header.Set("CF-Connecting-IP", "203.0.113.7")
	r.Header.Set("Upgrade", "websocket")
	r.Header.Set("Origin", "https://app.example.com")
	h.ServeHTTP(httptest.NewRecorder(), r)
	if got == nil {
		t.Fatal("the 101 was not passed on")
	}
	if got.Get("RateLimit") == "" || !strings.Contains(strings.Join(got["Access-Control-Expose-Headers"], ","), "RateLimit") || !slices.Contains(got["Vary"], "Origin") {
		t.Errorf("the 101's fields %v: want RateLimit, exposed, and Vary: Origin", got)
	}
}
