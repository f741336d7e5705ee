package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate/config"
	"github.com/slidegate/slidegate/kvstore"
	"github.com/slidegate/slidegate/kvstore/memstore"
)

// t0 is aligned to the minute; it is 28,800 s into its UTC day.
var t0 = time.Unix(1_800_000_000, 0)

const proKey = "pro-secret-key-0123456789"

// testConfig: free 3/minute + 100/day, pro 10/minute, POST /v1/search
// costs 2, 10.0.0.0/8 are proxies.
func testConfig(t testing.TB, edit func(m map[string]any)) *config.Config {
	t.Helper()
	m := map[string]any{
		"plans": map[string]any{
			"free": map[string]any{
				"limits": []any{
					map[string]any{"name": "minute", "limit": 3, "window": "1m"},
					map[string]any{"name": "day", "limit": 100, "window": "24h"},
				},
				"upgrade_url": "https://example.com/upgrade",
			},
			"pro": map[string]any{"limits": []any{map[string]any{"name": "minute", "limit": 10, "window": "1m"}}},
		},
		"api_keys": map[string]any{HashKey(proKey): "pro"},
		"identity": map[string]any{"trusted_proxies": []any{"10.0.0.0/8", "2001:db8:ffff::1"}},
		"costs":    []any{map[string]any{"method": "POST", "path_prefix": "/v1/search", "cost": 2}},
	}
	if edit != nil {
		edit(m)
	}
	doc, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	c, err := config.Parse(doc)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

type clock struct{ t time.Time }

func (c *clock) Now() time.Time { return c.t }

// fixture is a Handler in front of a recording origin, on a fixed clock,
// logging into a buffer.
type fixture struct {
	h      *Handler
	clock  *clock
	logs   *bytes.Buffer
	served int // requests the origin saw
}

func newFixture(t testing.TB, cfg *config.Config, edit func(*Options)) *fixture {
	t.Helper()
	f := &fixture{clock: &clock{t0.Add(10 * time.Second)}, logs: &bytes.Buffer{}}
	o := Options{
		Config: cfg,
		Next: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			f.served++
			_, _ = io.WriteString(w, "origin")
		}),
		Now:    f.clock.Now,
		Logger: slog.New(slog.NewJSONHandler(f.logs, nil)),
	}
	if edit != nil {
		edit(&o)
	}
	h, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	f.h = h
	return f
}

type req struct {
	method, path, remote, body string
	header                     map[string]string
}

func (f *fixture) do(r req) *httptest.ResponseRecorder {
	if r.method == "" {
		r.method = http.MethodGet
	}
	if r.path == "" {
		r.path = "/api"
	}
	hr := httptest.NewRequest(r.method, r.path, strings.NewReader(r.body))
	hr.RemoteAddr = r.remote
	if hr.RemoteAddr == "" {
		hr.RemoteAddr = "192.0.2.1:51000"
	}
	for k, v := range r.header {
		hr.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, hr)
	return w
}

func wantHeader(t *testing.T, w *httptest.ResponseRecorder, name, want string) {
	t.Helper()
	if got := w.Header().Get(name); got != want {
		t.Errorf("%s = %q, want %q", name, got, want)
	}
}

// TestHeadersExact walks a free client to its first 429 and checks every
// header's serialized value.
func TestHeadersExact(t *testing.T) {
	f := newFixture(t, testConfig(t, nil), nil)
	const policy = `"minute";q=3;w=60, "day";q=100;w=86400`
	steps := []struct {
		status                  int
		rateLimit               string
		limit, remaining, reset string
		retryAfter              string
	}{
		// t is when more quota is back: a count in the current bucket
		// weighs less 1 ns after it rolls over. minute: 50 s of the bucket
		// left: t = 51. day: 57,590 s left: t = 57591. The whole quota is
		// back (X-RateLimit-Reset) when a count of 1 weighs nothing, the
		// same 1 ns after.
		{200, `"minute";r=2;t=51, "day";r=99;t=57591`, "3", "2", "1800000061", ""},
		// 2 in the previous bucket weigh 1 from 1 ns in (t = 51), 0 once
		// overlap < 1/2: the reset is 50+31 s on.
		{200, `"minute";r=1;t=51, "day";r=98;t=57591`, "3", "1", "1800000091", ""},
		// 3 in the previous bucket weigh floor(3×overlap): 2 from 1 ns in
		// (t = 51), below 1 once overlap < 1/3, 40 s + 1 ns into the next
		// bucket: the reset is 50+41 = 91 s on.
		{200, `"minute";r=0;t=51, "day";r=97;t=57591`, "3", "0", "1800000101", ""},
		// Denied: a cost of 1 fits again once floor(3×overlap) <= 2, 1 ns
		// into the next bucket: Retry-After = ceil(50 s + 1 ns) = 51, the
		// minute's t (draft-10 §6: never earlier). day was not counted:
		// still 97 remaining, and the same reset as after the third
		// request.
		{429, `"minute";r=0;t=51, "day";r=97;t=57591`, "3", "0", "1800000101", "51"},
	}
	for i, s := range steps {
		w := f.do(req{})
		if w.Code != s.status {
			t.Fatalf("request %d: status %d, want %d", i+1, w.Code, s.status)
		}
		wantHeader(t, w, "RateLimit-Policy", policy)
		wantHeader(t, w, "RateLimit", s.rateLimit)
		wantHeader(t, w, "X-RateLimit-Limit", s.limit)
		wantHeader(t, w, "X-RateLimit-Remaining", s.remaining)
		wantHeader(t, w, "X-RateLimit-Reset", s.reset)
		wantHeader(t, w, "Retry-After", s.retryAfter)
	}
	if f.served != 3 {
		t.Errorf("origin served %d requests, want 3", f.served)
	}
}

func TestTooManyBody(t *testing.T) {
	f := newFixture(t, testConfig(t, nil), nil)
	for range 3 {
		f.do(req{})
	}
	w := f.do(req{})
	if w.Code != http.StatusTooManyRequests {
		t.Fatalf("status %d", w.Code)
	}
	wantHeader(t, w, "Content-Type", "application/problem+json")
	var body map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"type":              RateLimitedType,
		"title":             "Too Many Requests",
		"status":            float64(429),
		"detail":            `Limit "minute" (3 per 1m) is used up; retry in 51 s.`,
		"violated-policies": []any{"minute"},
		"limit":             float64(3),
		"remaining":         float64(0),
		"retry_after_ms":    float64(50001),
		"plan":              "free",
		"upgrade_url":       "https://example.com/upgrade",
	}
	if len(body) != len(want) {
		t.Errorf("body has %d members, want %d: %s", len(body), len(want), w.Body)
	}
	for k, v := range want {
		if got, _ := json.Marshal(body[k]); string(got) != mustJSON(t, v) {
			t.Errorf("%s = %s, want %s", k, got, mustJSON(t, v))
		}
	}
	// A plan without upgrade_url leaves the member out.
	f = newFixture(t, testConfig(t, nil), nil)
	for range 10 {
		f.do(req{header: map[string]string{"X-API-Key": proKey}})
	}
	w = f.do(req{header: map[string]string{"X-API-Key": proKey}})
	if w.Code != 429 || strings.Contains(w.Body.String(), "upgrade_url") || !strings.Contains(w.Body.String(), `"plan":"pro"`) {
		t.Errorf("pro 429 = %d %s", w.Code, w.Body)
	}
}

// TestTooManyDetailAgreesWithRemaining: a request that costs more than a
// limit has left is refused with that limit's remaining above zero; the
// detail said the limit "is used up" next to "remaining": 1.
func TestTooManyDetailAgreesWithRemaining(t *testing.T) {
	for _, tc := range []struct {
		name   string
		before int // GETs (cost 1) before the POST (cost 2) to /v1/search
		detail string
	}{
		{"one left", 2, `Limit "minute" (3 per 1m) has 1 left, less than the request costs; retry in 51 s.`},
		{"none left", 3, `Limit "minute" (3 per 1m) is used up; retry in 71 s.`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, testConfig(t, nil), nil)
			for range tc.before {
				f.do(req{})
			}
			w := f.do(req{method: http.MethodPost, path: "/v1/search"})
			if w.Code != http.StatusTooManyRequests {
				t.Fatalf("status %d", w.Code)
			}
			var body tooMany
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
				t.Fatal(err)
			}
			if got, want := strconv.FormatInt(body.Remaining, 10), w.Header().Get("X-RateLimit-Remaining"); got != want {
				t.Errorf("remaining %s, X-RateLimit-Remaining %s", got, want)
			}
			if body.Detail != tc.detail {
				t.Errorf("detail %q (remaining %d), want %q", body.Detail, body.Remaining, tc.detail)
			}
		})
	}
}

func mustJSON(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRetryAfterRoundsUp: Retry-After is never earlier than the moment the
// request is admitted, and the request is admitted then.
func TestRetryAfterRoundsUp(t *testing.T) {
	for _, offset := range []time.Duration{0, 1, 10*time.Second + 400*time.Millisecond, 59*time.Second + 999*time.Millisecond} {
		f := newFixture(t, testConfig(t, nil), nil)
		f.clock.t = t0.Add(offset)
		for range 3 {
			f.do(req{})
		}
		w := f.do(req{})
		if w.Code != 429 {
			t.Fatalf("offset %v: status %d", offset, w.Code)
		}
		var body struct {
			RetryAfterMS int64 `json:"retry_after_ms"`
		}
		_ = json.Unmarshal(w.Body.Bytes(), &body)
		secs := w.Header().Get("Retry-After")
		var n int64
		if _, err := fmtSscan(secs, &n); err != nil || n < 1 {
			t.Fatalf("Retry-After %q", secs)
		}
		if n*1000 < body.RetryAfterMS || (n-1)*1000 >= body.RetryAfterMS {
			t.Errorf("offset %v: Retry-After %d s is not retry_after_ms %d rounded up", offset, n, body.RetryAfterMS)
		}
		// 1 ms before retry_after_ms: still denied; at Retry-After: admitted.
		start := f.clock.t
		f.clock.t = start.Add(time.Duration(body.RetryAfterMS-1) * time.Millisecond)
		if w := f.do(req{}); w.Code != 429 {
			t.Errorf("offset %v: admitted %d ms early", offset, 1)
		}
		f.clock.t = start.Add(time.Duration(n) * time.Second)
		if w := f.do(req{}); w.Code != 200 {
			t.Errorf("offset %v: denied at Retry-After: %d", offset, w.Code)
		}
	}
}

func TestCeilHelpers(t *testing.T) {
	tests := []struct {
		d         time.Duration
		secs, ms  int64
		retrySecs int64
	}{
		{0, 0, 0, 1},
		{1, 1, 1, 1},
		{time.Second, 1, 1000, 1},
		{time.Second + 1, 2, 1001, 2},
		{1500 * time.Millisecond, 2, 1500, 2},
	}
	for _, tt := range tests {
		if got := ceilDiv(tt.d, time.Second); got != tt.secs {
			t.Errorf("ceilDiv(%v, s) = %d, want %d", tt.d, got, tt.secs)
		}
		if got := ceilDiv(tt.d, time.Millisecond); got != tt.ms {
			t.Errorf("ceilDiv(%v, ms) = %d, want %d", tt.d, got, tt.ms)
		}
		if got := retrySeconds(tt.d); got != tt.retrySecs {
			t.Errorf("retrySeconds(%v) = %d, want %d", tt.d, got, tt.retrySecs)
		}
	}
	if got, want := resetEpoch(time.Unix(100, 1), 0), int64(101); got != want {
		t.Errorf("resetEpoch = %d, want %d", got, want)
	}
	if got, want := resetEpoch(time.Unix(100, 0), 0), int64(100); got != want {
		t.Errorf("resetEpoch = %d, want %d", got, want)
	}
}

func TestIdentityAndPlan(t *testing.T) {
	f := newFixture(t, testConfig(t, nil), nil)
	tests := []struct {
		name      string
		header    map[string]string
		remote    string
		wantPlan  string // from RateLimit-Policy
		wantLimit string
	}{
		{"anonymous gets default plan", nil, "", "free", "3"},
		{"listed key gets its plan", map[string]string{"X-API-Key": proKey}, "", "pro", "10"},
		{"unlisted key gets default plan", map[string]string{"X-API-Key": "someone-else"}, "", "free", "3"},
		{"Authorization hashed whole", map[string]string{"Authorization": "Bearer " + proKey}, "", "free", "3"},
		{"X-API-Key before Authorization", map[string]string{"X-API-Key": proKey, "Authorization": "Bearer x"}, "", "pro", "10"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := f.do(req{header: tt.header, remote: tt.remote})
			wantHeader(t, w, "X-RateLimit-Limit", tt.wantLimit)
		})
	}
}

// TestIdentitiesAreSeparate: a key's count is its own, independent of the
// IP it comes from; anonymous clients are counted by IP.
func TestIdentitiesAreSeparate(t *testing.T) {
	f := newFixture(t, testConfig(t, nil), nil)
	key := map[string]string{"X-API-Key": "k1"}
	for range 3 {
		f.do(req{header: key, remote: "192.0.2.1:1"})
	}
	if w := f.do(req{header: key, remote: "198.51.100.9:1"}); w.Code != 429 {
		t.Errorf("same key from another IP: %d, want 429", w.Code)
	}
	if w := f.do(req{header: map[string]string{"X-API-Key": "k2"}, remote: "192.0.2.1:1"}); w.Code != 200 {
		t.Errorf("another key from the same IP: %d, want 200", w.Code)
	}
	if w := f.do(req{remote: "192.0.2.1:1"}); w.Code != 200 {
		t.Errorf("anonymous from the same IP: %d, want 200", w.Code)
	}
	// Authorization: the whole value is the key.
	auth := func(v string) map[string]string { return map[string]string{"Authorization": v} }
	for range 3 {
		f.do(req{header: auth("Bearer abc")})
	}
	if w := f.do(req{header: auth("Bearer abc")}); w.Code != 429 {
		t.Errorf("4th Bearer abc: %d", w.Code)
	}
	if w := f.do(req{header: auth("Bearer abd")}); w.Code != 200 {
		t.Errorf("Bearer abd shares a count with Bearer abc: %d", w.Code)
	}
}

// TestUnlistedKeys: with identity.unlisted_keys "ip", a key not in
// api_keys is counted as a request without one, on its client IP under the
// default plan, so made-up keys get no quota of their own; listed keys
// stay their own clients. With "key" (the default) every key is its own.
func TestUnlistedKeys(t *testing.T) {
	for _, tt := range []struct {
		mode string
		want []int // the answers to made-up keys k0, k1, ... from one IP, then without a key
	}{
		{"key", []int{200, 200, 200, 200, 200, 200}},
		{"ip", []int{200, 200, 200, 429, 429, 429}},
	} {
		t.Run(tt.mode, func(t *testing.T) {
			f := newFixture(t, testConfig(t, func(m map[string]any) {
				m["identity"] = map[string]any{"unlisted_keys": tt.mode}
			}), nil)
			var got []int
			for i := range len(tt.want) - 1 {
				w := f.do(req{header: map[string]string{"X-API-Key": "made-up-" + strconv.Itoa(i)}, remote: "192.0.2.1:1"})
				got = append(got, w.Code)
			}
			got = append(got, f.do(req{remote: "192.0.2.1:1"}).Code)
			if !slices.Equal(got, tt.want) {
				t.Errorf("answers %v, want %v", got, tt.want)
			}
			// A listed key is its own client, with its own plan, either way.
			w := f.do(req{header: map[string]string{"X-API-Key": proKey}, remote: "192.0.2.1:1"})
			if w.Code != 200 || w.Header().Get("X-RateLimit-Limit") != "10" {
				t.Errorf("pro key: %d, limit %q; want 200, 10", w.Code, w.Header().Get("X-RateLimit-Limit"))
			}
			// Another IP is another client.
			if w := f.do(req{header: map[string]string{"X-API-Key": "made-up-x"}, remote: "198.51.100.9:1"}); w.Code != 200 {
				t.Errorf("made-up key from another IP: %d, want 200", w.Code)
			}
		})
	}
}

func TestHashKey(t *testing.T) {
	// printf 'demo-key-pro' | sha256sum
	if got, want := HashKey("demo-key-pro"), "7b340101426eaa6810ee547503b923bfd895a40cd62b1e52686bf8ffaa8d6e36"; got != want {
		t.Errorf("HashKey = %s, want %s", got, want)
	}
	var h [sha256.Size]byte
	hashKey("demo-key-pro", &h)
	if got, want := keyIdentity(&h), "k:7b340101426eaa6810ee547503b923bfd895a40cd62b1e52686bf8ffaa8d6e36"; got != want {
		t.Errorf("keyIdentity = %s, want %s", got, want)
	}
	if got, want := redact("k:7b340101426eaa6810ee547503b923bfd895a40cd62b1e52686bf8ffaa8d6e36"), "k:7b340101426e…"; got != want {
		t.Errorf("redact = %s, want %s", got, want)
	}
	if got, want := redact("ip:192.0.2.1"), "ip:192.0.2.1"; got != want {
		t.Errorf("redact = %s, want %s", got, want)
	}
}

// TestHashKeyScheme: an Authorization-style key ("<scheme> <credentials>")
// counts with its scheme in lower case and one space after it (RFC 9110
// 11.1: the scheme is case-insensitive and followed by 1*SP), and nothing
// else of a key changes: the credentials keep their case, and a key with no
// space (an X-API-Key value) is hashed as sent.
func TestHashKeyScheme(t *testing.T) {
	sum := func(s string) string {
		h := sha256.Sum256([]byte(s))
		return hex.EncodeToString(h[:])
	}
	tests := []struct{ key, hashedAs string }{
		{"bearer abc", "bearer abc"},
		{"Bearer abc", "bearer abc"},
		{"BEARER abc", "bearer abc"},
		{"Bearer  abc", "bearer abc"},
		{"Bearer \tabc", "bearer abc"},
		{"Basic QWxhZGRpbjpvcGVu", "basic QWxhZGRpbjpvcGVu"},
		{"bearer ABC", "bearer ABC"},
		{"Token a b", "token a b"},
		{"Abc-Key", "Abc-Key"},
		{"Bearer", "Bearer"},
		{"Bearer ", "Bearer "},
		{" Bearer abc", " Bearer abc"},
		{"  Bearer abc", "  Bearer abc"},
		{"\tBearer abc", "\tBearer abc"},
		{"Bearer\tabc", "bearer abc"},
		{"bearer\tabc", "bearer abc"},
		{"A abc", "a abc"},
		{"Z abc", "z abc"},
		{"ZZ abc", "zz abc"},
		{"@[`{ abc", "@[`{ abc"},
		{"A@[`{ abc", "a@[`{ abc"},
		{"Bearer a, BEARER b", "bearer a,BEARER b"},
		{"É abc", "É abc"},
	}
	for _, tt := range tests {
		if got, want := HashKey(tt.key), sum(tt.hashedAs); got != want {
			t.Errorf("HashKey(%q) = %s, want the hash of %q", tt.key, got, tt.hashedAs)
		}
	}
	long := "Bearer " + strings.Repeat("x", 300) // past withScheme's stack buffer
	if got, want := HashKey(long), sum("b"+long[1:]); got != want {
		t.Errorf("HashKey of a 307-byte key = %s, want the hash of its lower-case form", got)
	}
}

// TestAuthSchemeVariantsAreOneClient: "Bearer k", "bearer k", "BEARER k"
// and "Bearer  k" are one credential to the origins that follow RFC 9110
// (passport-http-bearer, Spring Security, DRF's split()); hashed whole,
// each was a fresh default-plan quota for a used-up pro key.
func TestAuthSchemeVariantsAreOneClient(t *testing.T) {
	cfg := testConfig(t, func(m map[string]any) {
		m["api_keys"] = map[string]any{HashKey("Bearer " + proKey): "pro"}
	})
	f := newFixture(t, cfg, nil)
	for i := range 10 { // pro: 10 a minute
		w := httptest.NewRecorder()
		f.h.ServeHTTP(w, rawRequest("192.0.2.1:1", http.Header{"Authorization": {"Bearer " + proKey}}))
		if w.Code != http.StatusOK {
			t.Fatalf("request %d: %d", i, w.Code)
		}
	}
	for _, v := range []string{"Bearer " + proKey, "bearer " + proKey, "BEARER " + proKey, "Bearer  " + proKey} {
		w := httptest.NewRecorder()
		f.h.ServeHTTP(w, rawRequest("192.0.2.1:1", http.Header{"Authorization": {v}}))
		if w.Code != http.StatusTooManyRequests || w.Header().Get("X-RateLimit-Limit") != "10" {
			t.Errorf("%q after the pro key's 10: %d, limit %q; want 429 on the pro plan (10)", v, w.Code, w.Header().Get("X-RateLimit-Limit"))
		}
	}
}

func TestClientAddr(t *testing.T) {
	f := newFixture(t, testConfig(t, nil), nil)
	tests := []struct {
		name   string
		remote string
		xff    []string
		want   string
	}{
		{"socket peer", "192.0.2.1:1234", nil, "ip:192.0.2.1"},
		{"XFF ignored from an untrusted peer", "192.0.2.1:1234", []string{"203.0.113.7"}, "ip:192.0.2.1"},
		{"XFF from a trusted peer", "10.1.2.3:1234", []string{"203.0.113.7"}, "ip:203.0.113.7"},
		{"right-most untrusted wins", "10.1.2.3:1234", []string{"198.51.100.1, 203.0.113.7, 10.9.9.9"}, "ip:203.0.113.7"},
		{"forged left entries are not read", "10.1.2.3:1234", []string{"1.1.1.1, 2.2.2.2, 203.0.113.7"}, "ip:203.0.113.7"},
		{"several XFF headers are one list", "10.1.2.3:1234", []string{"203.0.113.7", "10.9.9.9"}, "ip:203.0.113.7"},
		{"all trusted: the left-most", "10.1.2.3:1234", []string{"10.0.0.5, 10.0.0.6"}, "ip:10.0.0.5"},
		{"garbage hop: last trusted", "10.1.2.3:1234", []string{"203.0.113.7, nonsense, 10.0.0.6"}, "ip:10.0.0.6"},
		{"no XFF from a trusted peer", "10.1.2.3:1234", nil, "ip:10.1.2.3"},
		{"XFF entry with port", "10.1.2.3:1234", []string{"203.0.113.7:5555"}, "ip:203.0.113.7"},
		{"IPv6 peer grouped by /64", "[2001:db8:1:2:3:4:5:6]:443", nil, "ip:2001:db8:1:2::/64"},
		{"IPv6 same /64", "[2001:db8:1:2:ffff::1]:443", nil, "ip:2001:db8:1:2::/64"},
		{"IPv6 trusted proxy single address", "[2001:db8:ffff::1]:443", []string{"[2001:db8:9::1]:80"}, "ip:2001:db8:9::/64"},
		{"IPv6 proxy neighbour not trusted", "[2001:db8:ffff::2]:443", []string{"203.0.113.7"}, "ip:2001:db8:ffff::/64"},
		{"IPv4-mapped IPv6 is IPv4", "[::ffff:192.0.2.9]:1", nil, "ip:192.0.2.9"},
		{"unreadable peer", "pipe", nil, "ip:unknown"},
		{"IPv6 XFF without port", "10.1.2.3:1234", []string{"2001:db8:7::1"}, "ip:2001:db8:7::/64"},
		{"bracketed IPv6 XFF", "10.1.2.3:1234", []string{"[2001:db8:8::1]"}, "ip:2001:db8:8::/64"},
		{"zoned IPv6 peer", "[fe80::1%eth0]:80", nil, "ip:fe80::/64"},
		{"hostname in XFF is garbage", "10.1.2.3:1234", []string{"example.com"}, "ip:10.1.2.3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = tt.remote
			for _, v := range tt.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			a, _ := f.h.clientAddr(r)
			if got := ipIdentity(a, f.h.v6bits); got != tt.want {
				t.Errorf("identity = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestIPv6Prefix(t *testing.T) {
	a := netip.MustParseAddr("2001:db8:aaaa:bbbb:cccc:dddd:eeee:ffff")
	for bits, want := range map[int]string{
		48:  "ip:2001:db8:aaaa::/48",
		64:  "ip:2001:db8:aaaa:bbbb::/64",
		128: "ip:2001:db8:aaaa:bbbb:cccc:dddd:eeee:ffff/128",
	} {
		if got := ipIdentity(a, bits); got != want {
			t.Errorf("ipIdentity(/%d) = %q, want %q", bits, got, want)
		}
	}
	// Two hosts of one /56 share a count under ipv6_prefix 56.
	f := newFixture(t, testConfig(t, func(m map[string]any) {
		m["identity"] = map[string]any{"ipv6_prefix": 56}
	}), nil)
	for i := range 3 {
		f.do(req{remote: "[2001:db8:0:1" + string(rune('0'+i)) + "::1]:1"})
	}
	if w := f.do(req{remote: "[2001:db8:0:ff::1]:1"}); w.Code != 429 {
		t.Errorf("same /56: %d, want 429", w.Code)
	}
	if w := f.do(req{remote: "[2001:db8:0:100::1]:1"}); w.Code != 200 {
		t.Errorf("another /56: %d, want 200", w.Code)
	}
}

// headerAddr is a platform's address of a request (Options.ClientIP,
// PeerIP), read from the header name as the platforms read theirs.
func headerAddr(name string) func(*http.Request) (netip.Addr, bool) {
	return func(r *http.Request) (netip.Addr, bool) {
		a, err := netip.ParseAddr(r.Header.Get(name))
		return a, err == nil
	}
}

func TestClientIPOption(t *testing.T) {
	f := newFixture(t, testConfig(t, nil), func(o *Options) { o.ClientIP = headerAddr("CF-Connecting-IP") })
	for range 3 {
		f.do(req{remote: "10.1.1.1:1", header: map[string]string{"CF-Connecting-IP": "203.0.113.50"}})
	}
	if w := f.do(req{remote: "10.1.1.2:1", header: map[string]string{"CF-Connecting-IP": "203.0.113.50", "X-Forwarded-For": "198.51.100.1"}}); w.Code != 429 {
		t.Errorf("platform IP not used: %d", w.Code)
	}
	// No platform IP: falls back to the socket peer.
	if w := f.do(req{remote: "198.51.100.77:1"}); w.Code != 200 {
		t.Errorf("fallback: %d", w.Code)
	}
	// A platform's client address is the client even when
	// trusted_proxies lists it (testConfig trusts 10.0.0.0/8): Cloudflare's
	// own addresses carry every customer's Worker, with any
	// X-Forwarded-For.
	for i := range 4 {
		w := f.do(req{remote: "10.1.1.3:1", header: map[string]string{"CF-Connecting-IP": "10.0.0.8", "X-Forwarded-For": "198.51.100." + strconv.Itoa(30+i)}})
		if want := map[bool]int{true: 429, false: 200}[i == 3]; w.Code != want {
			t.Errorf("request %d from a trusted platform address, X-Forwarded-For forged: %d, want %d", i+1, w.Code, want)
		}
	}
}

// TestPeerIPOption: the address a platform saw connect (a Lambda's
// sourceIp) stands for the socket peer: the client, unless it is a trusted
// proxy (CloudFront in front of a Lambda), which is then read past in
// X-Forwarded-For.
func TestPeerIPOption(t *testing.T) {
	f := newFixture(t, testConfig(t, nil), func(o *Options) { o.PeerIP = headerAddr("X-Source-IP") })
	for range 3 {
		f.do(req{remote: "10.1.1.1:1", header: map[string]string{"X-Source-IP": "203.0.113.50"}})
	}
	if w := f.do(req{remote: "10.1.1.2:1", header: map[string]string{"X-Source-IP": "203.0.113.50", "X-Forwarded-For": "198.51.100.1"}}); w.Code != 429 {
		t.Errorf("an untrusted peer address not used: %d", w.Code)
	}
	// testConfig trusts 10.0.0.0/8.
	behind := func(client string) int {
		return f.do(req{remote: "10.1.1.3:1", header: map[string]string{"X-Source-IP": "10.0.0.9", "X-Forwarded-For": "1.2.3.4, " + client + ", 10.0.0.9"}}).Code
	}
	for i := range 3 {
		if code := behind("198.51.100.20"); code != 200 {
			t.Fatalf("request %d behind a trusted proxy: %d, want 200", i+1, code)
		}
	}
	if code := behind("198.51.100.20"); code != 429 {
		t.Errorf("fourth request of one client behind a trusted proxy: %d, want 429", code)
	}
	if code := behind("198.51.100.21"); code != 200 {
		t.Errorf("another client behind the same proxy: %d, want 200 (counted as the proxy?)", code)
	}
}

// TestIPLimitsFirst: ip_limits apply before the plan, to keyed clients too,
// and a request they deny is not counted against the plan.
func TestIPLimitsFirst(t *testing.T) {
	cfg := testConfig(t, func(m map[string]any) {
		m["ip_limits"] = []any{map[string]any{"name": "ip-second", "limit": 2, "window": "1s", "scope": "local"}}
	})
	f := newFixture(t, cfg, nil)
	pro := map[string]string{"X-API-Key": proKey}
	w := f.do(req{header: pro})
	wantHeader(t, w, "RateLimit-Policy", `"ip-second";q=2;w=1, "minute";q=10;w=60`)
	// ip-second: t0+10s starts a second, so 1 s to roll over and 1 ns more.
	wantHeader(t, w, "RateLimit", `"ip-second";r=1;t=2, "minute";r=9;t=51`)
	f.do(req{header: pro})
	w = f.do(req{header: pro})
	if w.Code != 429 {
		t.Fatalf("third request in a second: %d, want 429", w.Code)
	}
	// The IP rule decided; the plan was only peeked at (its count is
	// untouched: 2 of 10 used), to keep Retry-After from coming before the
	// plan admits.
	wantHeader(t, w, "RateLimit", `"ip-second";r=0;t=2, "minute";r=8;t=51`)
	wantHeader(t, w, "X-RateLimit-Limit", "2")
	if !strings.Contains(w.Body.String(), `"violated-policies":["ip-second"]`) {
		t.Errorf("body %s", w.Body)
	}
	// A plan denial after the IP rule admitted: the IP rule's count of the
	// refused request is taken back, and its remaining and reset are those
	// of the state without it.
	// One request a second: the IP rule admits all four, the plan denies
	// the fourth at t0+13s.
	f2 := newFixture(t, cfg, nil)
	for range 3 {
		f2.do(req{})
		f2.clock.t = f2.clock.t.Add(time.Second)
	}
	w = f2.do(req{})
	if w.Code != 429 {
		t.Fatalf("4th free request: %d", w.Code)
	}
	// The day rule would admit but counts only the 3 admitted requests:
	// more of it is back when floor(3 × overlap) is 2, 1 ns into the next
	// day bucket, as for the minute (47 s on; its Retry-After).
	// ip-second holds the previous second's request alone: 1 remaining,
	// and floor(1 × overlap) is 0 a nanosecond into the second.
	wantHeader(t, w, "RateLimit", `"ip-second";r=1;t=1, "minute";r=0;t=48, "day";r=97;t=57588`)
	wantHeader(t, w, "Retry-After", "48")
	// Next second, another IP with the same key: the plan saw 2 requests.
	f.clock.t = f.clock.t.Add(time.Second)
	w = f.do(req{header: pro, remote: "198.51.100.3:1"})
	wantHeader(t, w, "RateLimit", `"ip-second";r=1;t=2, "minute";r=7;t=50`)
}

func TestCosts(t *testing.T) {
	f := newFixture(t, testConfig(t, nil), nil)
	pro := map[string]string{"X-API-Key": proKey}
	tests := []struct {
		method, path string
		remaining    string
	}{
		{"POST", "/v1/search", "8"},      // cost 2
		{"GET", "/v1/search", "7"},       // method differs: cost 1
		{"POST", "/v1/search/deep", "5"}, // prefix
		{"POST", "//v1/search", "3"},     // cleaned
		{"POST", "/v1/x/../search", "1"}, // cleaned
		{"POST", "/v2/search", "0"},      // cost 1
	}
	for _, tt := range tests {
		w := f.do(req{method: tt.method, path: tt.path, header: pro})
		wantHeader(t, w, "X-RateLimit-Remaining", tt.remaining)
	}
}

// TestCostRoutes: a path is cleaned as RFC 3986 removes dot segments, so a
// trailing slash survives and no spelling of a route escapes its cost; HEAD
// pays what GET pays. A method pays upper-cased, as Django, Werkzeug and
// Symfony serve it ("post /v1/items/" paid 1, the cost of a method no
// route names). A dot segment made by an encoded slash pays the route an
// origin that keeps %2F inside its segment serves it on: Go's ServeMux
// and Express serve "/v1/items/..%2F42" on /v1/items/{id}, which was
// priced decoded, as /v1/42.
func TestCostRoutes(t *testing.T) {
	cfg := testConfig(t, func(m map[string]any) {
		m["costs"] = []any{
			map[string]any{"method": "POST", "path_prefix": "/v1/items/", "cost": 3},
			map[string]any{"method": "GET", "path_prefix": "/v1/export", "cost": 2},
			map[string]any{"method": "HEAD", "path_prefix": "/v1/probe", "cost": 2},
		}
	})
	f := newFixture(t, cfg, nil)
	tests := []struct {
		method, path string
		want         int64
	}{
		{"POST", "/v1/items/", 3},
		{"POST", "/v1/items/42", 3},
		{"POST", "//v1/items/", 3},
		{"POST", "/v1//items/", 3},
		{"POST", "/v1/items//", 3},
		{"POST", "/v1/items/.", 3},
		{"POST", "/v1/items/./", 3},
		{"POST", "/v1/x/../items/", 3},
		{"POST", "/v1/items/x/..", 3},
		{"POST", "/v1/items/...", 3}, // "..." is a name, not a dot segment
		{"POST", "/v1/items", 1},     // the prefix wants the slash
		{"POST", "/v1/items/..", 1},  // is /v1/
		{"POST", "/v1/items/../x", 1},
		{"GET", "/v1/items/", 1},
		{"GET", "/v1/export", 2},
		{"HEAD", "/v1/export", 2},
		{"HEAD", "//v1/export/", 2},
		{"POST", "/v1/export", 1},
		{"HEAD", "/v1/probe", 2},
		{"GET", "/v1/probe", 1}, // HEAD routes do not match GET
		{"post", "/v1/items/", 3},
		{"Post", "/v1/items/", 3},
		{"get", "/v1/export", 2},
		{"head", "/v1/export", 2},
		{"post", "/v1/export", 1},
		{"delete", "/v1/items/", 1},
		{"POST", "/v1/items%2F42", 3}, // /v1/items/42 to an origin that decodes first
		{"POST", "/v1/items/..%2F42", 3},
		{"POST", "/v1/items/..%2f..%2fsearch", 3},
		{"POST", "/v1/items/%2e%2e%2F42", 3},
		{"POST", "/v1/items/../42", 1},     // a dot segment to every origin
		{"POST", "/v1/items/%2E%2E/42", 3}, // encoded dots: a name to Go's ServeMux and Express
		{"POST", "/v1/items/.%2e/42", 3},
		{"POST", "/v1/items/%2e%2e", 3},
		// Express and ASP.NET Core route without regard to case, Tomcat,
		// Jetty and Spring without ";" parameters: each paid 1 (found by
		// review).
		{"POST", "/V1/ITEMS/", 3},
		{"POST", "/v1/Items/42", 3},
		{"HEAD", "/V1/Export", 2},
		{"POST", "/v1;a=b/items/", 3},
		{"POST", "/v1/items;jsessionid=x/42", 3},
		{"POST", "/v1/x/..;/items/", 3},
		{"POST", "/v1/items;x", 1}, // /v1/items: the prefix wants the slash
		{"POST", "/V1/ITEMS", 1},
		{"POST", "/v1/%3B/items/", 3}, // an encoded ";" read as one: paid high, never low
		// IIS reads a backslash as a slash, and so does the Worker's URL
		// parser, which prices /v1/items/ there: each paid 1 here (found
		// by review).
		{"POST", `/v1\items\42`, 3},
		{"POST", "/v1%5Citems/", 3},
		{"POST", "/v1%5citems%5C42", 3},
		{"POST", `/v1/x\..\items/`, 3},
		{"POST", `/v1\items;a=b\42`, 3},
		{"POST", `/V1\ITEMS\`, 3},
		{"POST", `/v1\item`, 1},
		{"POST", `/v1/x%2F..\items;a=b\42`, 3}, // every reading at once: %2F, "\" and ";"
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			if got := f.h.cost(httptest.NewRequest(tt.method, tt.path, nil)); got != tt.want {
				t.Errorf("cost = %d, want %d", got, tt.want)
			}
		})
	}
	// An origin may serve a request as the method an override header
	// names: the request pays the higher of the two costs.
	overrides := []struct {
		method, path string
		header       http.Header
		want         int64
	}{
		{"GET", "/v1/items/", http.Header{"X-Http-Method-Override": {"POST"}}, 3},
		{"GET", "/v1/items/", http.Header{"X-Http-Method": {" post "}}, 3},
		{"GET", "/v1/items/", http.Header{"X-Method-Override": {"PUT, POST"}}, 3},
		{"GET", "/v1/items/", http.Header{"X-Method-Override": {"PUT", "POST"}}, 3},
		{"POST", "/v1/export", http.Header{"X-Http-Method-Override": {"GET"}}, 2},
		{"POST", "/v1/items/", http.Header{"X-Http-Method-Override": {"GET"}}, 3}, // never lower
		{"GET", "/v1/items/", http.Header{"X-Http-Method-Override": {"DELETE"}}, 1},
		{"GET", "/v1/items/", http.Header{"X-Other": {"POST"}}, 1},
		// Symfony and Laravel read the method from a _method query
		// parameter (found by a second review).
		{"GET", "/v1/items/?_method=POST", nil, 3},
		{"GET", "/v1/items/?a=1&_method=post", nil, 3},
		{"GET", "/v1/items/?x_method=POST", nil, 1},
		// Names as the frameworks decode them (found by a third review).
		{"GET", "/v1/items/?%5Fmethod=POST", nil, 3},
		{"GET", "/v1/items/?a=1&%5fmethod=P%4FST", nil, 3},
		{"GET", "/v1/items/?.method=POST", nil, 3},
		{"GET", "/v1/items/?%2Emethod=POST", nil, 3},
		{"GET", "/v1/items/?%20method=POST", nil, 1}, // PHP drops leading spaces: "method"
		// Found by a fourth review: an encoded letter, PHP's leading
		// spaces and NUL.
		{"GET", "/v1/items/?_%6Dethod=POST", nil, 3},
		{"GET", "/v1/items/?%5F%6D%65%74%68%6F%64=POST", nil, 3},
		{"GET", "/v1/items/?+_method=POST", nil, 3},
		{"GET", "/v1/items/?%20%20.method=POST", nil, 3},
		{"GET", "/v1/items/?_method%00=POST", nil, 3},
		{"GET", "/v1/items/?%5Bmethod=POST", nil, 1}, // PHP drops a name that starts with "["
		// PHP keeps an invalid escape as written (found by a fifth review).
		{"GET", "/v1/items/?_method%00%zz=POST", nil, 3},
		{"GET", "/v1/items/?_method%00%=POST", nil, 3},
		{"GET", "/v1/items/?%5Fmethod%00%g1=POST", nil, 3},
		{"GET", "/v1/items/?_method=P%4FST%", nil, 1}, // "POST%": no route's method
		{"GET", "/v1/items/?_method2=POST", nil, 1},
		{"GET", "/v1/items/?method=POST", nil, 1},
		{"GET", "/v1/items/?%zz=POST&_method=%zz", nil, 1},
	}
	for _, tt := range overrides {
		t.Run(fmt.Sprintf("%s %s %v", tt.method, tt.path, tt.header), func(t *testing.T) {
			r := httptest.NewRequest(tt.method, tt.path, nil)
			r.Header = tt.header
			if got := f.h.cost(r); got != tt.want {
				t.Errorf("cost = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestShadow(t *testing.T) {
	cfg := testConfig(t, func(m map[string]any) { m["shadow"] = true })
	f := newFixture(t, cfg, nil)
	for i := range 5 {
		w := f.do(req{})
		if w.Code != 200 {
			t.Fatalf("request %d: %d in shadow mode", i+1, w.Code)
		}
		if i >= 3 {
			wantHeader(t, w, ShadowHeader, "denied")
			wantHeader(t, w, "X-RateLimit-Remaining", "0")
			wantHeader(t, w, "Retry-After", "")
		} else {
			wantHeader(t, w, ShadowHeader, "")
		}
	}
	if f.served != 5 {
		t.Errorf("origin saw %d, want 5", f.served)
	}
	if n := strings.Count(f.logs.String(), `"msg":"denied"`); n != 2 {
		t.Errorf("%d denied log lines, want 2: %s", n, f.logs)
	}
	if !strings.Contains(f.logs.String(), `"shadow":true`) {
		t.Errorf("log does not say shadow: %s", f.logs)
	}
}

// failStore fails every call; slowStore answers only when the context ends.
type failStore struct{ calls int }

func (s *failStore) Load(ctx context.Context, id string, slots []kvstore.Slot, counts []int64) error {
	s.calls++
	return errors.New("failstore: boom for " + id)
}

func (s *failStore) Add(ctx context.Context, id string, slots []kvstore.Slot, costs []int64) error {
	s.calls++
	return errors.New("failstore: boom for " + id)
}

type slowStore struct{}

func (slowStore) Load(ctx context.Context, id string, slots []kvstore.Slot, counts []int64) error {
	<-ctx.Done()
	return ctx.Err()
}

func (slowStore) Add(ctx context.Context, id string, slots []kvstore.Slot, costs []int64) error {
	<-ctx.Done()
	return ctx.Err()
}

// TestInMemory: the memory stores (and nil, the limiter's own) go without
// a store_timeout timer, a measurable share of the pre-filter's cost; any
// other store, which may wait, gets one.
func TestInMemory(t *testing.T) {
	for _, tt := range []struct {
		name string
		st   kvstore.Store
		want bool
	}{
		{"nil", nil, true},
		{"memstore", memstore.New(), true},
		{"memstore limited", memstore.NewLimited(10), true},
		{"a store that waits", slowStore{}, false},
		{"a store that fails", &failStore{}, false},
	} {
		if got := inMemory(tt.st); got != tt.want {
			t.Errorf("%s: inMemory %t, want %t", tt.name, got, tt.want)
		}
	}
}

func TestStoreErrors(t *testing.T) {
	tests := []struct {
		name    string
		store   kvstore.Store
		onError string
		shadow  bool
		status  int
		header  string
		timeout bool
	}{
		{"failing store, allow", &failStore{}, "allow", false, 200, StoreErrorAllowed, false},
		{"failing store, deny", &failStore{}, "deny", false, 503, StoreErrorDenied, false},
		{"slow store, allow", slowStore{}, "allow", false, 200, StoreErrorAllowed, true},
		{"slow store, deny", slowStore{}, "deny", false, 503, StoreErrorDenied, true},
		{"deny in shadow mode allows", &failStore{}, "deny", true, 200, StoreErrorAllowed, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(t, func(m map[string]any) {
				m["on_store_error"] = tt.onError
				m["store_timeout"] = "20ms"
				m["shadow"] = tt.shadow
			})
			f := newFixture(t, cfg, func(o *Options) { o.Store = tt.store })
			start := time.Now()
			w := f.do(req{header: map[string]string{"X-API-Key": proKey}})
			// The budget: store_timeout, not the slow store's pace. Generous
			// margin for a loaded CI machine.
			if el := time.Since(start); el > 5*time.Second {
				t.Errorf("answered after %v with store_timeout 20ms", el)
			}
			if w.Code != tt.status {
				t.Errorf("status %d, want %d", w.Code, tt.status)
			}
			wantHeader(t, w, StoreHeader, tt.header)
			wantHeader(t, w, "RateLimit", "")
			// A 503 says when to retry: without it, retry logic may retry
			// at once against the failing store.
			wantHeader(t, w, "Retry-After", map[bool]string{true: "1", false: ""}[tt.status == 503])
			if got := f.served; (got == 1) != (tt.status == 200) {
				t.Errorf("origin served %d", got)
			}
			logs := f.logs.String()
			if !strings.Contains(logs, `"msg":"store error"`) || !strings.Contains(logs, `"level":"WARN"`) {
				t.Errorf("no store error line: %s", logs)
			}
			if tt.timeout && !strings.Contains(logs, `"timeout":true`) {
				t.Errorf("timeout not logged: %s", logs)
			}
			if strings.Contains(logs, HashKey(proKey)) || strings.Contains(logs, proKey) {
				t.Errorf("log holds the key or its full hash: %s", logs)
			}
		})
	}
}

// TestLogsNoRawKey: denied lines name the identity by hash prefix only.
// addFails is a memory store whose Add fails once fail is set: a store
// that still reads but can no longer write.
type addFails struct {
	kvstore.Conditional
	fail bool
}

func (s *addFails) Add(ctx context.Context, id string, slots []kvstore.Slot, costs []int64) error {
	if s.fail {
		return errors.New("addfails: boom")
	}
	return s.Conditional.Add(ctx, id, slots, costs)
}

// TestCountDeniedStoreFails: with count_denied, a request the counters
// deny stays a 429 (for the check API, allowed false) when counting it
// fails, even under on_store_error allow; the failure is a store error
// line. It was a store error: let through as error-allowed.
func TestCountDeniedStoreFails(t *testing.T) {
	for _, api := range []bool{false, true} {
		t.Run(map[bool]string{false: "pre-filter", true: "check API"}[api], func(t *testing.T) {
			st := &addFails{Conditional: memstore.New()}
			cfg := testConfig(t, func(m map[string]any) {
				m["count_denied"] = true
				m["on_store_error"] = "allow"
			})
			f := newFixture(t, cfg, func(o *Options) { o.Store = st })
			send := func() *httptest.ResponseRecorder {
				if api {
					return f.do(req{method: http.MethodPost, path: CheckPath, body: `{"key": "` + proKey + `"}`})
				}
				return f.do(req{header: map[string]string{"X-API-Key": proKey}})
			}
			for range 10 {
				send()
			}
			st.fail = true
			w := send()
			wantHeader(t, w, StoreHeader, "")
			wantHeader(t, w, "X-RateLimit-Remaining", "0")
			if api {
				if w.Code != 200 || !strings.Contains(w.Body.String(), `"allowed":false`) {
					t.Errorf("%d %s, want 200 with allowed false", w.Code, w.Body)
				}
			} else if w.Code != http.StatusTooManyRequests || f.served != 10 {
				t.Errorf("status %d, origin served %d; want 429, 10", w.Code, f.served)
			}
			logs := f.logs.String()
			if !strings.Contains(logs, `"msg":"store error"`) || !strings.Contains(logs, `"action":"deny"`) || !strings.Contains(logs, "not counted") {
				t.Errorf("no store error line for the uncounted denial: %s", logs)
			}
		})
	}
}

func TestLogsNoRawKey(t *testing.T) {
	f := newFixture(t, testConfig(t, nil), nil)
	secret := "Bearer sk_live_supersecret"
	for range 5 {
		f.do(req{header: map[string]string{"Authorization": secret}, path: "/v1/items?api_key=leak"})
	}
	logs := f.logs.String()
	if n := strings.Count(logs, "\n"); n != 2 {
		t.Fatalf("%d log lines, want 2 (one per denial): %s", n, logs)
	}
	for _, bad := range []string{"supersecret", "sk_live", HashKey(secret), "leak"} {
		if strings.Contains(logs, bad) {
			t.Errorf("log contains %q: %s", bad, logs)
		}
	}
	var line map[string]any
	if err := json.Unmarshal([]byte(strings.SplitN(logs, "\n", 2)[0]), &line); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"msg": "denied", "identity": "k:" + HashKey(secret)[:12] + "…", "plan": "free", "rule": "minute", "path": "/v1/items", "method": "GET"}
	for k, v := range want {
		if line[k] != v {
			t.Errorf("log %s = %v, want %v", k, line[k], v)
		}
	}
}

func TestHealthAndRoutes(t *testing.T) {
	f := newFixture(t, testConfig(t, nil), nil)
	w := f.do(req{path: "/healthz"})
	if w.Code != 200 || w.Body.String() != "{\"status\":\"ok\"}\n" {
		t.Errorf("healthz = %d %q", w.Code, w.Body)
	}
	wantHeader(t, w, "RateLimit", "")
	if w := f.do(req{method: "POST", path: "/healthz"}); w.Code != 405 || w.Header().Get("Allow") != "GET, HEAD" {
		t.Errorf("POST /healthz = %d", w.Code)
	}
	if w := f.do(req{path: "/v1/check"}); w.Code != 405 || w.Header().Get("Allow") != "POST" {
		t.Errorf("GET /v1/check = %d", w.Code)
	}
	// Without Next only the check API and health check exist.
	f = newFixture(t, testConfig(t, nil), func(o *Options) { o.Next = nil })
	if w := f.do(req{path: "/anything"}); w.Code != 404 || w.Header().Get("Content-Type") != "application/problem+json" {
		t.Errorf("no origin: %d %s", w.Code, w.Header().Get("Content-Type"))
	}
}

func TestNewRejectsInvalidConfig(t *testing.T) {
	_, err := New(Options{Config: &config.Config{DefaultPlan: "gold"}})
	if err == nil || !strings.Contains(err.Error(), `default_plan: "gold": no such plan`) {
		t.Errorf("New = %v", err)
	}
	var fe *config.FieldError
	if !errors.As(err, &fe) {
		t.Errorf("error %T does not wrap *config.FieldError", err)
	}
	h, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if h.defPlan.name != "free" || h.defPlan.minLimit != 60 {
		t.Errorf("default handler plan %+v", h.defPlan)
	}
	// Validated takes the caller's word: New does not validate again.
	if _, err := New(Options{Config: &config.Config{DefaultPlan: "gold"}, Validated: true}); err != nil {
		t.Errorf("Validated: New = %v, want no validation", err)
	}
}

// TestCountDenied: with count_denied a client that keeps trying stays
// blocked longer.
func TestCountDenied(t *testing.T) {
	cfg := testConfig(t, func(m map[string]any) { m["count_denied"] = true })
	f := newFixture(t, cfg, nil)
	for range 6 {
		f.do(req{})
	}
	w := f.do(req{})
	// 7 counted in this bucket: a cost of 1 fits once floor(7×overlap) <= 2,
	// overlap < 3/7: 34.28... s into the next bucket, 50 s from now.
	wantHeader(t, w, "Retry-After", "85")
}

func TestClockBackwards(t *testing.T) {
	f := newFixture(t, testConfig(t, nil), nil)
	for range 3 {
		f.do(req{})
	}
	// Within the minute the limiter holds (limiter's maxHold); a longer
	// step back is a correction it follows (limiter.TestClockCorrection).
	f.clock.t = f.clock.t.Add(-50 * time.Second)
	if w := f.do(req{}); w.Code != 429 {
		t.Errorf("a clock step back reopened the window: %d", w.Code)
	}
}

// idStore records the identities a limiter asks it about and counts nothing.
type idStore struct{ ids []string }

func (s *idStore) Load(_ context.Context, id string, _ []kvstore.Slot, counts []int64) error {
	s.ids = append(s.ids, id)
	clear(counts)
	return nil
}

func (s *idStore) Add(_ context.Context, id string, _ []kvstore.Slot, _ []int64) error {
	s.ids = append(s.ids, id)
	return nil
}

// TestKeyIdentities: a configured key (whose identity New builds once) and
// an unknown key reach the store as "k:" and the SHA-256 hex of the key,
// from the pre-filter and from the check API alike.
func TestKeyIdentities(t *testing.T) {
	for _, key := range []string{proKey, "unknown-key"} {
		for _, api := range []string{"pre-filter", "check"} {
			t.Run(api+"/"+key, func(t *testing.T) {
				st := &idStore{}
				f := newFixture(t, testConfig(t, nil), func(o *Options) { o.Store = st })
				var w *httptest.ResponseRecorder
				if api == "check" {
					w = f.do(req{method: http.MethodPost, path: CheckPath, body: `{"key":"` + key + `"}`})
				} else {
					w = f.do(req{header: map[string]string{"X-API-Key": key}})
				}
				if w.Code != http.StatusOK {
					t.Fatalf("status %d: %s", w.Code, w.Body)
				}
				want := "k:" + HashKey(key)
				if len(st.ids) == 0 {
					t.Fatal("the store was not asked")
				}
				for _, id := range st.ids {
					if id != want {
						t.Errorf("store identity %q, want %q", id, want)
					}
				}
			})
		}
	}
}

// TestRetryAfterCoversThePlanOnIPDenial: when the ip rules deny a client
// whose plan is also used up, Retry-After is the later of the two waits,
// not the ip rule's second (found in review: retrying after 2 s met the
// plan's 429).
func TestRetryAfterCoversThePlanOnIPDenial(t *testing.T) {
	cfg := testConfig(t, func(m map[string]any) {
		m["ip_limits"] = []any{map[string]any{"name": "ip-second", "limit": 5, "window": "1s", "scope": "local"}}
	})
	f := newFixture(t, cfg, nil)
	var planWait string
	for i := range 5 { // the free plan admits 3; 4 and 5 are its denials
		w := f.do(req{})
		if i >= 3 {
			if w.Code != 429 {
				t.Fatalf("request %d: %d, want the plan's 429", i+1, w.Code)
			}
			planWait = w.Header().Get("Retry-After")
		}
	}
	w := f.do(req{}) // the 6th in this second: the ip rule denies
	if w.Code != 429 {
		t.Fatalf("6th request: %d, want 429", w.Code)
	}
	if got := w.Header().Get("Retry-After"); got != planWait {
		t.Errorf("Retry-After on the ip denial = %s, want the plan's %s", got, planWait)
	}
	wantHeader(t, w, "X-RateLimit-Limit", "3") // the plan's minute rule decides
}
