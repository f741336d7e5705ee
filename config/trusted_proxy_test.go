package config

import (
	"errors"
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
