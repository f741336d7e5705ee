package httpapi

import (
	"net/netip"
	"testing"
)

// TestLastHopPeerForms: the peer's own form does not matter either: an
// IPv4 peer seen as IPv4-mapped IPv6 (a dual-stack listener) or an IPv6
// peer with a zone is the hop that names its address. Hand mutations that
// compared the peer as given went unseen (TestLastHop varies the hop's
// form only).
func TestLastHopPeerForms(t *testing.T) {
	for _, c := range []struct {
		xff  string
		peer string
	}{
		{"198.51.100.1, 203.0.113.7", "::ffff:203.0.113.7"},
		{"198.51.100.1, fe80::7", "fe80::7%eth0"},
	} {
		if !LastHop([]string{c.xff}, netip.MustParseAddr(c.peer)) {
			t.Errorf("LastHop(%q, %s) = false, want true", c.xff, c.peer)
		}
	}
}
