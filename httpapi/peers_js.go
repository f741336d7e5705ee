//go:build js

package httpapi

import "net/http"

// ipID returns the storage identity of r's client. The Worker names the
// client itself (Options.ClientIP): the host's cache of socket peers'
// identities (peers.go) would cost the bundle bytes and serve nothing.
func (h *Handler) ipID(r *http.Request) string {
	addr, _ := h.clientAddr(r)
	return ipIdentity(addr, h.v6bits)
}

// peerIDs is empty in the Worker's build: the Handler's field costs nothing.
type peerIDs struct{}
