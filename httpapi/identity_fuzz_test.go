package httpapi

import (
	"crypto/sha256"
	"net/http"
	"net/netip"
	"net/textproto"
	"strings"
	"testing"
)

// fuzzIdentity is the identity admit counts a request as: the key's,
// when a key header carries one (the listed key's, or its own hash's
// unless unlisted_keys is "ip"), else the client IP's.
func fuzzIdentity(h *Handler, r *http.Request) string {
	id := h.ipID(r)
	var sum [sha256.Size]byte
	if h.apiKey(r, &sum) {
		if kid, _, ok := h.keys.find(&sum); ok {
			return kid
		}
		if !h.unlistedIP {
			return keyIdentity(&sum)
		}
	}
	return id
}

// wellFormedID reports why id is not one of the identities identity.go
// lists (k:<64 hex>, ip:<IPv4>, ip:<IPv6 prefix>/<v6bits>, ip:unknown),
// or "" when it is.
func wellFormedID(id string, v6bits int) string {
	if len(id) > 66 {
		return "longer than 66 bytes"
	}
	if hex, ok := strings.CutPrefix(id, keyPrefix); ok {
		if len(hex) != 2*sha256.Size || strings.Trim(hex, "0123456789abcdef") != "" {
			return "a key identity that is not 64 lower-case hex digits"
		}
		return ""
	}
	rest, ok := strings.CutPrefix(id, ipPrefix)
	switch {
	case !ok:
		return "neither k: nor ip:"
	case id == unknownIP:
		return ""
	case !strings.Contains(rest, "/"):
		if a, err := netip.ParseAddr(rest); err != nil || !a.Is4() || a.String() != rest {
			return "an IP identity that is no IPv4 address in canonical form"
		}
		return ""
	}
	p, err := netip.ParsePrefix(rest)
	switch {
	case err != nil || !p.Addr().Is6() || p.Addr().Is4In6() || p.Addr().Zone() != "":
		return "an IP identity that is no IPv6 prefix"
	case p.Bits() != v6bits:
		return "an IPv6 prefix of another length than ipv6_prefix"
	case p != p.Masked() || p.String() != rest:
		return "an IPv6 prefix with host bits or not in canonical form"
	}
	return ""
}

// fuzzV6Bits are the ipv6_prefix values FuzzIdentity's handlers use.
var fuzzV6Bits = [...]int{48, 56, 64, 127, 128}

// FuzzIdentity: whatever a client sends in its key headers, Connection,
// X-Forwarded-For, CF-Connecting-IP (a platform's ClientIP) and from what
// peer, the identity it is counted as is one of the forms identity.go
// lists, for the configured ipv6_prefix, never holds the key as sent,
// and is the same whether the socket peer's identity came from the
// Handler's cache of recent peers (filled by earlier inputs, whose
// RemoteAddr may share a slot) or was computed afresh. A key header that
// Connection names is no key, and an IPv6 client is one identity with
// every address of its prefix. A key sent on several lines is one client
// whether the lines come as they are (the local server) or joined with
// "," (API Gateway) or ", " (the Worker).
func FuzzIdentity(f *testing.F) {
	f.Add(uint8(2), "10.0.0.1:1234", "203.0.113.7, 10.0.0.2", "secret-key-0001", "", "", "")
	f.Add(uint8(0), "[2001:db8:ffff::1]:443", "2001:db8:1:2:3:4:5:6\n[2001:db8:ffff::2]:80, ,", "", "Bearer  tok-abcdefgh", "", "")
	f.Add(uint8(1), "198.51.100.1:1", "10.0.0.2", "k1\nk2", "", "X-API-Key, close", "")
	f.Add(uint8(3), "[fe80::1%eth0]:5", "", "", "AWS4-HMAC-SHA256 Credential=x", "", "2001:db8::1%1")
	f.Add(uint8(4), "garbage", "::ffff:10.0.0.3", " \u00a0k\ufeff", "Basic QQ==", "authorization", "::ffff:192.0.2.1")
	f.Add(uint8(5), "10.0.0.9", "2001:db8::7", "", "", "", "not an address")
	f.Add(uint8(6), "192.0.2.9:1", "", "k1\n k2\n", "Bearer a\nb", "", "")
	f.Add(uint8(7), "192.0.2.19:1", "", "192.0.2.19", "", "", "") // unlisted_keys ip: the key is the address
	hs := make([]*Handler, 2*len(fuzzV6Bits))
	for i := range hs {
		bits := fuzzV6Bits[i%len(fuzzV6Bits)]
		cfg := testConfig(f, func(m map[string]any) {
			m["identity"] = map[string]any{
				"trusted_proxies": []any{"10.0.0.0/8", "2001:db8:ffff::/48"},
				"ipv6_prefix":     bits,
				"unlisted_keys":   []string{"key", "ip"}[i/len(fuzzV6Bits)%2],
			}
		})
		edit := func(*Options) {}
		if i%2 == 1 {
			// A platform that vouches for the client: the Worker's
			// CF-Connecting-IP.
			edit = func(o *Options) {
				o.ClientIP = func(r *http.Request) (netip.Addr, bool) {
					a, err := netip.ParseAddr(strings.TrimSpace(r.Header.Get("CF-Connecting-IP")))
					return a.Unmap(), err == nil
				}
			}
		}
		hs[i] = newFixture(f, cfg, edit).h
	}
	f.Fuzz(func(t *testing.T, pick uint8, remote, xff, apiKey, auth, conn, cfIP string) {
		h := hs[int(pick)%len(hs)]
		hd := http.Header{}
		for name, v := range map[string]string{"X-Forwarded-For": xff, "X-Api-Key": apiKey, "Authorization": auth, "Connection": conn, "Cf-Connecting-Ip": cfIP} {
			if v != "" {
				hd[name] = strings.Split(v, "\n")
			}
		}
		r := &http.Request{Method: http.MethodGet, RemoteAddr: remote, Header: hd}
		id := fuzzIdentity(h, r)
		if why := wellFormedID(id, h.v6bits); why != "" {
			t.Fatalf("identity %q: %s", id, why)
		}
		for _, v := range []string{apiKey, auth} {
			for line := range strings.SplitSeq(v, "\n") {
				if k := trimKey(line); len(k) >= 8 && strings.Trim(k, "0123456789abcdef") != "" && strings.Contains(id, k) &&
					!strings.Contains(remote+"\n"+xff+"\n"+cfIP, k) { // an address spelt as a key
					t.Fatalf("identity %q holds the key %q", id, k)
				}
			}
		}
		// The key's lines as the Lambda gets them (API Gateway joins
		// them with ",") and as the Worker does (JavaScript joins them
		// with ", ", syumai splits that at its commas, joinRequestHeader
		// joins the pieces with ","): one client on all three.
		keyLines := func(join func([]string) []string) *http.Request {
			out := http.Header{}
			for k, vs := range hd {
				if k == "X-Api-Key" || k == "Authorization" {
					trimmed := make([]string, len(vs))
					for i, v := range vs {
						trimmed[i] = textproto.TrimString(v) // as a server reads a line
					}
					vs = join(trimmed)
				}
				out[k] = vs
			}
			return &http.Request{Method: http.MethodGet, RemoteAddr: remote, Header: out}
		}
		var sum, sumAs [sha256.Size]byte
		found := h.apiKey(keyLines(func(vs []string) []string { return vs }), &sum)
		for _, sep := range []string{",", ", "} {
			joined := keyLines(func(vs []string) []string { return []string{strings.Join(vs, sep)} })
			if foundAs := h.apiKey(joined, &sumAs); foundAs != found || found && sumAs != sum {
				t.Fatalf("key lines %q / %q: key %v; joined with %q: key %v, same hash %v", hd["X-Api-Key"], hd["Authorization"], found, sep, foundAs, sumAs == sum)
			}
		}
		// The cached peer (h.peers, filled by this call or an earlier
		// input's) against the identity computed afresh.
		fresh := *h
		fresh.peers = nil
		if again, want := h.ipID(r), ipIdentity(must(fresh.clientAddr(r)), h.v6bits); again != want {
			t.Fatalf("RemoteAddr %q: ip identity %q from the peer cache, %q afresh", remote, again, want)
		}
		// A key header that Connection names goes no further than the
		// proxy, and is no key.
		if h.apiKey(r, &sum) {
			named := http.Header{"Connection": {strings.Join(h.keyHeaders, ",")}}
			for k, vs := range hd {
				if k != "Connection" {
					named[k] = vs
				}
			}
			r2 := &http.Request{Method: http.MethodGet, RemoteAddr: remote, Header: named}
			if got, want := fuzzIdentity(h, r2), h.ipID(r2); got != want {
				t.Fatalf("with Connection naming every key header: identity %q, want the IP's %q", got, want)
			}
		}
		// Another address of an IPv6 client's prefix is the same client.
		if a, ok := h.clientAddr(r); ok && a.Is6() {
			b := a.As16()
			for i := h.v6bits / 8; i < 16; i++ {
				b[i] ^= 0xff >> max(h.v6bits-8*i, 0)
			}
			if got, want := ipIdentity(netip.AddrFrom16(b), h.v6bits), ipIdentity(a, h.v6bits); got != want {
				t.Fatalf("%s and %s, one /%d: identities %q and %q", a, netip.AddrFrom16(b), h.v6bits, want, got)
			}
		}
	})
}

func must(a netip.Addr, _ bool) netip.Addr { return a }
