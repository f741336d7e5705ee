package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/slidegate/slidegate/config"
	"github.com/slidegate/slidegate/httpapi"
	"github.com/slidegate/slidegate/kvstore"
	"github.com/slidegate/slidegate/kvstore/workerskv"
)

// Names of the Worker's bindings and variables (wrangler.toml).
const (
	kvBinding  = "SLIDEGATE_KV"
	varConfig  = "SLIDEGATE_CONFIG"
	varOrigin  = "ORIGIN_URL"
	varDebug   = "SLIDEGATE_DEBUG"
	originSelf = "self"
)

// Errors of the Worker's setup.
var (
	ErrOrigin = errors.New("edge: ORIGIN_URL must be empty, \"self\" or an absolute http(s) URL without query")
)

// env is what the Worker reads from its variables.
type env struct {
	// Config reads SLIDEGATE_CONFIG (nil or empty: config.Default()). It
	// is called only when the configuration cache has no binary form for
	// it, so that a hit copies no text out of JavaScript.
	Config func() string
	Origin string // ORIGIN_URL; see the package doc
	Debug  bool   // SLIDEGATE_DEBUG == "1"
}

// config returns SLIDEGATE_CONFIG.
func (e env) config() string {
	if e.Config == nil {
		return ""
	}
	return e.Config()
}

// deps are the platform pieces the handler is built from.
type deps struct {
	Store     kvstore.Store
	Local     kvstore.Conditional
	Transport http.RoundTripper // the fetch client's, for the origin
	Now       func() time.Time
	Logger    logger
	Debug     *debug      // nil unless env.Debug
	Configs   configCache // nil: parse every time
}

// configCache keeps a validated configuration's binary form (see
// config.Config.AppendBinary) for the next Go instances of the isolate: the
// stock shim starts one per request, and reading the binary form back costs
// a fraction of parsing and validating the JSON. A cache belongs to one
// request and knows its configuration's source: what it keeps is looked up
// for that source only.
type configCache interface {
	// Lookup returns the binary form kept for this request's source.
	Lookup() ([]byte, bool)
	// Keep keeps bin as the binary form of this request's source.
	Keep(bin []byte)
}

// loadConfig returns the configuration: from the cache when it holds the
// binary form of this request's source, else src() parsed (the defaults for
// an empty text) and, once valid, kept in the cache. A binary form that
// does not read back is ignored, and the text parsed again.
func loadConfig(src func() string, cache configCache) (*config.Config, error) {
	if cache != nil {
		if bin, ok := cache.Lookup(); ok {
			var c config.Config
			if c.UnmarshalBinary(bin) == nil {
				return &c, nil
			}
		}
	}
	c, err := config.Parse([]byte(src()))
	if err != nil {
		return nil, err
	}
	if cache != nil {
		if bin, err := c.AppendBinary(nil); err == nil {
			cache.Keep(bin)
		}
	}
	return c, nil
}

// logger is what the Worker logs through: jsonlog's JSON lines on the
// console (log/slog would add a twentieth to the bundle); *slog.Logger in
// tests.
type logger interface {
	httpapi.Logger
	workerskv.Logger
	Error(msg string, args ...any)
}

// newHandler builds the Worker's handler: httpapi in front of the origin.
func newHandler(e env, d deps) (http.Handler, error) {
	cfg, err := loadConfig(e.config, d.Configs)
	if err != nil {
		return nil, fmt.Errorf("edge: %s: %w", varConfig, err)
	}
	next, err := originHandler(e.Origin, d.Transport)
	if err != nil {
		return nil, err
	}
	h, err := httpapi.New(httpapi.Options{
		Config: cfg, Validated: true, // loadConfig's are
		Store: d.Store, Local: d.Local, Next: next,
		ClientIP: clientIP, Now: d.Now, Logger: d.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("edge: %w", err)
	}
	if e.Debug && d.Debug != nil {
		return d.Debug.wrap(h), nil
	}
	return h, nil
}

// wantsBody reports whether the Worker reads r's body in one piece before
// the handler runs (readBody): a check request that declares a length
// within the check API's limit. Any other body stays a stream: a proxied
// request's body goes to the origin as it comes, and a body of unknown or
// excessive length is left to the handler's limit.
func wantsBody(r *http.Request) bool {
	return r.Method == http.MethodPost && r.URL.Path == httpapi.CheckPath &&
		r.ContentLength > 0 && r.ContentLength <= httpapi.MaxCheckBody
}

// clientIP is the address Cloudflare saw the client connect from.
func clientIP(r *http.Request) (netip.Addr, bool) {
	a, err := netip.ParseAddr(strings.TrimSpace(r.Header.Get("CF-Connecting-IP")))
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// failed answers every request with a 500 naming the setup error: a Worker
// with a broken configuration should say why, not crash.
func failed(err error, log logger) http.Handler {
	log.Error("edge: setup failed", "err", err)
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		httpapi.WriteProblem(w, http.StatusInternalServerError, "slidegate is misconfigured", err.Error())
	})
}

// originHandler returns the handler admitted requests go to: nil for the
// check API only, the request's own URL for "self", or spec's scheme and
// host (and path prefix) with the request's path and query.
func originHandler(spec string, rt http.RoundTripper) (http.Handler, error) {
	spec = strings.TrimSpace(spec)
	switch spec {
	case "":
		return nil, nil
	case originSelf:
		return &proxy{rt: rt}, nil
	}
	u, err := url.Parse(spec)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("%w, got %q", ErrOrigin, spec)
	}
	return &proxy{base: u, rt: rt}, nil
}

// proxy forwards a request to the origin through rt and copies the answer
// back. Headers the pre-filter already set stay.
type proxy struct {
	base *url.URL // nil: the request's own URL
	rt   http.RoundTripper
}

// hopHeaders are connection-level headers that are not forwarded.
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func (p *proxy) target(r *http.Request) *url.URL {
	u := *r.URL
	if p.base == nil {
		if u.Host == "" {
			u.Host = r.Host
		}
		if u.Scheme == "" {
			u.Scheme = "https"
		}
		return &u
	}
	u.Scheme, u.Host, u.User = p.base.Scheme, p.base.Host, nil
	// Join the escaped forms too: "/files/a%2Fb" must not reach the origin
	// as "/files/a/b", another resource. The base loses a trailing slash,
	// not a trailing "%2F".
	base, raw := p.base.Path, p.base.EscapedPath()
	if strings.HasSuffix(raw, "/") {
		base, raw = strings.TrimSuffix(base, "/"), raw[:len(raw)-1]
	}
	u.Path = base + r.URL.Path
	u.RawPath = raw + r.URL.EscapedPath()
	return &u
}

func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body io.Reader
	if r.Method != http.MethodGet && r.Method != http.MethodHead && r.Body != nil {
		body = r.Body
	}
	out, err := http.NewRequestWithContext(r.Context(), r.Method, p.target(r).String(), body)
	if err != nil {
		httpapi.WriteProblem(w, http.StatusBadGateway, "origin unreachable", "the request could not be forwarded")
		return
	}
	out.Header = r.Header.Clone()
	out.ContentLength = r.ContentLength
	if p.base != nil {
		out.Header.Del("Host")
	}
	for _, h := range hopHeaders {
		out.Header.Del(h)
	}
	res, err := p.rt.RoundTrip(out)
	if err != nil {
		httpapi.WriteProblem(w, http.StatusBadGateway, "origin unreachable", "the origin did not answer")
		return
	}
	defer res.Body.Close()
	for k, vs := range res.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	for _, h := range hopHeaders {
		w.Header().Del(h)
	}
	if enc := res.Header.Get("Content-Encoding"); enc != "" && !strings.EqualFold(enc, "identity") {
		// fetch hands the body over decoded, and the runtime encodes it
		// again as Content-Encoding says; the origin's Content-Length is
		// the encoded length, which the decoded body overruns (the
		// runtime then cuts the response off).
		w.Header().Del("Content-Length")
	}
	w.WriteHeader(res.StatusCode)
	_, _ = io.Copy(w, res.Body)
}
