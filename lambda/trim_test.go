package main

import (
	"context"
	"net/http"
	"testing"
)

// TestHeaderValuesTrimmed: the handler reads an event's header values as
// net/http's server reads a request's fields, without the white space
// around them. The event keeps it, and the proxy sent it on: Go's HTTP/2
// transport writes a value as it is, so an https origin that speaks h2
// got ' text/plain\t' (RFC 9113 calls such a request malformed; a strict
// server refuses it) where the local server's origin got 'text/plain'.
func TestHeaderValuesTrimmed(t *testing.T) {
	ev := event(t, "functionurl-get.json")
	ev.Headers = map[string]string{"accept": " text/plain\t", "x-custom": "a, b ", "x-empty": "  "}
	var got http.Header
	if _, err := Adapt(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
	}))(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{"Accept": "text/plain", "X-Custom": "a, b", "X-Empty": ""} {
		if vs := got[k]; len(vs) != 1 || vs[0] != want {
			t.Errorf("%s: %q, want [%q]", k, vs, want)
		}
	}
}
