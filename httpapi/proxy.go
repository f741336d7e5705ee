package httpapi

import (
	"context"
	"io"
	stdlog "log"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// NewProxy returns the reverse proxy the local server puts behind the
// pre-filter: requests go to target as the client sent them (path, query,
// cookies, Accept-Encoding) with X-Forwarded-For, -Host and -Proto set,
// except that query parameters Go cannot parse (with a ';' or a bad
// escape) are dropped, as httputil.ReverseProxy does against parameter
// smuggling. Answers come back as the origin sent them: redirects are not
// followed, compressed bodies are not decoded, and one the origin breaks
// off is aborted, not ended as if whole. Connections to the origin are
// kept alive, and an unreachable origin is a 502 problem+json (logged).
// The proxy's other complaints (a response body cut short) go to log too,
// at level WARN, not to the standard logger. A nil log discards them.
//
// trusted are the configuration's trusted_proxies (config.Identity's
// Prefixes). From a socket peer among them, the X-Forwarded-For chain it
// sent goes on to the origin with the peer appended, and its
// X-Forwarded-Host and -Proto are kept (a balancer that ended TLS says
// "https"). From any other peer those headers are the client's to forge,
// and the origin gets the peer, the Host and the scheme slidegate saw.
func NewProxy(target *url.URL, log Logger, trusted []netip.Prefix) *httputil.ReverseProxy {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 1024
	tr.MaxIdleConnsPerHost = 1024
	tr.IdleConnTimeout = 90 * time.Second
	// The origin gets the client's Accept-Encoding, not one the transport
	// adds, and the client the origin's bytes: with compression on, a
	// client that sent none got a body the transport had decoded, with the
	// origin's validators (ETag) for the gzip one, and the proxy paid for
	// the decoding.
	tr.DisableCompression = true
	errorLog := stdlog.New(io.Discard, "", 0)
	if log != nil {
		errorLog = stdlog.New(warnWriter{log}, "", 0)
	}
	return &httputil.ReverseProxy{
		ErrorLog: errorLog,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			fromProxy := false
			if len(trusted) > 0 { // no address to parse otherwise
				peer, ok := parseAddr(pr.In.RemoteAddr)
				fromProxy = ok && contains(trusted, peer)
			}
			if fromProxy {
				pr.Out.Header["X-Forwarded-For"] = slices.Clone(pr.In.Header["X-Forwarded-For"])
			}
			pr.SetXForwarded()
			if fromProxy {
				for _, k := range [...]string{"X-Forwarded-Host", "X-Forwarded-Proto"} {
					if v := pr.In.Header[k]; len(v) > 0 {
						pr.Out.Header[k] = slices.Clone(v)
					}
				}
			}
		},
		Transport:  tr,
		BufferPool: bufferPool{},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if log != nil {
				log.ErrorContext(r.Context(), "origin error", "error", err.Error(), "method", r.Method, "path", r.URL.Path)
			}
			writeProblem(w, http.StatusBadGateway, "the origin did not answer", nil)
		},
	}
}

// warnWriter turns the lines of a standard logger into WARN records.
type warnWriter struct{ log Logger }

func (w warnWriter) Write(p []byte) (int, error) {
	w.log.WarnContext(context.Background(), strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
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
