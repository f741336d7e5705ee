package httpapi

import (
	"log/slog"
	"net/http"
	"net/netip"
	"time"

	"github.com/slidegate/slidegate/config"
	"github.com/slidegate/slidegate/kvstore"
)

// Options configure a Handler.
type Options struct {
	// Config is the validated configuration. Nil means config.Default().
	Config *config.Config
	// Store keeps the shared counters. Nil means an in-memory store.
	Store kvstore.Store
	// Local keeps the counters of "local" scope limits. Nil means an
	// in-memory store.
	Local kvstore.Conditional
	// Next is the origin admitted requests go to. Nil serves the check API
	// and /healthz only; every other path is 404.
	Next http.Handler
	// ClientIP returns the client address the platform reports
	// (CF-Connecting-IP, requestContext.http.sourceIp). Nil, or a false
	// second result, means the socket peer, or X-Forwarded-For when the
	// peer is a trusted proxy.
	ClientIP func(*http.Request) (netip.Addr, bool)
	// Now reads the clock. Nil means time.Now.
	Now func() time.Time
	// Logger receives a JSON line per denied request and per store error.
	// Nil means JSON to standard error.
	Logger *slog.Logger
}

// Handler is the pre-filter, the check API and the health check. It is safe
// for concurrent use.
type Handler struct {
}

// New validates o.Config and returns a Handler.
func New(o Options) (*Handler, error) {
	return &Handler{}, nil
}

// ServeHTTP serves GET /healthz, POST /v1/check, and every other request as
// the pre-filter in front of Options.Next.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	http.Error(w, "not implemented yet", http.StatusNotImplemented)
}
