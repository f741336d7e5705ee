package config

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestTrustedProxyBitBounds pins the two bounds parsePrefix draws on a
// trusted proxy's bits: an IPv4-mapped CIDR needs at least 96 (/95 is
// refused as too short, not taken as an IPv4 CIDR of -1 bits), and only a
// CIDR of every address is refused for trusting everyone: one bit more,
// half of a family, is a CIDR like any other.
func TestTrustedProxyBitBounds(t *testing.T) {
	for _, tc := range []struct {
		cidr string
		want string // the prefix taken, or "" for an error
		why  string // in the error
	}{
		{"::ffff:0.0.0.0/95", "", "96"},
		{"::ffff:10.0.0.0/95", "", "96"},
		{"::ffff:0.0.0.0/96", "", "every address"},
		{"::ffff:0.0.0.0/97", "0.0.0.0/1", ""},
		{"::ffff:128.0.0.0/97", "128.0.0.0/1", ""},
		{"0.0.0.0/1", "0.0.0.0/1", ""},
		{"::/1", "::/1", ""},
		{"0.0.0.0/0", "", "every address"},
		{"::/0", "", "every address"},
	} {
		t.Run(tc.cidr, func(t *testing.T) {
			c, err := Parse([]byte(`{"identity": {"trusted_proxies": ["` + tc.cidr + `"]}}`))
			if tc.want == "" {
				var fe *FieldError
				if !errors.As(err, &fe) || fe.Field != "identity.trusted_proxies[0]" || !strings.Contains(err.Error(), tc.why) {
					t.Fatalf("error %v, want one naming identity.trusted_proxies[0] with %q", err, tc.why)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ps := c.Identity.Prefixes(); len(ps) != 1 || ps[0].String() != tc.want {
				t.Errorf("prefixes %v, want [%s]", ps, tc.want)
			}
		})
	}
}

// TestTrustedProxyHostBits: a CIDR with bits set past its length (an
// interface's address as `ip addr` shows it, 10.0.0.5/24) is refused,
// naming the network and the address it may mean: it was masked, and the
// whole /24 trusted where the one proxy was surely meant, so that every
// client there could name itself in X-Forwarded-For.
func TestTrustedProxyHostBits(t *testing.T) {
	for _, tc := range []struct{ cidr, want string }{
		{"10.0.0.5/24", "write 10.0.0.0/24 to trust that network, or 10.0.0.5 for the one address"},
		{"192.168.1.1/16", "write 192.168.0.0/16 to trust that network, or 192.168.1.1 for the one address"},
		{"2001:db8::1/64", "write 2001:db8::/64 to trust that network, or 2001:db8::1 for the one address"},
		{"::ffff:10.0.0.1/104", "write 10.0.0.0/8 to trust that network, or 10.0.0.1 for the one address"},
	} {
		_, err := Parse([]byte(`{"identity": {"trusted_proxies": ["10.1.0.0/16", "` + tc.cidr + `"]}}`))
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != "identity.trusted_proxies[1]" || fe.Value != `"`+tc.cidr+`"` || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming identity.trusted_proxies[1] that says %q", tc.cidr, err, tc.want)
		}
	}
	// Written without host bits, each is taken as it is.
	c, err := Parse([]byte(`{"identity": {"trusted_proxies": ["10.0.0.0/24", "10.0.0.5/32", "2001:db8::/64", "::ffff:10.0.0.0/104"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(c.Identity.Prefixes()), "[10.0.0.0/24 10.0.0.5/32 2001:db8::/64 10.0.0.0/8]"; got != want {
		t.Errorf("prefixes %s, want %s", got, want)
	}
}
