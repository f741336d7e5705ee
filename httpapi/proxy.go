package httpapi

import (
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"
)

// NewProxy returns the reverse proxy the local server puts behind the
// pre-filter: requests go to target with X-Forwarded-For, -Host and -Proto
// set, connections to the origin are kept alive, and an unreachable origin
// is a 502 problem+json (logged). The proxy's other complaints (a response
// body cut short) go to log too, as JSON lines at level WARN, not to the
// standard logger. A nil log discards them.
func NewProxy(target *url.URL, log *slog.Logger) *httputil.ReverseProxy {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 1024
	tr.MaxIdleConnsPerHost = 1024
	tr.IdleConnTimeout = 90 * time.Second
	h := slog.DiscardHandler
	if log != nil {
		h = log.Handler()
	}
	return &httputil.ReverseProxy{
		ErrorLog: slog.NewLogLogger(h, slog.LevelWarn),
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.SetXForwarded()
		},
		Transport:  tr,
		BufferPool: bufferPool{},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if log != nil {
				log.LogAttrs(r.Context(), slog.LevelError, "origin error",
					slog.String("error", err.Error()), slog.String("method", r.Method), slog.String("path", r.URL.Path))
			}
			writeProblem(w, http.StatusBadGateway, "the origin did not answer", nil)
		},
	}
}

// bufferPool recycles the proxy's copy buffers: without it every proxied
// response allocates 32 KiB.
type bufferPool struct{}

var buffers = sync.Pool{New: func() any { return new([32 << 10]byte) }}

func (bufferPool) Get() []byte { return buffers.Get().(*[32 << 10]byte)[:] }
func (bufferPool) Put(b []byte) {
	if cap(b) == 32<<10 {
		buffers.Put((*[32 << 10]byte)(b[:32<<10]))
	}
}
