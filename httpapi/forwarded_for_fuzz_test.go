package httpapi

import (
	"net/http"
	"net/netip"
	"strings"
	"testing"
)

// fuzzWalk is the README's reading of X-Forwarded-For, written plainly:
// the socket peer, unless it is a trusted proxy; then the field's lines as
// one list, empty elements skipped, read from the right, each entry
// trimmed: the first that is no trusted proxy is the client, an entry that
// is no address ends the walk at the last trusted proxy, and a chain of
// trusted proxies only gives its left-most. It also reports whether the
// walk read every entry (every one an address of a trusted proxy).
func fuzzWalk(proxies []netip.Prefix, peer netip.Addr, lines []string) (netip.Addr, bool) {
	if !contains(proxies, peer) {
		return peer, false
	}
	var entries []string
	for _, l := range lines {
		for _, e := range strings.Split(l, ",") {
			if e = strings.TrimSpace(e); e != "" {
				entries = append(entries, e)
			}
		}
	}
	client := peer
	for i := len(entries) - 1; i >= 0; i-- {
		a, ok := parseAddr(entries[i])
		if !ok {
			return client, false
		}
		if client = a; !contains(proxies, a) {
			return a, false
		}
	}
	return client, true
}

// FuzzForwardedFor: the client address read from a request through
// trusted proxies is the README's (fuzzWalk), and entries a client puts
// left of its own address (a line of its own before the others, or more
// entries at the start of the first) never change it, unless every entry
// was a trusted proxy's.
func FuzzForwardedFor(f *testing.F) {
	f.Add("10.0.0.1:1234", "203.0.113.7, 10.0.0.2", "1.1.1.1")
	f.Add("[2001:db8:ffff::1]:443", "2001:db8::1\n[2001:db8:ffff::2]:80, ,", "unknown")
	f.Add("10.0.0.1:1", "::ffff:10.0.0.3, 10.1.2.3\n, 10.0.0.4", "10.9.9.9")
	f.Add("198.51.100.1:1", "10.0.0.2", "")
	f.Fuzz(func(t *testing.T, remote, xff, forged string) {
		h := &Handler{proxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8:ffff::/48")}}
		lines := strings.Split(xff, "\n")
		r := &http.Request{RemoteAddr: remote, Header: http.Header{"X-Forwarded-For": lines}}
		got, ok := h.clientAddr(r)
		peer, peerOK := parseAddr(remote)
		if ok != peerOK {
			t.Fatalf("RemoteAddr %q: found %v, peer parses %v", remote, ok, peerOK)
		}
		if !ok {
			return
		}
		want, whole := fuzzWalk(h.proxies, peer, lines)
		if got != want {
			t.Fatalf("peer %s, X-Forwarded-For %q: client %s, want %s", peer, lines, got, want)
		}
		if whole {
			return
		}
		for _, more := range [][]string{
			append([]string{forged}, lines...),
			append([]string{forged + "," + lines[0]}, lines[1:]...),
		} {
			r.Header["X-Forwarded-For"] = more
			if again, _ := h.clientAddr(r); again != got {
				t.Fatalf("peer %s, X-Forwarded-For %q: client %s, but %s with %q", peer, lines, got, again, more)
			}
		}
	})
}
