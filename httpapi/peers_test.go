//go:build !js

package httpapi

import (
	"net/http"
	"runtime"
	"strconv"
	"testing"
	"weak"
)

// TestPeerIdentityKept: the identity of an untrusted socket peer is built
// once per RemoteAddr and then served without parsing or allocating; a
// trusted proxy's requests are read from their X-Forwarded-For every time
// (the same RemoteAddr, another client); peers whose RemoteAddrs share a
// slot each keep their own identity. testConfig trusts 10.0.0.0/8.
func TestPeerIdentityKept(t *testing.T) {
	f := newFixture(t, testConfig(t, nil), nil)
	tests := []struct{ remote, xff, want string }{
		{"192.0.2.7:1234", "", "ip:192.0.2.7"},
		{"[2001:db8:1:2:3:4:5:6]:443", "", "ip:2001:db8:1:2::/64"},
		{"[::ffff:192.0.2.8]:80", "", "ip:192.0.2.8"},
		{"10.0.0.1:80", "198.51.100.1", "ip:198.51.100.1"},
		{"10.0.0.1:80", "198.51.100.2", "ip:198.51.100.2"},
		{"10.0.0.1:80", "", "ip:10.0.0.1"},
		{"no address", "", unknownIP},
	}
	for range 2 { // built, then kept
		for _, tt := range tests {
			r := rawRequest(tt.remote, http.Header{"X-Forwarded-For": {tt.xff}})
			if got := f.h.ipID(r); got != tt.want {
				t.Errorf("%s, X-Forwarded-For %q: identity %q, want %q", tt.remote, tt.xff, got, tt.want)
			}
		}
	}

	r := rawRequest("192.0.2.7:1234", nil)
	if n := testing.AllocsPerRun(20, func() { f.h.ipID(r) }); n != 0 {
		t.Errorf("a kept peer's identity: %v allocations, want 0", n)
	}

	// Two peers of one slot, in turn: each is built again, never the
	// other's.
	a := "192.0.2.1:1"
	b := ""
	for i := 2; b == ""; i++ {
		if c := "192.0.2." + strconv.Itoa(i%256) + ":" + strconv.Itoa(i); peerSlot(c) == peerSlot(a) {
			b = c
		}
	}
	bAddr, _ := parseAddr(b)
	want := map[string]string{a: "ip:192.0.2.1", b: "ip:" + bAddr.String()}
	for range 3 {
		for _, remote := range []string{a, b} {
			if got := f.h.ipID(rawRequest(remote, nil)); got != want[remote] {
				t.Errorf("%s after a peer of its slot: identity %q, want %q", remote, got, want[remote])
			}
		}
	}
}

// TestPeerIdentityOwnString: the identity ipID keeps for a peer is a
// string of its own, which whoever keeps the identity (the limiter's deny
// cache, while the client is refused; the memory store kept it too before
// it kept hashes) may hold: made over the table entry's bytes, it kept the
// entry and its RemoteAddr alive with it once another peer had taken the
// slot.
func TestPeerIdentityOwnString(t *testing.T) {
	f := newFixture(t, testConfig(t, nil), nil)
	const a = "192.0.2.1:1"
	id, entry := keptPeer(f.h, a)
	b := otherPeerOfSlot(a)
	f.h.ipID(rawRequest(b, nil)) // takes a's slot
	runtime.GC()
	if entry.Value() != nil {
		t.Errorf("the entry of %s, its slot taken by %s, is still reachable while its identity is", a, b)
	}
	if id != "ip:192.0.2.1" {
		t.Errorf("identity %q, want ip:192.0.2.1", id)
	}
}

// keptPeer returns the identity ipID keeps for remote and a weak pointer
// to its entry in h's table.
//
//go:noinline
func keptPeer(h *Handler, remote string) (string, weak.Pointer[peerID]) {
	id := h.ipID(rawRequest(remote, nil))
	return id, weak.Make(h.peers[peerSlot(remote)].Load())
}

// otherPeerOfSlot returns a RemoteAddr of 192.0.2.0/24 whose slot in
// peerIDs is remote's.
func otherPeerOfSlot(remote string) string {
	for i := 2; ; i++ {
		if c := "192.0.2." + strconv.Itoa(i%256) + ":" + strconv.Itoa(i); peerSlot(c) == peerSlot(remote) {
			return c
		}
	}
}

// TestPeerIdentityForms: a kept identity is what clientAddr and ipIdentity
// make of the request, built or kept, for every form a RemoteAddr comes in
// (zone, IPv4-mapped, no port, brackets, none) and for two thousand peers
// sharing the 256 slots, trusted proxies among them (each peer twice: the
// second request's X-Forwarded-For names another client).
func TestPeerIdentityForms(t *testing.T) {
	f := newFixture(t, testConfig(t, nil), nil)
	remotes := []string{"203.0.113.7", "203.0.113.7:1", "[2001:db8:1:2::1]:443", "2001:db8:1:2::1", "[2001:db8:1:2::1]",
		"[fe80::1%eth0]:80", "[fe80::1%eth1]:80", "fe80::1%eth0", "[::ffff:203.0.113.7]:1", "::ffff:203.0.113.7",
		"[::ffff:10.0.0.1]:1", "10.0.0.1:1", "[2001:db8:ffff::1]:1", "203.0.113.7:99999", "[::1]:80:80", "", "@", "host:80"}
	for i := range 1000 {
		remotes = append(remotes, "10."+strconv.Itoa(i%2)+".0."+strconv.Itoa(i%256)+":"+strconv.Itoa(40000+i),
			"[2001:db8:"+strconv.FormatInt(int64(i), 16)+"::1]:"+strconv.Itoa(i))
	}
	for i, remote := range remotes {
		for _, client := range []string{"198.51.100.1", "198.51.100.2"} { // built, then kept
			r := rawRequest(remote, http.Header{"X-Forwarded-For": {client}})
			addr, _ := f.h.clientAddr(r)
			if got, want := f.h.ipID(r), ipIdentity(addr, f.h.v6bits); got != want {
				t.Errorf("%q (%d), X-Forwarded-For %s: identity %q, want %q", remote, i, client, got, want)
			}
		}
	}
}
