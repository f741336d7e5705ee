package httpapi

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestPlatformAddrForms: the address a platform hands the handler
// (ClientIP: the Worker's CF-Connecting-IP; PeerIP: the Lambda's sourceIp)
// is read as a socket peer's is: an IPv4-mapped address is its IPv4 client,
// not an IPv6 /64 shared with other clients, and a zone is dropped, so
// that no zone makes a fresh identity. testConfig trusts 10.0.0.0/8.
func TestPlatformAddrForms(t *testing.T) {
	for _, tt := range []struct {
		name, header, value, xff, want string
	}{
		{"Worker: IPv4-mapped", "CF-Connecting-IP", "::ffff:192.0.2.1", "", "ip:192.0.2.1"},
		{"Worker: zone", "CF-Connecting-IP", "fe80::1%eth0", "", "ip:fe80::/64"},
		{"Worker: long zone", "CF-Connecting-IP", "2001:db8:1:2::1%zone-zone-zone-zone-zone-zone", "", "ip:2001:db8:1:2::/64"},
		{"Worker: mapped trusted address is still the client", "CF-Connecting-IP", "::ffff:10.0.0.7", "203.0.113.9", "ip:10.0.0.7"},
		{"Lambda: IPv4-mapped", "X-Source-IP", "::ffff:192.0.2.1", "", "ip:192.0.2.1"},
		{"Lambda: zone", "X-Source-IP", "fe80::1%eth0", "", "ip:fe80::/64"},
		{"Lambda: IPv4-mapped trusted proxy", "X-Source-IP", "::ffff:10.0.0.7", "::ffff:203.0.113.9, ::ffff:10.0.0.7", "ip:203.0.113.9"},
		{"Lambda: trusted proxy, no X-Forwarded-For", "X-Source-IP", "10.0.0.7", "", "ip:10.0.0.7"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := &idStore{}
			f := newFixture(t, testConfig(t, nil), func(o *Options) {
				o.Store = st
				if tt.header == "CF-Connecting-IP" {
					o.ClientIP = headerAddr(tt.header)
				} else {
					o.PeerIP = headerAddr(tt.header)
				}
			})
			h := http.Header{tt.header: {tt.value}}
			if tt.xff != "" {
				h.Set("X-Forwarded-For", tt.xff)
			}
			w := httptest.NewRecorder()
			f.h.ServeHTTP(w, rawRequest("198.51.100.1:1", h))
			if len(st.ids) == 0 || st.ids[0] != tt.want {
				t.Errorf("counted as %q, want %q", st.ids, tt.want)
			}
		})
	}
}
