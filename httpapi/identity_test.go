package httpapi

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// countedAs returns the identity the store was asked about for one request
// through the pre-filter (testConfig has no ip_limits: only the plan's).
func countedAs(t *testing.T, edit func(m map[string]any), remote string, header http.Header) string {
	t.Helper()
	st := &idStore{}
	f := newFixture(t, testConfig(t, edit), func(o *Options) { o.Store = st })
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, rawRequest(remote, header))
	if w.Code != http.StatusOK {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	if len(st.ids) == 0 {
		t.Fatal("the store was not asked")
	}
	for _, id := range st.ids[1:] {
		if id != st.ids[0] {
			t.Fatalf("one request counted as %q", st.ids)
		}
	}
	return st.ids[0]
}

// rawRequest is a GET whose header lines are exactly header's (several
// values of a name are several lines, as net/http's server reads them).
func rawRequest(remote string, header http.Header) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/api", nil)
	r.RemoteAddr = remote
	for k, vs := range header {
		r.Header[http.CanonicalHeaderKey(k)] = vs
	}
	return r
}

// TestClientAddrForms: the address forms a socket peer and X-Forwarded-For
// come in. testConfig trusts 10.0.0.0/8 and 2001:db8:ffff::1.
func TestClientAddrForms(t *testing.T) {
	xff := func(vs ...string) http.Header { return http.Header{"X-Forwarded-For": vs} }
	tests := []struct {
		name   string
		remote string
		header http.Header
		want   string
	}{
		{"spaces and tabs", "10.0.0.1:1", xff("  203.0.113.7 ,\t10.0.0.6  "), "ip:203.0.113.7"},
		{"empty element between hops", "10.0.0.1:1", xff("203.0.113.7, , 10.0.0.6"), "ip:203.0.113.7"},
		{"trailing comma", "10.0.0.1:1", xff("203.0.113.7,"), "ip:203.0.113.7"},
		{"leading comma", "10.0.0.1:1", xff(", 203.0.113.7"), "ip:203.0.113.7"},
		{"only commas", "10.0.0.1:1", xff(" , ,"), "ip:10.0.0.1"},
		{"empty last line", "10.0.0.1:1", xff("203.0.113.7", ""), "ip:203.0.113.7"},
		{"lines read right to left", "10.0.0.1:1", xff("198.51.100.1", "203.0.113.7, 10.0.0.6", "10.0.0.5"), "ip:203.0.113.7"},
		{"IPv4 with port", "10.0.0.1:1", xff("203.0.113.7:5678"), "ip:203.0.113.7"},
		{"IPv6 with port", "10.0.0.1:1", xff("[2001:db8:1:2::1]:443"), "ip:2001:db8:1:2::/64"},
		{"IPv6 zone", "10.0.0.1:1", xff("fe80::1%eth0"), "ip:fe80::/64"},
		{"IPv6 zone and port", "10.0.0.1:1", xff("[fe80::1%eth0]:443"), "ip:fe80::/64"},
		{"IPv4-mapped", "10.0.0.1:1", xff("::ffff:203.0.113.7"), "ip:203.0.113.7"},
		{"IPv4-mapped with port", "10.0.0.1:1", xff("[::ffff:203.0.113.7]:80"), "ip:203.0.113.7"},
		{"IPv4-mapped proxy is trusted", "10.0.0.1:1", xff("203.0.113.7, ::ffff:10.0.0.9"), "ip:203.0.113.7"},
		{"IPv4-mapped peer is trusted", "[::ffff:10.0.0.1]:1", xff("203.0.113.7"), "ip:203.0.113.7"},
		{"garbage left of the client", "10.0.0.1:1", xff("\x00\xff, 203.0.113.7"), "ip:203.0.113.7"},
		{"garbage hop: the last proxy", "10.0.0.1:1", xff("203.0.113.7, unknown, 10.0.0.6"), "ip:10.0.0.6"},
		{"hostname", "10.0.0.1:1", xff("client.example"), "ip:10.0.0.1"},
		{"port out of range", "10.0.0.1:1", xff("203.0.113.7:99999"), "ip:10.0.0.1"},
		{"only proxies: the left-most", "10.0.0.1:1", xff("10.0.0.2, 10.0.0.3"), "ip:10.0.0.2"},
		{"untrusted peer: XFF ignored", "203.0.113.9:1", xff("198.51.100.1"), "ip:203.0.113.9"},
		{"trusted IPv6 proxy's neighbour", "[2001:db8:ffff::2]:1", xff("198.51.100.1"), "ip:2001:db8:ffff::/64"},
		{"peer without port", "203.0.113.7", nil, "ip:203.0.113.7"},
		{"IPv6 peer without port", "2001:db8:1:2::1", nil, "ip:2001:db8:1:2::/64"},
		{"bracketed IPv6 peer without port", "[2001:db8:1:2::1]", nil, "ip:2001:db8:1:2::/64"},
		{"zoned peer", "[fe80::1%eth0]:80", nil, "ip:fe80::/64"},
		{"IPv4-mapped peer", "[::ffff:203.0.113.7]:1", nil, "ip:203.0.113.7"},
		{"empty peer (a Unix socket)", "", nil, "ip:unknown"},
		{"abstract socket peer", "@", nil, "ip:unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := countedAs(t, nil, tt.remote, tt.header); got != tt.want {
				t.Errorf("counted as %q, want %q", got, tt.want)
			}
		})
	}
}

// TestSameClientAnyForm: a client is one count whatever form its address
// arrives in: exhausting the quota in one form limits the others.
func TestSameClientAnyForm(t *testing.T) {
	forms := []struct {
		remote string
		header http.Header
	}{
		{"203.0.113.7:40000", nil},
		{"[::ffff:203.0.113.7]:40001", nil},
		{"10.0.0.1:1", http.Header{"X-Forwarded-For": {"::ffff:203.0.113.7"}}},
		{"10.0.0.1:1", http.Header{"X-Forwarded-For": {"203.0.113.7:5678, , 10.0.0.6"}}},
		{"[2001:db8:ffff::1]:443", http.Header{"X-Forwarded-For": {"[::ffff:203.0.113.7]:80,"}}},
	}
	for i, first := range forms {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			f := newFixture(t, testConfig(t, nil), nil)
			for range 3 { // the free plan admits 3 a minute
				f.h.ServeHTTP(httptest.NewRecorder(), rawRequest(first.remote, first.header))
			}
			for j, other := range forms {
				w := httptest.NewRecorder()
				f.h.ServeHTTP(w, rawRequest(other.remote, other.header))
				if w.Code != http.StatusTooManyRequests {
					t.Errorf("form %d after form %d: %d, want 429", j, i, w.Code)
				}
			}
			// Another client is not limited.
			w := httptest.NewRecorder()
			f.h.ServeHTTP(w, rawRequest("203.0.113.8:1", nil))
			if w.Code != http.StatusOK {
				t.Errorf("another client: %d", w.Code)
			}
		})
	}
}

// TestIPv6PrefixGroups: ipv6_prefix groups clients by that many bits.
func TestIPv6PrefixGroups(t *testing.T) {
	const base = "2001:db8:aaaa:bbbb:cccc:dddd:eeee:1"
	tests := []struct {
		bits     int
		other    string
		same     bool
		identity string
	}{
		{48, "2001:db8:aaaa:ffff::1", true, "ip:2001:db8:aaaa::/48"},
		{48, "2001:db8:aaab::1", false, "ip:2001:db8:aaaa::/48"},
		{64, "2001:db8:aaaa:bbbb::2", true, "ip:2001:db8:aaaa:bbbb::/64"},
		{64, "2001:db8:aaaa:bbbc::1", false, "ip:2001:db8:aaaa:bbbb::/64"},
		{128, base, true, "ip:2001:db8:aaaa:bbbb:cccc:dddd:eeee:1/128"},
		{128, "2001:db8:aaaa:bbbb:cccc:dddd:eeee:2", false, "ip:2001:db8:aaaa:bbbb:cccc:dddd:eeee:1/128"},
	}
	for _, tt := range tests {
		t.Run(strconv.Itoa(tt.bits)+"/"+tt.other, func(t *testing.T) {
			edit := func(m map[string]any) {
				m["identity"] = map[string]any{"ipv6_prefix": tt.bits, "trusted_proxies": []any{"10.0.0.0/8"}}
			}
			if got := countedAs(t, edit, "["+base+"]:1", nil); got != tt.identity {
				t.Errorf("identity %q, want %q", got, tt.identity)
			}
			f := newFixture(t, testConfig(t, edit), nil)
			for range 3 {
				f.h.ServeHTTP(httptest.NewRecorder(), rawRequest("["+base+"]:1", nil))
			}
			// The other address through a trusted proxy, with a zone: the
			// same grouping.
			w := httptest.NewRecorder()
			f.h.ServeHTTP(w, rawRequest("10.0.0.1:1", http.Header{"X-Forwarded-For": {"[" + tt.other + "%eth0]:443"}}))
			if got, want := w.Code == http.StatusTooManyRequests, tt.same; got != want {
				t.Errorf("%s after /%d of %s: %d", tt.other, tt.bits, base, w.Code)
			}
		})
	}
}

// TestLongForwardedFor: a chain as long as a header can be is walked
// without allocating, and the identity stays short.
func TestLongForwardedFor(t *testing.T) {
	f := newFixture(t, testConfig(t, nil), nil)
	proxies := strings.Repeat("10.0.0.5, ", 6000) // 60 KB, about the local server's header limit
	tests := []struct {
		name, xff, want string
	}{
		{"only proxies", proxies + "10.0.0.6", "ip:10.0.0.5"},
		{"a client left of them", "198.51.100.1, 2001:db8:1:2:3:4:5:6, " + proxies + "10.0.0.6", "ip:2001:db8:1:2::/64"},
		{"forged entries left of the client", strings.Repeat("1.1.1.1, ", 6000) + "203.0.113.7", "ip:203.0.113.7"},
		{"one long entry", strings.Repeat("1", 60000), "ip:10.0.0.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rawRequest("10.0.0.1:1", http.Header{"X-Forwarded-For": {tt.xff}})
			a, _ := f.h.clientAddr(r)
			if got := ipIdentity(a, f.h.v6bits); got != tt.want {
				t.Errorf("identity %q, want %q", got, tt.want)
			}
			if n := testing.AllocsPerRun(10, func() { f.h.clientAddr(r) }); n > 1 {
				// One: the error of an entry that does not parse.
				t.Errorf("clientAddr allocates %v times", n)
			}
		})
	}
}

// TestAPIKeyForms: which header value is the key, and that the identity is
// the SHA-256 of exactly that value, with an Authorization-style scheme in
// lower case (TestHashKeyScheme).
func TestAPIKeyForms(t *testing.T) {
	k := func(key string) string { // not HashKey, the code under test
		sum := sha256.Sum256([]byte(key))
		return "k:" + hex.EncodeToString(sum[:])
	}
	big := strings.Repeat("0123456789abcdef", 100<<10/16) // 100 KB
	tests := []struct {
		name   string
		header http.Header
		want   string
	}{
		{"X-API-Key", http.Header{"X-API-Key": {"abc"}}, k("abc")},
		{"empty X-API-Key: no key", http.Header{"X-API-Key": {""}}, "ip:192.0.2.1"},
		{"empty X-API-Key: Authorization", http.Header{"X-API-Key": {""}, "Authorization": {"Bearer z"}}, k("bearer z")},
		{"X-API-Key before Authorization", http.Header{"X-API-Key": {"abc"}, "Authorization": {"Bearer z"}}, k("abc")},
		{"two lines: joined with commas", http.Header{"X-API-Key": {"a", "b"}}, k("a,b")},
		{"three lines", http.Header{"X-API-Key": {"a", "b", "c"}}, k("a,b,c")},
		{"empty first line", http.Header{"X-API-Key": {"", "b"}}, k(",b")},
		{"two Authorization lines", http.Header{"Authorization": {"Bearer a", "Bearer b"}}, k("bearer a,Bearer b")},
		{"Bearer", http.Header{"Authorization": {"Bearer abc"}}, k("bearer abc")},
		{"bearer", http.Header{"Authorization": {"bearer abc"}}, k("bearer abc")},
		{"Basic", http.Header{"Authorization": {"Basic dXNlcjpwYXNz"}}, k("basic dXNlcjpwYXNz")},
		{"no scheme", http.Header{"Authorization": {"abc"}}, k("abc")},
		{"a scheme with commas", http.Header{"Authorization": {`Custom username="u", realm="r"`}}, k(`custom username="u",realm="r"`)},
		{"Digest: no key", http.Header{"Authorization": {`Digest username="u", realm="r"`}}, "ip:192.0.2.1"},
		// Lines joined as a Worker gets them (JavaScript joins them with
		// ", "), with white space around elements, empty elements.
		{"comma and space", http.Header{"X-API-Key": {"a, b"}}, k("a,b")},
		{"spaces and tabs around elements", http.Header{"X-API-Key": {"a \t,\t b ,c"}}, k("a,b,c")},
		{"lines with spaces", http.Header{"X-API-Key": {"a ", " b, c"}}, k("a,b,c")},
		{"empty elements", http.Header{"X-API-Key": {" , a,"}}, k(",a,")},
		{"empty first element", http.Header{"X-API-Key": {", b"}}, k(",b")},
		{"non-ASCII", http.Header{"X-API-Key": {"clé-ключ-鍵"}}, k("clé-ключ-鍵")},
		{"Latin-1 bytes", http.Header{"X-API-Key": {"cl\xe9"}}, k("cl\xe9")},
		{"100 KB", http.Header{"X-API-Key": {big}}, k(big)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := countedAs(t, nil, "192.0.2.1:1", tt.header)
			if got != tt.want {
				t.Errorf("counted as %q, want %q", got, tt.want)
			}
			if len(got) > 66 {
				t.Errorf("identity of %d bytes", len(got))
			}
		})
	}
}

// TestAPIKeysDistinct: keys that differ only in case, in inner white
// space or in how their lines are split are separate clients, except in
// the case of an Authorization scheme and the spaces after it (RFC 9110
// 11.1); the lines of a header are one key, not its first line.
func TestAPIKeysDistinct(t *testing.T) {
	key := func(vs ...string) http.Header { return http.Header{"X-API-Key": vs} }
	auth := func(v string) http.Header { return http.Header{"Authorization": {v}} }
	tests := []struct {
		name         string
		used, other  http.Header
		otherLimited bool
	}{
		{"case", key("abc"), key("ABC"), false},
		{"inner space", key("a bc"), key("abc"), false},
		{"scheme case", auth("Bearer abc"), auth("bearer abc"), true},
		{"spaces after the scheme", auth("Bearer abc"), auth("Bearer   abc"), true},
		{"credentials case", auth("Bearer abc"), auth("Bearer ABC"), false},
		{"scheme", auth("Bearer abc"), auth("Token abc"), false},
		{"header does not matter", key("Bearer abc"), auth("Bearer abc"), true},
		{"lines are not the first line", key("a", "b"), key("a"), false},
		{"lines are their joined value", key("a", "b"), key("a,b"), true},
		{"space after the comma", key("a", "b"), key("a, b"), true},
		{"a comma is no space", key("a,b"), key("a b"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, testConfig(t, nil), nil)
			for range 3 {
				f.h.ServeHTTP(httptest.NewRecorder(), rawRequest("192.0.2.1:1", tt.used))
			}
			w := httptest.NewRecorder()
			f.h.ServeHTTP(w, rawRequest("192.0.2.1:1", tt.used))
			if w.Code != http.StatusTooManyRequests {
				t.Fatalf("4th request: %d, want 429", w.Code)
			}
			w = httptest.NewRecorder()
			f.h.ServeHTTP(w, rawRequest("198.51.100.1:1", tt.other))
			if got := w.Code == http.StatusTooManyRequests; got != tt.otherLimited {
				t.Errorf("%q after %q: %d", tt.other, tt.used, w.Code)
			}
		})
	}
}

// TestLogsHoldNoKey: no log line, whatever was logged (denials of the
// pre-filter and the check API, store errors), holds a raw key, an
// Authorization value or a key's full hash.
func TestLogsHoldNoKey(t *testing.T) {
	big := "sk_live_" + strings.Repeat("Zq9", 100<<10/3)
	secrets := []http.Header{
		{"X-API-Key": {big}},
		{"X-API-Key": {"sk_live_line1", "sk_live_line2"}},
		{"Authorization": {"Basic dXNlcjpzM2NyM3Q="}},
		{"Authorization": {"Bearer sk_live_bearer"}},
		{"X-API-Key": {"ключ-sk_live"}},
	}
	for _, onError := range []string{"", "allow", "deny"} {
		t.Run("store error "+onError, func(t *testing.T) {
			var logs bytes.Buffer
			f := newFixture(t, testConfig(t, func(m map[string]any) {
				if onError != "" {
					m["on_store_error"] = onError
				}
			}), func(o *Options) {
				o.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
				if onError != "" {
					o.Store = &failStore{}
				}
			})
			for _, h := range secrets {
				for range 4 {
					f.h.ServeHTTP(httptest.NewRecorder(), rawRequest("192.0.2.1:1", h))
				}
				for _, v := range h {
					body := `{"key":"` + strings.Join(v, ",") + `"}`
					if len(body) > MaxCheckBody {
						continue
					}
					for range 4 {
						f.do(req{method: http.MethodPost, path: CheckPath, body: body})
					}
				}
			}
			out := logs.String()
			if want := "denied"; onError != "" {
				want = "store error"
				if strings.Count(out, `"msg":"`+want+`"`) < len(secrets) {
					t.Fatalf("too few %q lines: %s", want, out)
				}
			} else if strings.Count(out, `"msg":"denied"`) < 2*len(secrets) {
				t.Fatalf("too few denied lines: %s", out)
			}
			for _, h := range secrets {
				for _, v := range h {
					whole := strings.Join(v, ",")
					for _, s := range append(v, whole, HashKey(whole), "dXNlcjpzM2NyM3Q", "sk_live") {
						if strings.Contains(out, s) {
							t.Errorf("logs hold %.40q", s)
						}
					}
				}
			}
		})
	}
}

// TestAPIKeyAllocates: hashing a key reads it in place: no allocation for
// one header line, however long the key (it copied every key over 32
// bytes).
func TestAPIKeyAllocates(t *testing.T) {
	f := newFixture(t, testConfig(t, nil), nil)
	for _, n := range []int{8, 40, 100 << 10} {
		r := rawRequest("192.0.2.1:1", http.Header{"X-API-Key": {strings.Repeat("k", n)}})
		var hash [sha256.Size]byte
		if got := testing.AllocsPerRun(20, func() { f.h.apiKey(r, &hash) }); got != 0 {
			t.Errorf("key of %d bytes: %v allocations", n, got)
		}
	}
	// A scheme to lower (withScheme's copy): none up to 128 bytes either.
	for _, n := range []int{40, 128} {
		r := rawRequest("192.0.2.1:1", http.Header{"Authorization": {"BEARER " + strings.Repeat("k", n-len("BEARER "))}})
		var hash [sha256.Size]byte
		if got := testing.AllocsPerRun(20, func() { f.h.apiKey(r, &hash) }); got != 0 {
			t.Errorf("Authorization of %d bytes with its scheme in upper case: %v allocations", n, got)
		}
	}
}

// TestHexPairs: hashKey's table writes every byte as encoding/hex does,
// digit order and case; a wrong entry changed the identity (and the
// api_keys match) only of keys whose hash holds that byte.
func TestHexPairs(t *testing.T) {
	for b := range 256 {
		var out [2]byte
		binary.LittleEndian.PutUint16(out[:], hexPairs[b])
		if want := hex.EncodeToString([]byte{byte(b)}); string(out[:]) != want {
			t.Errorf("byte %#x: %q, want %q", b, out, want)
		}
	}
}

// BenchmarkAPIKey: the identity of a keyed request, for a short key, a
// typical one (sk_live_ and 32 characters) and a 100 KB one.
func BenchmarkAPIKey(b *testing.B) {
	f := newFixture(b, testConfig(b, nil), nil)
	for _, n := range []int{8, 40, 100 << 10} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			r := rawRequest("192.0.2.1:1", http.Header{"X-API-Key": {strings.Repeat("k", n)}})
			var hash [sha256.Size]byte
			b.ReportAllocs()
			for b.Loop() {
				f.h.apiKey(r, &hash)
			}
		})
	}
}

// TestKeyHeaderSpellings: an origin that reads headers CGI-style takes
// X_API_KEY, x-api-key and X-Api_Key for one name. Only the configured
// spelling of a key header reaches the origin (and is counted); any other
// spelling of it is dropped, and so is every other name with an
// underscore, unless a key header is configured so (api_key).
func TestKeyHeaderSpellings(t *testing.T) {
	for _, tt := range []struct {
		name    string
		headers []any // identity.headers; nil: the default
		sent    map[string]string
		kept    []string // what reaches the origin of sent
		limit   string   // X-RateLimit-Limit: 10 for the pro key, 3 for anonymous
	}{
		{"default", nil, map[string]string{"X_API_KEY": proKey, "X-Other_Name": "v", "X-Custom": "v"}, []string{"X-Custom"}, "3"},
		{"default, key as configured", nil, map[string]string{"X-API-Key": proKey, "X_Real_IP": "203.0.113.7"}, []string{"X-Api-Key"}, "10"},
		{"api_key configured", []any{"api_key"}, map[string]string{"api_key": proKey, "Other_Name": "v"}, []string{"Api_key"}, "10"},
		{"api_key configured, sent as Api-Key", []any{"api_key"}, map[string]string{"Api-Key": proKey, "X-Custom": "v"}, []string{"X-Custom"}, "3"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var seen http.Header
			f := newFixture(t, testConfig(t, func(m map[string]any) {
				if tt.headers != nil {
					m["identity"] = map[string]any{"headers": tt.headers}
				}
			}), func(o *Options) {
				o.Next = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen = r.Header.Clone() })
			})
			w := f.do(req{header: tt.sent})
			wantHeader(t, w, "X-RateLimit-Limit", tt.limit)
			got := slices.Sorted(maps.Keys(seen))
			if !slices.Equal(got, tt.kept) {
				t.Errorf("the origin got %v, want %v", got, tt.kept)
			}
		})
	}
}

func TestCGIEqual(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want bool
	}{
		{"X-Api-Key", "X_API_KEY", true},
		{"X-Api-Key", "x-api_key", true},
		{"Api_key", "Api-Key", true},
		{"X-Api-Key", "X-Api-Kez", false},
		{"X-Api-Key", "X-Api-Key1", false},
		{"X.Api", "X-Api", false},
		{"X-Api", "X=Api", false},
	} {
		if got := cgiEqual(tt.a, tt.b); got != tt.want {
			t.Errorf("cgiEqual(%q, %q) = %t, want %t", tt.a, tt.b, got, tt.want)
		}
	}
}

// TestKeyLinesReachOriginAsCounted: a key header sent on several lines is
// counted as its lines joined (k1,k2), and reaches the origin so, one
// line: an origin that reads one line (Go's Header.Get, servlets and hyper
// read the first; others the last) served the pro key, used up, once more
// per made-up other line, each a fresh identity of the default plan. The
// Lambda (API Gateway joins the lines) and the Worker (fetch joins them)
// send the origin one line already.
func TestKeyLinesReachOriginAsCounted(t *testing.T) {
	var got [][]string // the key header's lines, per request the origin served
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, slices.Concat(r.Header.Values("X-Api-Key"), r.Header.Values("Authorization")))
	}))
	defer origin.Close()
	u, err := url.Parse(origin.URL)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name  string
		lines func(i int) http.Header
		want  func(i int) string
	}{
		{"made-up line after the key",
			func(i int) http.Header { return http.Header{"X-API-Key": {proKey, "x" + strconv.Itoa(i)}} },
			func(i int) string { return proKey + ",x" + strconv.Itoa(i) }},
		{"made-up line before the key",
			func(i int) http.Header { return http.Header{"X-API-Key": {"x" + strconv.Itoa(i), proKey}} },
			func(i int) string { return "x" + strconv.Itoa(i) + "," + proKey }},
		{"empty line before the key",
			func(int) http.Header { return http.Header{"X-API-Key": {"", proKey}} },
			func(int) string { return "," + proKey }},
		{"the key twice",
			func(int) http.Header { return http.Header{"X-API-Key": {proKey, proKey}} },
			func(int) string { return proKey + "," + proKey }},
		{"Authorization on two lines",
			func(i int) http.Header {
				return http.Header{"Authorization": {"Bearer " + proKey, "Bearer x" + strconv.Itoa(i)}}
			},
			func(i int) string { return "Bearer " + proKey + ",Bearer x" + strconv.Itoa(i) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, testConfig(t, nil), func(o *Options) { o.Next = NewProxy(u, nil, nil) })
			for i := range 11 { // the pro key's 10 a minute, used up
				w := httptest.NewRecorder()
				f.h.ServeHTTP(w, rawRequest("192.0.2.1:1", http.Header{"X-API-Key": {proKey}, "Authorization": {"Bearer " + proKey}}))
				if want := map[bool]int{true: 200, false: 429}[i < 10]; w.Code != want {
					t.Fatalf("pro request %d: status %d, want %d", i, w.Code, want)
				}
			}
			got = nil
			for i := range 3 { // the free plan's 3 a minute, for each identity
				w := httptest.NewRecorder()
				f.h.ServeHTTP(w, rawRequest("192.0.2.1:1", tt.lines(i)))
				if w.Code != http.StatusOK {
					t.Fatalf("request %d: status %d", i, w.Code)
				}
			}
			for i, lines := range got {
				if want := []string{tt.want(i)}; !slices.Equal(lines, want) {
					t.Errorf("request %d: the origin got the key header as %q, want %q (one line, as counted)", i, lines, want)
				}
			}
		})
	}
}

// TestLoggedPathBounded: a client's path and method reach a log line cut to
// maxLogged bytes, at a character's start: a client refused at will made
// every denied line carry its 64 KiB path.
func TestLoggedPathBounded(t *testing.T) {
	long := "/" + strings.Repeat("é", 40<<10) // 2-byte characters, 80 KiB
	for _, tt := range []struct{ in, want string }{
		{"/v1/items", "/v1/items"},
		{strings.Repeat("a", maxLogged), strings.Repeat("a", maxLogged)},
		{strings.Repeat("a", maxLogged+1), strings.Repeat("a", maxLogged) + "…"},
		{long, long[:maxLogged-1] + "…"}, // byte 512 is inside an é
	} {
		if got := Logged(tt.in); got != tt.want {
			t.Errorf("Logged(%d bytes) = %d bytes %q…, want %d bytes", len(tt.in), len(got), got[:min(len(got), 20)], len(tt.want))
		}
	}
	for _, store := range []string{"denied", "store error"} {
		t.Run(store, func(t *testing.T) {
			var logs bytes.Buffer
			f := newFixture(t, testConfig(t, func(m map[string]any) { m["on_store_error"] = "deny" }), func(o *Options) {
				o.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
				if store == "store error" {
					o.Store = &failStore{}
				}
			})
			for range 4 { // free: 3 a minute
				r := rawRequest("192.0.2.1:1", nil)
				r.URL.Path = long
				f.h.ServeHTTP(httptest.NewRecorder(), r)
			}
			n := 0
			for l := range strings.Lines(logs.String()) {
				var m map[string]any
				if err := json.Unmarshal([]byte(l), &m); err != nil {
					t.Fatal(err)
				}
				if m["msg"] != store {
					continue
				}
				n++
				if p, _ := m["path"].(string); p != long[:maxLogged-1]+"…" {
					t.Errorf("%s line: path of %d bytes, want %d", store, len(p), maxLogged-1+len("…"))
				}
			}
			if n == 0 {
				t.Fatalf("no %q line: %s", store, logs.String())
			}
		})
	}
}
