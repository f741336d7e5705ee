package main

import (
	"net/http"
	"net/netip"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/slidegate/slidegate/httpapi"
)

// originIdle is how long after a request to the origin ended its pooled
// connections are still taken for the next one; after a longer gap they
// are closed and the next request dials again. A Lambda instance is
// frozen between invocations, so it cannot see an origin close an idle
// connection (Node's, Apache's and uvicorn's servers do after 5 s,
// gunicorn's after 2 s; a NAT gateway, in front of a function in a VPC,
// forgets a flow idle for 350 s and answers its next packet with a reset)
// until its next request has gone out on it. Go's transport sends such a
// request again on a new connection only when it may be sent twice (a
// GET, not a POST), so the client got the pre-filter's 502, its request
// counted and not served. One second stays under those servers' timeouts
// with room for the request's way there. An instance that proxies a
// request at least once a second keeps its connection; one that proxies
// fewer pays a handshake with the origin per request, which is cheaper
// than a lost POST. (The proxy's own IdleConnTimeout, 90 s, is for the
// local server, whose transport sees a close when it happens.)
const originIdle = time.Second

// originProxy returns the handler setup gives the pre-filter as its
// origin: httpapi.NewProxy to u, whose idle connections are closed
// before a request that comes more than originIdle after the previous
// one ended (a gap that now, the wall clock, measures: net/http measures
// idleness the same way, and the time an instance is frozen passes on
// it).
func originProxy(u *url.URL, log httpapi.Logger, trusted []netip.Prefix, now func() time.Time) http.Handler {
	p := httpapi.NewProxy(u, log, trusted)
	conns, ok := p.Transport.(idleCloser)
	if !ok {
		return p
	}
	return &freshConns{next: p, conns: conns, now: now}
}

// idleCloser is what freshConns asks of the proxy's transport
// (*http.Transport).
type idleCloser interface{ CloseIdleConnections() }

// freshConns is a proxy whose idle connections are dropped after a gap
// of more than originIdle between two of its requests. It is safe for
// concurrent use: a connection in use is not idle, and is not closed.
type freshConns struct {
	next  http.Handler
	conns idleCloser
	now   func() time.Time
	// last is when the latest request ended, in Unix nanoseconds; 0
	// before the first.
	last atomic.Int64
}

func (f *freshConns) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if last := f.last.Load(); last != 0 {
		// A clock that went back says nothing of the gap: the
		// connections are closed too, at the cost of a handshake.
		if gap := f.now().UnixNano() - last; gap > int64(originIdle) || gap < 0 {
			f.conns.CloseIdleConnections()
		}
	}
	// Also when the proxy panics (http.ErrAbortHandler): the connection
	// was closed then, and others may be idle since.
	defer func() { f.last.Store(f.now().UnixNano()) }()
	f.next.ServeHTTP(w, r)
}
