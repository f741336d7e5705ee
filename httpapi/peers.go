//go:build !js

package httpapi

import (
	"net/http"
	"sync/atomic"
)

// ipID returns the storage identity of r's client (ipIdentity of
// clientAddr). A Handler that reads the client from the socket (no
// ClientIP or PeerIP) keeps the identity of each untrusted peer by its
// RemoteAddr, which net/http gives every request of a connection: parsing
// the address and building the identity took some 800 instructions and
// an allocation per request.
func (h *Handler) ipID(r *http.Request) string {
	if h.peers == nil {
		addr, _ := h.clientAddr(r)
		return ipIdentity(addr, h.v6bits)
	}
	slot := &h.peers[peerSlot(r.RemoteAddr)]
	if e := slot.Load(); e != nil && e.remote == r.RemoteAddr {
		return e.id
	}
	peer, ok := parseAddr(r.RemoteAddr)
	switch {
	case !ok:
		return unknownIP
	case h.trusted(peer):
		// The client is read from X-Forwarded-For: nothing to keep.
		return ipIdentity(h.behind(peer, r), h.v6bits)
	}
	// The identity is a string of its own: the limiter's deny cache keeps
	// the string of a refused client for as long as the denial lasts (the
	// memory store keeps hashes of it, not the string), and bytes of the
	// entry would keep the entry and its RemoteAddr with it.
	e := &peerID{remote: r.RemoteAddr, id: ipIdentity(peer, h.v6bits)}
	slot.Store(e)
	return e.id
}

// peerIDs are the IP identities of recent socket peers by their
// RemoteAddr (ipID), one per slot: a peer whose slot another took is
// parsed again.
type peerIDs [256]atomic.Pointer[peerID]

// peerID is a socket peer's RemoteAddr and identity.
type peerID struct{ remote, id string }

// peerSlot returns the slot of a RemoteAddr in peerIDs: its FNV-1a hash,
// folded.
func peerSlot(remote string) uint8 {
	h := uint32(2166136261)
	for i := 0; i < len(remote); i++ {
		h = (h ^ uint32(remote[i])) * 16777619
	}
	return uint8(h ^ h>>8 ^ h>>16 ^ h>>24)
}
