package main

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate/httpapi"
	"github.com/slidegate/slidegate/internal/parity"
)

// fuzzFields are the header names FuzzStackLikeLocal's requests carry:
// what the pre-filter reads (keys, CORS, forwarding, method overrides,
// Connection) and what it must pass on untouched.
var fuzzFields = []string{"X-API-Key", "Authorization", "Origin", "Access-Control-Request-Method", "X-Forwarded-For",
	"Cookie", "X-HTTP-Method-Override", "Connection", "X_API_KEY", "Content-Type", "Forwarded", "X-Real-IP", "Api-Key", "Accept"}

// fuzzMethods are the methods FuzzStackLikeLocal's requests use.
var fuzzMethods = []string{"GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "get", "post"}

// fuzzExtras are the configuration fields FuzzStackLikeLocal adds to
// diffConfig.
var fuzzExtras = []string{"", `, "check_token": "tok-0123456789abc"`, `, "shadow": true`, `, "count_denied": true`,
	`, "identity": {"trusted_proxies": ["127.0.0.0/8"], "unlisted_keys": "ip"}`, `, "on_store_error": "deny"`}

// fuzzVisible keeps of s the bytes a client can send in a field value:
// visible ASCII, spaces and tabs.
func fuzzVisible(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\t' || r >= ' ' && r <= '~' {
			return r
		}
		return -1
	}, s)
}

// FuzzStackLikeLocal: a request, sent three times, gets the same answers
// from the Lambda (the events of a Function URL or of an HTTP API, through
// Adapt, the pre-filter and its proxy) as from the local server, and the
// origin gets the same requests (TestDiffWithLocal's comparison), whatever
// its method, target, fields and body.
func FuzzStackLikeLocal(f *testing.F) {
	f.Add(uint8(0), uint8(0), "/v1/items/1?x=1", []byte{0, 1}, "k\nhttps://app.example.com", []byte(nil), false)
	f.Add(uint8(1), uint8(2), httpapi.CheckPath, []byte{1}, "Bearer tok-0123456789abc", []byte(`{"key": "a", "cost": 3}`), true)
	f.Add(uint8(4), uint8(5), "/v1/search", []byte{2, 3, 4}, "https://app.example.com\nPOST\n203.0.113.9, 127.0.0.9", []byte(nil), false)
	f.Add(uint8(2), uint8(7), "/v1//items/./2?_method=POST", []byte{6, 8, 7}, "put\nx=1\nX-API-Key", []byte("\x00\xff"), true)
	f.Fuzz(func(t *testing.T, extra, m uint8, target string, names []byte, values string, body []byte, httpAPI bool) {
		method := fuzzMethods[int(m)%len(fuzzMethods)]
		if _, err := url.ParseRequestURI(target); err != nil || !strings.HasPrefix(target, "/") ||
			strings.ContainsFunc(target, func(r rune) bool { return r <= ' ' || r > '~' || r == '#' }) {
			return // not a request-target a client sends
		}
		vs := strings.Split(values, "\n")
		var header []parity.Field
		for i, n := range names {
			if i >= 8 {
				break
			}
			header = append(header, parity.Field{Name: fuzzFields[int(n)%len(fuzzFields)], Value: fuzzVisible(vs[i%len(vs)])})
		}
		clock := parity.NewClock(parity.T0)
		cfg := fmt.Sprintf(diffConfig, fuzzExtras[int(extra)%len(fuzzExtras)])
		local, lambda := diffSides(t, cfg, clock, httpAPI, false)
		r := parity.Request{Method: method, Target: target, Header: header, Body: body, Client: parity.Clients[0], Step: 10 * time.Millisecond}
		norm := lambdaNormaliser(httpAPI)
		parity.Run(t, clock, []parity.Request{r, r, r}, local, lambda, func(r *parity.Request, ref, got *parity.Outcome) {
			norm(r, ref, got)
			if got.Seen != nil {
				// The front end's own, passed on when the client's
				// address is a trusted proxy's.
				got.Seen.Header.Del("X-Forwarded-Port")
			}
		})
	})
}
