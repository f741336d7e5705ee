package httpapi

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/textproto"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/slidegate/slidegate/config"
	"github.com/slidegate/slidegate/internal/jsonlog"
	"github.com/slidegate/slidegate/kvstore"
	"github.com/slidegate/slidegate/limiter"
	"github.com/slidegate/slidegate/window"
)

// Paths the Handler serves itself; every other path goes to Options.Next.
const (
	CheckPath  = "/v1/check"
	HealthPath = "/healthz"
)

// StoreHeader is set on responses decided without the store: its value is
// StoreErrorAllowed or StoreErrorDenied.
const (
	StoreHeader       = "Slidegate-Store"
	StoreErrorAllowed = "error-allowed"
	StoreErrorDenied  = "error-denied"
)

// ShadowHeader is set to "denied" on a request that shadow mode let
// through although a limit denied it.
const ShadowHeader = "Slidegate-Shadow"

// Options configure a Handler.
type Options struct {
	// Config is the configuration; New validates it unless Validated is
	// set. Nil means config.Default().
	Config *config.Config
	// Validated promises that Config came from config.Parse (or passed
	// Validate) and has not changed since, so New need not validate it
	// again. The Worker builds its handler on every request, from a
	// configuration it validated once per isolate; validating costs a
	// tenth of a millisecond there. An invalid Config with Validated set
	// makes a Handler that may fail at any request (outside the Worker,
	// New refuses an api_keys entry of a missing plan or a hash that is
	// not lower-case hex).
	Validated bool
	// Store keeps the shared counters. Nil means an in-memory store.
	Store kvstore.Store
	// Local keeps the counters of "local" scope limits. Nil means an
	// in-memory store.
	Local kvstore.Conditional
	// Next is the origin admitted requests go to. Nil serves the check API
	// and /healthz only; every other path is 404.
	Next http.Handler
	// ClientIP returns the client address a platform vouches for
	// (Cloudflare's CF-Connecting-IP): it is the client, whatever
	// trusted_proxies lists. (Every Cloudflare customer's Worker reaches
	// another zone from Cloudflare's own addresses, with any
	// X-Forwarded-For it likes: reading past them would let it choose
	// its identity.) Nil, or a false second result, means PeerIP.
	ClientIP func(*http.Request) (netip.Addr, bool)
	// PeerIP returns the address a platform saw connect
	// (requestContext.http.sourceIp: CloudFront, when it is in front),
	// which stands for the socket peer: when it is a trusted proxy, the
	// client is read from X-Forwarded-For. Nil, or a false second result,
	// means the socket peer itself.
	PeerIP func(*http.Request) (netip.Addr, bool)
	// Now reads the clock. Nil means time.Now.
	Now func() time.Time
	// Latest returns the newest time the limiters sharing this one's
	// counters have seen (limiter.Options.Latest): the Worker's isolate's,
	// whose requests each build a Handler. Nil means this Handler's own.
	Latest func() time.Time
	// Logger receives a record per denied request and per store error.
	// Nil means JSON lines on standard error, shaped as slog's JSONHandler
	// writes them.
	Logger Logger
}

// Logger is what a Handler logs through. *slog.Logger is one; the
// interface keeps log/slog out of the Worker's Wasm bundle.
type Logger interface {
	InfoContext(ctx context.Context, msg string, args ...any)
	WarnContext(ctx context.Context, msg string, args ...any)
	ErrorContext(ctx context.Context, msg string, args ...any)
}

// Handler is the pre-filter, the check API and the health check. It is safe
// for concurrent use.
type Handler struct {
	lim      *limiter.Limiter
	next     http.Handler
	clientIP func(*http.Request) (netip.Addr, bool)
	peerIP   func(*http.Request) (netip.Addr, bool)
	now      func() time.Time
	log      Logger

	timeout     time.Duration
	inMemory    bool // both stores are the limiter's own memory stores
	deny        bool // on_store_error = deny
	shadow      bool
	countDenied bool

	keyHeaders []string // canonical
	proxies    []netip.Prefix
	v6bits     int
	peers      *peerIDs // nil when the platform names the client or its peer
	unlistedIP bool     // identity.unlisted_keys = ip

	ipRules []limiter.Rule
	ipLocal []limiter.Rule // the rules of local scope among ipRules
	plans   map[string]*plan
	defPlan *plan
	keys    keyTable // api_keys: SHA-256 → plan and identity
	costs   []config.Cost
	// methods are what cost prices a method as: the methods the costs
	// name, then HEAD (a GET route's), then notNamed.
	methods []string

	checkToken bool     // false: the check API is open
	checkSum   [32]byte // SHA-256 of check_token, hashed once at New

	preflight *plan           // a CORS preflight's: ip_limits only
	cors      map[string]bool // cors_origins but "*"
	corsAny   bool            // cors_origins holds "*"
}

// plan is a config.Plan compiled for the hot path.
type plan struct {
	name       string
	rules      []limiter.Rule
	localRules []limiter.Rule // the rules of local scope among rules
	upgradeURL string
	policy     string   // RateLimit-Policy of the pre-filter: ip_limits, then the plan
	planPolicy string   // RateLimit-Policy of the check API: the plan only
	items      []string // RateLimit items' names, serialized: ip_limits, then the plan
	planItems  []string // the plan's part of items
	minLimit   int64    // smallest limit of the plan: the largest cost it can admit
}

// New validates o.Config and returns a Handler.
func New(o Options) (*Handler, error) {
	cfg := o.Config
	if cfg == nil {
		cfg = config.Default()
	}
	if !o.Validated {
		if err := cfg.Validate(); err != nil {
			return nil, fmt.Errorf("httpapi: %w", err)
		}
	}
	cfg = cfg.WithDefaults()
	h := &Handler{
		lim: limiter.New(limiter.Options{
			Store:       o.Store,
			Local:       o.Local,
			CountDenied: cfg.CountDenied,
			Latest:      o.Latest,
		}),
		next:        o.Next,
		clientIP:    o.ClientIP,
		peerIP:      o.PeerIP,
		now:         o.Now,
		log:         o.Logger,
		timeout:     cfg.Timeout(),
		inMemory:    inMemory(o.Store) && inMemory(o.Local),
		deny:        cfg.DenyOnStoreError(),
		shadow:      cfg.Shadow,
		countDenied: cfg.CountDenied,
		proxies:     cfg.Identity.Prefixes(),
		v6bits:      cfg.Identity.IPv6Prefix,
		unlistedIP:  cfg.Identity.UnlistedKeys == config.UnlistedIP,
		ipRules:     rules(cfg.IPLimits),
		plans:       make(map[string]*plan, len(cfg.Plans)),
		costs:       cfg.Costs,
		methods:     routeMethods(cfg.Costs),
		checkToken:  cfg.CheckToken != "",
		checkSum:    sha256.Sum256([]byte(cfg.CheckToken)),
	}
	h.ipLocal = localRules(h.ipRules)
	if o.ClientIP == nil && o.PeerIP == nil {
		h.peers = new(peerIDs)
	}
	if h.now == nil {
		h.now = time.Now
	}
	if h.log == nil {
		h.log = jsonlog.New(os.Stderr, time.Now)
	}
	for _, name := range cfg.Identity.Headers {
		h.keyHeaders = append(h.keyHeaders, textproto.CanonicalMIMEHeaderKey(name))
	}
	ipPolicy := cfg.IPLimits
	for name, cp := range cfg.Plans {
		all := append(append([]config.Limit(nil), ipPolicy...), cp.Limits...)
		p := &plan{name: name, rules: rules(cp.Limits), upgradeURL: cp.UpgradeURL, minLimit: config.MaxLimit}
		for _, l := range cp.Limits {
			p.minLimit = min(p.minLimit, l.Limit)
		}
		p.localRules = localRules(p.rules)
		var err error
		if p.items, err = nameItems(all); err != nil {
			return nil, fmt.Errorf("httpapi: plan %q: %w", name, err)
		}
		p.planItems = p.items[len(ipPolicy):]
		p.policy = policyHeader(p.items, all)
		p.planPolicy = policyHeader(p.planItems, cp.Limits)
		h.plans[name] = p
	}
	h.defPlan = h.plans[cfg.DefaultPlan]
	h.preflight = &plan{name: cfg.DefaultPlan, minLimit: config.MaxLimit}
	if h.defPlan != nil {
		h.preflight.upgradeURL = h.defPlan.upgradeURL
	}
	var err error
	if h.preflight.items, err = nameItems(ipPolicy); err != nil {
		return nil, fmt.Errorf("httpapi: ip_limits: %w", err)
	}
	h.preflight.policy = policyHeader(h.preflight.items, ipPolicy)
	for _, o := range cfg.CORSOrigins {
		if o == "*" {
			h.corsAny = true
			continue
		}
		if h.cors == nil {
			h.cors = make(map[string]bool, len(cfg.CORSOrigins))
		}
		h.cors[o] = true
	}
	if h.keys, err = newKeyTable(cfg.APIKeys, h.plans); err != nil {
		return nil, fmt.Errorf("httpapi: %w", err)
	}
	return h, nil
}

// inMemory reports whether st is a memory store (nil: the limiter's
// own), which answers at once: no store_timeout timer is needed. It asks
// kvstore.Immediate rather than the type: the Worker links no memory
// store.
func inMemory(st kvstore.Store) bool {
	_, ok := st.(kvstore.Immediate)
	return st == nil || ok
}

func rules(ls []config.Limit) []limiter.Rule {
	if len(ls) == 0 {
		return nil
	}
	out := make([]limiter.Rule, len(ls))
	for i, l := range ls {
		out[i] = limiter.Rule{Rule: window.Rule{Name: l.Name, Limit: l.Limit, Period: l.Period()}, Local: l.IsLocal()}
	}
	return out
}

// localRules returns the rules of local scope among rs.
func localRules(rs []limiter.Rule) []limiter.Rule {
	var out []limiter.Rule
	for _, r := range rs {
		if r.Local {
			out = append(out, r)
		}
	}
	return out
}

// Latest returns the newest time the Handler's limiter has seen; the zero
// Time before any check. A platform that builds a Handler per request (the
// Worker) passes it to the next Handler's Seen, so that a clock stepping
// back does not reopen a bucket already counted past.
func (h *Handler) Latest() time.Time { return h.lim.Latest() }

// Seen records t as a time seen (limiter.Limiter.Seen).
func (h *Handler) Seen(t time.Time) { h.lim.Seen(t) }

// ServeHTTP serves GET /healthz, POST /v1/check, and every other request as
// the pre-filter in front of Options.Next.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case HealthPath:
		h.health(w, r)
		return
	case CheckPath:
		h.check(w, r)
		return
	}
	if h.next == nil {
		writeProblem(w, http.StatusNotFound, "no route for "+r.URL.Path, nil)
		return
	}
	h.filter(w, r)
}

func (h *Handler) health(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeProblem(w, http.StatusMethodNotAllowed, "use GET", nil)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write([]byte("{\"status\":\"ok\"}\n"))
}

// verdict is the outcome of the limiter calls for one request.
type verdict struct {
	// Not comparable, so that the Worker's bundle carries no equality
	// function for it (docs/edge.md, "Size").
	_ [0]func()

	ds       [2 * limiter.MaxRules]window.Decision // per-rule decisions, ip rules first
	n        int
	deciding window.Decision
	cached   bool
	err      error
	// aside is a store error that left the answer standing: taking back
	// the ip rules' count of a request the plan refused (the count stays:
	// too high, never too low), deciding them again on the state after
	// it, reading the plan for a request the ip rules denied (the 429
	// waits for the ip rules alone), reading the shared rules of a group
	// whose local rules denied (limiter.ErrSharedUnread), or deciding the
	// ip rules of a request the plan then denied (planAfterIPError).
	// Logged with asideAction, for asideID.
	aside       error
	asideAction string
	asideID     string
	// uncounted is a denial's count that failed (count_denied): the
	// request is denied all the same; logged, for uncountedID.
	uncounted   error
	uncountedID string
	res         limiter.Result // the last limiter call's answer
	until       time.Time      // the request's own deadline (zero: none), for a remote store
}

// reset empties a recycled verdict; the decisions past n are never read.
func (v *verdict) reset() {
	v.n, v.deciding, v.cached, v.err = 0, window.Decision{}, false, nil
	v.aside, v.asideAction, v.asideID = nil, "", ""
	v.uncounted, v.uncountedID = nil, ""
	v.until = time.Time{}
}

func (v *verdict) add(res *limiter.Result) {
	v.n += copy(v.ds[v.n:], res.All())
	v.cached = v.cached || res.Cached
}

// decide asks the limiter: ip rules on the IP identity first, then, if they
// admit, the plan's rules on id. A request refused is counted by no rule
// (unless count_denied): the ip rules' denial is not counted against the
// plan, and when the plan then refuses the request (a denial, or a store
// error under on_store_error deny) the ip rules' count is taken back. With
// count_denied it stays, and the ip rules are decided again on it. Either
// way Retry-After is never earlier than the ip rules would admit the
// request. Local rules hold when the shared store fails: under
// on_store_error allow their denial is a 429 (ip rules' or plan's), and a
// request refused on a store error is taken back from them. Shadow mode
// changes what is answered, not what is counted. The limiter calls are the
// only store access and share one store_timeout budget, but for refunds,
// which have one of their own (refundContext). It fills v, which must be
// empty (reset).
func (h *Handler) decide(ctx context.Context, now time.Time, ipID string, ipRules []limiter.Rule, id string, p *plan, cost int64, v *verdict) {
	if !h.inMemory {
		// A timer per request is a measurable share of the pre-filter's
		// cost; the in-memory store never waits, so it goes without.
		var cancel context.CancelFunc
		v.until, _ = ctx.Deadline()
		ctx, cancel = bounded(ctx, v.until, h.timeout)
		defer cancel()
	}
	if len(ipRules) > 0 {
		if remembers && h.knownRefused(ctx, now, ipID, ipRules, id, p, cost, v) {
			return
		}
		if v.err = h.check1(ctx, now, ipID, ipRules, cost, v); v.err != nil {
			switch {
			case !h.deny && len(p.rules) > 0:
				h.planAfterIPError(ctx, now, ipID, len(ipRules), id, p, cost, v)
			case h.deny && !h.countDenied && errors.Is(v.err, limiter.ErrLocalCounted):
				// Refused (503): the local ip rules' count of it is
				// taken back, in memory, as the plan's is below.
				_ = h.lim.Refund(ctx, v.res.At, ipID, h.ipLocal, cost)
			}
			return
		}
		if !v.deciding.Allowed || len(p.rules) == 0 {
			// The plan is not charged for a request the ip rules deny, but
			// Retry-After must not come before the plan would admit it too:
			// peek at the plan with the request's cost. A failed peek
			// leaves the ip denial to wait for the plan's local rules
			// alone, logged. (A preflight has no plan.)
			if len(p.rules) == 0 {
				return
			}
			if err := h.lim.PeekInto(ctx, now, id, p.rules, cost, &v.res); err != nil {
				h.peekLocal(ctx, now, id, p, cost, err, v)
				return
			}
			v.add(&v.res)
			v.deciding = window.Combine(v.ds[:v.n])
			return
		}
	}
	ipAt, ipN := v.res.At, v.n
	if v.err = h.check1(ctx, now, id, p.rules, cost, v); v.err != nil {
		if h.deny && !h.countDenied {
			// The request is refused (503): what the local rules of the
			// plan and the ip rules counted of it is taken back, on a
			// budget of its own: the plan's check may have spent all of
			// ctx's, and a refund on it was never sent (the count stayed,
			// and the client met a 429 once the store was back).
			rctx, cancel := h.refundContext(ctx, v)
			defer cancel()
			if errors.Is(v.err, limiter.ErrLocalCounted) {
				// In memory: it does not fail.
				_ = h.lim.Refund(rctx, v.res.At, id, p.localRules, cost)
			}
			if ipN > 0 {
				if err := h.lim.Refund(rctx, ipAt, ipID, ipRules, cost); err != nil {
					v.setAside(err, keptIP, ipID)
				}
			}
		}
		return
	}
	v.deciding = window.Combine(v.ds[:v.n])
	if ipN > 0 && !v.deciding.Allowed {
		h.settleIP(ctx, now, ipAt, ipID, ipRules, cost, v)
	}
}

// knownRefused decides, with no store call, a request that the deny cache
// remembers the plan refusing: the ip rules are only peeked at, for their
// decisions and so that Retry-After does not come before they admit the
// request too, and it reports true with v filled. Counted by the ip rules
// first, as other requests are, such a request was taken back from them
// again when the plan refused it: on DynamoDB, with shared ip_limits, two
// writes of the address's item for each request of a client whose key
// the instance knew to be blocked, where a blocked client costs none
// without them (docs/lambda.md), and the address never became blocked
// itself. It reports false when the plan may admit the request, or when
// the ip rules cannot be peeked at, having used only v's scratch (res,
// and the decisions past n): the request is then decided as any other.
func (h *Handler) knownRefused(ctx context.Context, now time.Time, ipID string, ipRules []limiter.Rule, id string, p *plan, cost int64, v *verdict) bool {
	n := len(ipRules)
	if len(p.rules) == 0 || !h.lim.Remembered(now, id, p.rules, cost, &v.res) {
		return false
	}
	copy(v.ds[n:], v.res.All())
	if h.lim.PeekInto(ctx, now, ipID, ipRules, cost, &v.res) != nil {
		return false
	}
	copy(v.ds[:n], v.res.All())
	v.n, v.cached = n+len(p.rules), true
	v.deciding = window.Combine(v.ds[:v.n])
	return true
}

// bounded returns the context of a request's calls to a remote store on
// ctx: bounded by timeout (store_timeout) and by until, the request's own
// deadline (a Lambda invocation's; zero: none), but not cancelled with ctx.
// A client that hung up while its write was in flight cut the write
// mid-flight, which the store may have applied all the same, and its
// leaving was logged as a store error (a WARN "context canceled"); the
// proxy still sees it gone.
func bounded(ctx context.Context, until time.Time, timeout time.Duration) (context.Context, context.CancelFunc) {
	base := context.WithoutCancel(ctx)
	if !until.IsZero() && time.Until(until) < timeout {
		return context.WithDeadline(base, until)
	}
	return context.WithTimeout(base, timeout)
}

// planAfterIPError decides by the plan's rules a request whose ip rules
// (nIP of them) failed with the store error v.err, under on_store_error
// allow: the plan's local rules hold in an outage, as they do without
// ip_limits, and so does what the plan's shared rules decide without the
// ip rules' store: the key's own counts (another item, on DynamoDB; the
// isolate's, on a Worker) or the deny cache. Their denial is the answer (a
// 429), the ip rules undecided (zero decisions: no items; the local ones,
// under count_denied, decided again on the count they keep) and their
// error set aside; otherwise v.err stands and the request goes through as
// a store error, counted by the plan when it admitted it. A shared ip rule
// failing first let every request past the plan's local flood guard, and
// past a used-up key: its client could make the ip rules fail (flooding
// its address's DynamoDB item past the write rate; a new address for each
// request while a Worker's KV lists outlast store_timeout).
func (h *Handler) planAfterIPError(ctx context.Context, now time.Time, ipID string, nIP int, id string, p *plan, cost int64, v *verdict) {
	ipErr, ipAt := v.err, v.res.At
	clear(v.ds[:nIP])
	v.n = nIP
	if err := h.check1(ctx, now, id, p.rules, cost, v); err != nil || v.deciding.Allowed {
		return
	}
	v.err = nil
	switch {
	case !errors.Is(ipErr, limiter.ErrLocalCounted):
	case !h.countDenied:
		// In memory: it does not fail.
		_ = h.lim.Refund(ctx, ipAt, ipID, h.ipLocal, cost)
	case h.lim.PeekInto(ctx, now, ipID, h.ipLocal, cost, &v.res) == nil:
		// The local ip rules keep the count: Retry-After must not come
		// before they admit the retry too, as settleIP makes sure.
		v.putLocal(h.ipRules[:nIP], 0)
	}
	if v.aside == nil {
		v.setAside(ipErr, "the plan decided alone, without ip_limits", ipID)
	}
}

// peekLocal decides by p's local rules alone a request the ip rules
// denied, when the peek at the whole plan failed with err (its shared
// rules' store): the local rules are in memory, and a retry they would
// refuse must not be invited before they admit it. Told the ip rules' wait
// alone, a client behind a plan's used-up flood guard met the plan's 429
// at its retry. The shared rules are left undecided (zero decisions: no
// items), and err is set aside.
func (h *Handler) peekLocal(ctx context.Context, now time.Time, id string, p *plan, cost int64, err error, v *verdict) {
	if len(p.localRules) == 0 || h.lim.PeekInto(ctx, now, id, p.localRules, cost, &v.res) != nil {
		v.setAside(err, "ip_limits decided alone, without the plan's wait", id)
		return
	}
	from := v.n
	v.n += len(p.rules)
	clear(v.ds[from:v.n])
	v.putLocal(p.rules, from)
	v.setAside(err, "ip_limits and the plan's local rules decided, without the plan's shared rules' wait", id)
}

// putLocal puts the decisions of a check of the local rules among rules
// alone (v.res) in their places in v.ds, where rules' decisions begin at
// from, and combines v.ds again. The other places keep what they hold.
func (v *verdict) putLocal(rules []limiter.Rule, from int) {
	j := 0
	for i, r := range rules {
		if r.Local {
			v.ds[from+i] = v.res.Rules[j]
			j++
		}
	}
	v.deciding = window.Combine(v.ds[:v.n])
}

// refundContext returns the context of a refund after a check on ctx, for
// the request of v: ctx without its deadline or cancellation, bounded by
// store_timeout of its own and by the request's own deadline (v.until). The
// check may have spent ctx's whole budget, or the client gone, and a count
// that is not taken back stays: the client's next request is refused on a
// request never served. A refund past a Lambda invocation's deadline ran
// on after the function had to answer. The memory stores do not wait: ctx
// as it is.
func (h *Handler) refundContext(ctx context.Context, v *verdict) (context.Context, context.CancelFunc) {
	if h.inMemory {
		return ctx, func() {}
	}
	return bounded(ctx, v.until, h.timeout)
}

// keptIP is the logged action of a refund of the ip rules that failed.
const keptIP = "kept the ip_limits count of a refused request"

// sharedUnread is the logged action of a denial by a plan's local rules
// whose shared rules could not be read.
const sharedUnread = "the plan's local rules denied alone, without the shared rules' wait"

// setAside records a store error that leaves the answer standing, what was
// done about it, and for whom (see verdict.aside).
func (v *verdict) setAside(err error, action, id string) {
	v.aside, v.asideAction, v.asideID = err, action, id
}

// settleIP makes the ip rules' decisions (v.ds[:len(ipRules)]) those of a
// request the plan denied. Without count_denied their count of it is taken
// back (it was counted at at) and they report the state without it, as the
// limiter reports a rule that admitted a request another rule of the same
// check denied. With count_denied the count stays, and they decide the
// request again on it, so that a retry that the ip rules would refuse is
// not invited before they admit it. A refund that fails leaves the count
// too, and they decide the retry on it the same way (the plan's wait alone
// invited a retry the ip rules refused). Either way they are decided at
// now, like the plan's rules. When the store fails that reading, the
// local ones are read alone, and a shared one that keeps the count waits
// per keptWaits. A store error is set aside in v.
func (h *Handler) settleIP(ctx context.Context, now, at time.Time, ipID string, ipRules []limiter.Rule, cost int64, v *verdict) {
	kept := h.countDenied // the shared ip rules keep the count
	if !h.countDenied {
		rctx, cancel := h.refundContext(ctx, v)
		defer cancel()
		if err := h.lim.Refund(rctx, at, ipID, ipRules, cost); err != nil {
			v.setAside(err, keptIP, ipID)
			kept = true
		}
	}
	// v.res, the plan's answer, is in v.ds already.
	if err := h.lim.PeekInto(ctx, now, ipID, ipRules, cost, &v.res); err != nil {
		if v.aside == nil {
			// Not decided again: the ip rules' items are those of their
			// admission (with the count, taken back or not).
			v.setAside(err, "ip_limits items as they admitted the request", ipID)
		}
		if kept {
			keptWaits(now, at, ipRules, cost, v)
		}
		// But for the local ones, in memory: with a count they keep, the
		// plan's wait alone invited a retry they refused.
		if len(h.ipLocal) > 0 && h.lim.PeekInto(ctx, now, ipID, h.ipLocal, cost, &v.res) == nil {
			v.putLocal(ipRules, 0)
		}
		v.deciding = window.Combine(v.ds[:v.n])
		return
	}
	copy(v.ds[:len(ipRules)], v.res.All())
	v.deciding = window.Combine(v.ds[:v.n])
}

// keptWaits makes the shared ip rules' admission decisions (v.ds, first;
// decided at at) refuse a retry that the count they keep leaves no room
// for, when they could not be decided again: shown used up, with the
// plan's wait alone, they invited a retry they refused. Their counts are
// unknown, but at most Used (the request's cost among it) is in the
// current bucket, so the wait is that of Used counted there alone, or the
// time until their whole quota is back if that is sooner: never earlier
// than they admit the retry, and exact when the previous bucket weighs
// nothing.
func keptWaits(now, at time.Time, ipRules []limiter.Rule, cost int64, v *verdict) {
	for i, r := range ipRules {
		d := &v.ds[i]
		if r.Local || !d.Allowed || d.Remaining >= cost {
			continue
		}
		w := r.Wait(at, 0, d.Used, r.Limit-cost)
		if step := at.Sub(now); step > 0 && w < window.Never-step {
			w += step // the limiter decided ahead of now (Result.since)
		}
		d.Allowed, d.RetryAfter = false, min(w, d.ResetAfter)
	}
}

// check1 is one limiter call: it appends the call's decisions to v and sets
// v.deciding to the call's. The limiter.Result (three quarters of a kilobyte)
// lands in v, not on the stack. A denial whose count failed
// (limiter.ErrUncounted) is a denial, its error kept in v for the log.
func (h *Handler) check1(ctx context.Context, now time.Time, id string, rules []limiter.Rule, cost int64, v *verdict) error {
	if err := h.lim.CheckInto(ctx, now, id, rules, cost, &v.res); err != nil {
		switch {
		case errors.Is(err, limiter.ErrUncounted):
			v.uncounted, v.uncountedID = err, id
		case errors.Is(err, limiter.ErrSharedUnread):
			// A denial by the plan's local rules: it stands in an
			// outage. The shared rules' decisions are zero, and left
			// out of the headers.
			v.setAside(err, sharedUnread, id)
		default:
			return err
		}
	}
	v.add(&v.res)
	v.deciding = v.res.Decision
	return nil
}

// verdicts recycles the pre-filter's verdicts (1.3 KB each): on the stack
// they would make a connection goroutine outgrow 8 KB during the decision,
// and every GC shrinks idle stacks back, so each cycle would pay a
// shrink and a copy per connection.
var verdicts = sync.Pool{New: func() any { return new(verdict) }}

// filter is the pre-filter: identity, plan, rules, headers, then 429 or the
// origin. The decision runs in admit so that none of its frames is on the
// stack while the origin is proxied.
func (h *Handler) filter(w http.ResponseWriter, r *http.Request) {
	if own, remaining, ok := h.admit(w, r); ok {
		h.forOrigin(r.Header)
		h.serveOrigin(w, r, own, remaining)
	}
}

// admit decides r, sets the rate-limit headers, answers 429 (or 503 on a
// store error under on_store_error deny) itself, and reports whether the
// request goes on to the origin, with the header values it set (see
// setHeaders) and its X-RateLimit-Remaining (nil and negative: none, after
// a store error).
func (h *Handler) admit(w http.ResponseWriter, r *http.Request) (*[6]string, int64, bool) {
	ipID := h.ipID(r)
	id, p := ipID, h.defPlan
	var sum [sha256.Size]byte
	if h.apiKey(r, &sum) {
		// Even an OPTIONS that looks like a preflight: a browser's never
		// carries the key, and an origin that does not look at the
		// method would serve it by the key, uncounted.
		if kid, kp, ok := h.keys.find(&sum); ok {
			id, p = kid, kp
		} else if !h.unlistedIP {
			id = keyIdentity(&sum)
		}
	} else if preflight(r) {
		// A browser sends it before a cross-origin request, without the
		// API key: charging the plan would charge the client's IP under
		// default_plan for every preflight of every user behind it.
		p = h.preflight
		if len(h.ipRules) == 0 {
			return nil, -1, true
		}
	}
	// The clock is read only for a request some limit decides: on the
	// Worker every time read is kept as the isolate's newest, and an
	// undecided preflight's time, one no check saw, held the next check
	// after a step back in a bucket it had not reached.
	now := h.now()
	cost := h.cost(r)
	v := verdicts.Get().(*verdict)
	defer verdicts.Put(v)
	v.reset()
	h.decide(r.Context(), now, ipID, h.ipRules, id, p, cost, v)
	if v.aside != nil {
		h.logStoreError(r, v.aside, v.asideAction, v.asideID, p)
	}
	if v.uncounted != nil {
		h.logStoreError(r, v.uncounted, "deny", v.uncountedID, p)
	}
	if v.err != nil {
		return nil, -1, h.storeError(w, r, v.err, id, p)
	}
	hd := w.Header()
	own := setHeaders(hd, p.policy, p.items, v.ds[:v.n], v.deciding, now)
	if v.deciding.Allowed {
		return own, v.deciding.Remaining, true
	}
	if h.ipRule(v.deciding.Rule) {
		h.logDenied(r, ipID, p, cost, v) // the ip rules decided, on the IP
	} else {
		h.logDenied(r, id, p, cost, v)
	}
	if !h.shadow {
		h.AllowCORS(hd, r)
		writeTooMany(w, p, v)
		return nil, 0, false
	}
	hd.Set(ShadowHeader, "denied")
	hd.Del(hRetry)
	return own, v.deciding.Remaining, true
}

// storeErrorRetryAfter is the Retry-After, in seconds, of the 503 that
// on_store_error deny answers. How long the store stays down cannot be
// known, so no value is exact; without one, a client's retry logic may
// retry at once, in a loop, against a store already failing (a client
// flooding its own DynamoDB item, throttled, would go on flooding it).
// One second keeps each such client to a retry a second and delays one
// whose store error was a passing timeout by no more than that.
const storeErrorRetryAfter = "1"

// storeError logs a request the limiter could not decide and, per
// on_store_error, answers 503 with a Retry-After (storeErrorRetryAfter)
// and reports false (deny), or marks the response and reports true: the
// caller goes on as if it were admitted.
func (h *Handler) storeError(w http.ResponseWriter, r *http.Request, err error, id string, p *plan) bool {
	deny := h.deny && !h.shadow
	action := "allow"
	if deny {
		action = "deny"
	}
	h.logStoreError(r, err, action, id, p)
	if deny {
		h.AllowCORS(w.Header(), r)
		w.Header().Set(StoreHeader, StoreErrorDenied)
		w.Header()[hRetry] = []string{storeErrorRetryAfter}
		writeProblem(w, http.StatusServiceUnavailable, "the rate-limit store is unavailable and on_store_error is deny", nil)
		return false
	}
	w.Header().Set(StoreHeader, StoreErrorAllowed)
	return true
}

// logStoreError writes the WARN line of a store error: what it did about
// it (action) and for whom. Backend errors may quote the identity; the
// full hash stays out of logs like the key itself.
func (h *Handler) logStoreError(r *http.Request, err error, action, id string, p *plan) {
	h.log.WarnContext(r.Context(), "store error",
		"error", strings.ReplaceAll(err.Error(), id, redact(id)),
		"timeout", errors.Is(err, context.DeadlineExceeded),
		"action", action,
		"identity", redact(id),
		"plan", p.name,
		"method", Logged(r.Method),
		"path", Logged(r.URL.Path),
	)
}

// ipRule reports whether name is one of the ip rules' (rule names are
// unique across ip_limits and each plan).
func (h *Handler) ipRule(name string) bool {
	for _, r := range h.ipRules {
		if r.Name == name {
			return true
		}
	}
	return false
}

// maxLogged bounds a client's string (its path, its method) in a log
// line: a client refused at will could otherwise make every denied line
// carry a path of tens of KiB.
const maxLogged = 512

// Logged returns a client's string (a path, a method) as a log line
// carries it: cut to at most 512 bytes, at a character's start, with "…"
// after it when it was cut. It is not inlined (nor are ceilDiv and
// redact): a copy of each at every call site took 2 KB of the Worker's
// gzipped bundle together.
//
//go:noinline
func Logged(s string) string {
	if len(s) <= maxLogged {
		return s
	}
	i := maxLogged
	for i > maxLogged-utf8.UTFMax && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

func (h *Handler) logDenied(r *http.Request, id string, p *plan, cost int64, v *verdict) {
	d := v.deciding
	h.log.InfoContext(r.Context(), "denied",
		"identity", redact(id),
		"plan", p.name,
		"rule", d.Rule,
		"limit", d.Limit,
		"cost", cost,
		"retry_after_ms", ceilDiv(d.RetryAfter, time.Millisecond),
		"shadow", h.shadow,
		"cached", v.cached,
		"method", Logged(r.Method),
		"path", Logged(r.URL.Path),
	)
}

// cost returns the cost of the first configured route the request matches,
// or 1. The path is cleaned first so that "//v1/search" or
// "/v1/x/../search" pay what "/v1/search" pays, and "//v1/items/" what
// "/v1/items/" pays. HEAD matches a GET route: it is a GET without the
// body, and as costly to the origin.
//
// A request pays the highest cost of the ways an origin may serve it:
//   - its method upper-cased, as Django, Werkzeug and Symfony read it
//     ("post" is a POST);
//   - a method named in a method-override header (which origins such as
//     Express's method-override and Google's APIs serve instead of the
//     request line's) or in a _method query parameter (Symfony, Laravel):
//     a GET priced at 1 must not be served as a POST priced at 5. A
//     _method field of a form body is not read;
//   - an encoded slash kept inside its segment, as Go's ServeMux and
//     Express route "/v1/items/..%2F42" (on /v1/items/), besides the
//     decoded path ("/v1/42");
//   - its path without ";" parameters, as Tomcat, Jetty and Spring drop
//     them from each segment ("/v1;a=b/search", "/v1/x/..;/search" are
//     /v1/search there);
//   - its path in another case, as Express and ASP.NET Core route by
//     default ("/V1/SEARCH" is /v1/search there): see routeCost;
//   - its path with each backslash a slash, as IIS and the URL parser of
//     browsers and of the Worker read it ("/v1\search", "/v1%5Csearch"
//     are /v1/search there).
//
// The work does not grow with the routes times the names a client
// repeats: each name is matched against the few methods the routes name,
// and each method found is priced once.
func (h *Handler) cost(r *http.Request) int64 {
	if len(h.costs) == 0 {
		return 1
	}
	var buf [16]bool
	seen := buf[:]
	if len(h.methods) > len(buf) {
		seen = make([]bool, len(h.methods))
	}
	h.noteMethod(seen, r.Method)
	for _, k := range overrideHeaders {
		for _, v := range r.Header[k] {
			h.noteMethods(seen, v)
		}
	}
	if q := r.URL.RawQuery; strings.Contains(q, "method") || strings.Contains(q, "%") {
		methodParams(q, func(v string) { h.noteMethods(seen, v) })
	}
	// At most 8: the path, its kept-%2F reading, each of these read with
	// backslashes as slashes, each of those without ";" parameters.
	paths := [8]string{cleanPath(r.URL.Path)}
	n := 1
	if raw := r.URL.RawPath; strings.Contains(raw, "%2") {
		if alt := cleanPath(segmentsKept(raw)); alt != paths[0] {
			paths[1], n = alt, 2
		}
	}
	if strings.Contains(r.URL.Path, `\`) {
		for _, p := range paths[:n] {
			if alt := cleanPath(strings.ReplaceAll(p, `\`, "/")); !slices.Contains(paths[:n], alt) {
				paths[n] = alt
				n++
			}
		}
	}
	if strings.Contains(r.URL.Path, ";") {
		for _, p := range paths[:n] {
			if alt := cleanPath(withoutParams(p)); !slices.Contains(paths[:n], alt) {
				paths[n] = alt
				n++
			}
		}
	}
	c := int64(1)
	for _, p := range paths[:n] {
		for i, m := range h.methods {
			if seen[i] {
				c = max(c, h.routeCost(p, m))
			}
		}
	}
	return c
}

// notNamed prices a method no route names: only the routes of every method
// match it. No request's method is empty.
const notNamed = ""

// routeMethods returns the methods the routes name, then HEAD and notNamed.
func routeMethods(costs []config.Cost) []string {
	var ms []string
	for _, c := range costs {
		if c.Method != "" && c.Method != http.MethodHead && !slices.Contains(ms, c.Method) {
			ms = append(ms, c.Method)
		}
	}
	return append(ms, http.MethodHead, notNamed)
}

// noteMethods notes each method of the comma-separated list v.
func (h *Handler) noteMethods(seen []bool, v string) {
	for m := range strings.SplitSeq(v, ",") {
		h.noteMethod(seen, textproto.TrimString(m))
	}
}

// noteMethod marks in seen the method of h.methods that m is, upper-cased
// rune by rune as strings.ToUpper does ("poſt" is POST), and notNamed
// when it is none of them as sent.
func (h *Handler) noteMethod(seen []bool, m string) {
	if m == "" {
		return
	}
	last := len(h.methods) - 1
	for i, rm := range h.methods[:last] {
		if upperIs(m, rm) {
			seen[i] = true
			// Sent in another case, m is no method the routes name to
			// an origin that compares methods as sent (Go's ServeMux).
			seen[last] = seen[last] || m != rm
			return
		}
	}
	seen[last] = true
}

// upperIs reports whether s upper-cased is the upper-case ASCII word w.
func upperIs(s, w string) bool {
	for _, r := range s {
		if w == "" || unicode.ToUpper(r) != rune(w[0]) {
			return false
		}
		w = w[1:]
	}
	return w == ""
}

// segmentsKept returns an escaped path decoded but for its encoded slashes
// and dots, so that its segments are those of the path as sent: an
// encoded slash stays inside its segment, and "%2E%2E" is a name, not a
// dot segment, as Go's ServeMux (which cleans the escaped path) and
// Express (which routes the raw one) read them.
func segmentsKept(raw string) string {
	b := make([]byte, 0, len(raw))
	for i := 0; i < len(raw); i++ {
		if c := raw[i]; c == '%' && i+2 < len(raw) && ishex(raw[i+1]) && ishex(raw[i+2]) {
			if d := unhex(raw[i+1])<<4 | unhex(raw[i+2]); d != '/' && d != '.' {
				b = append(b, d)
				i += 2
				continue
			}
		}
		b = append(b, raw[i])
	}
	return string(b)
}

// methodParams calls yield with the value of each of the query's _method
// parameters, their names read as the frameworks that serve them read
// names: decoded ("%5Fmethod", "_%6Dethod"), and, as PHP does, without
// leading spaces, up to a NUL, and with a first "." or " " as "_" (PHP
// drops a name that starts with "["). Names are read without a copy.
func methodParams(query string, yield func(string)) {
	for pair := range strings.SplitSeq(query, "&") {
		k, v, _ := strings.Cut(pair, "=")
		if (strings.Contains(k, "method") || strings.Contains(k, "%")) && methodName(k) {
			yield(unescapeLoose(v))
		}
	}
}

// methodName reports whether the query name k, decoded as unescapeLoose
// decodes it, is a _method name by methodParams' rules.
func methodName(k string) bool {
	const word = "method"
	n := 0 // bytes of the name matched, after its leading spaces
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case c == '+':
			c = ' '
		case c == '%' && i+2 < len(k) && ishex(k[i+1]) && ishex(k[i+2]):
			c = unhex(k[i+1])<<4 | unhex(k[i+2])
			i += 2
		}
		switch {
		case c == 0:
			return n == 1+len(word)
		case n == 0 && c == ' ':
			// a leading space: PHP drops it
		case n == 0 && (c == '_' || c == '.'):
			n++
		case n == 0 || n > len(word) || c != word[n-1]:
			return false
		default:
			n++
		}
	}
	return n == 1+len(word)
}

// unescapeLoose decodes a query component as PHP's urldecode does: "+" is a
// space, a valid %XX its byte, and an invalid escape stays as written
// (url.QueryUnescape refuses the whole component: "_method%00%zz" is
// "_method" to PHP).
func unescapeLoose(s string) string {
	if !strings.ContainsAny(s, "%+") {
		return s
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '+':
			b = append(b, ' ')
		case c == '%' && i+2 < len(s) && ishex(s[i+1]) && ishex(s[i+2]):
			b = append(b, unhex(s[i+1])<<4|unhex(s[i+2]))
			i += 2
		default:
			b = append(b, c)
		}
	}
	return string(b)
}

func ishex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c >= 'a':
		return c - 'a' + 10
	case c >= 'A':
		return c - 'A' + 10
	}
	return c - '0'
}

// overrideHeaders name the method an origin may serve a request as.
var overrideHeaders = [...]string{"X-Http-Method-Override", "X-Http-Method", "X-Method-Override"}

// routeCost is the cost of the first route that a request of method to the
// clean path p matches, or 1; or, when it is higher, that of the first
// route p matches in another case: origins that route without regard to
// case (Express's and ASP.NET Core's defaults) serve "/V1/SEARCH" as
// /v1/search.
func (h *Handler) routeCost(p, method string) int64 {
	exact, folded := int64(0), int64(0)
	for _, c := range h.costs {
		if !matchMethod(c.Method, method) || len(p) < len(c.PathPrefix) {
			continue
		}
		if exact == 0 && p[:len(c.PathPrefix)] == c.PathPrefix {
			exact = c.Cost
		}
		if folded == 0 && strings.EqualFold(p[:len(c.PathPrefix)], c.PathPrefix) {
			folded = c.Cost
		}
	}
	return max(exact, folded, 1)
}

// withoutParams returns p with the ";" parameters of its segments removed
// ("/v1;a=b/search" is "/v1/search"), as Tomcat, Jetty and Spring route
// it. Not inlined: a copy of its loop in cost took 0.3 KB of the Worker's
// gzipped bundle, for requests with a ";" alone.
//
//go:noinline
func withoutParams(p string) string {
	b := make([]byte, 0, len(p))
	for i := 0; i < len(p); i++ {
		if p[i] == ';' {
			for i < len(p) && p[i] != '/' {
				i++
			}
			if i == len(p) {
				break
			}
		}
		b = append(b, p[i])
	}
	return string(b)
}

// matchMethod reports whether a request's method matches a route's: equal,
// any (empty), or HEAD for GET.
func matchMethod(route, method string) bool {
	return route == "" || route == method || route == http.MethodGet && method == http.MethodHead
}

// cleanPath removes empty and dot segments from p like RFC 3986 section
// 5.2.4: a trailing slash, or a last segment "." or "..", leaves the
// result ending in "/" (path.Clean alone would drop it, and
// "/v1/items/." would then miss the prefix "/v1/items/").
//
// A path that does not begin with "/" gets one before it, as the proxy
// sends it to the origin: Go's server takes two such targets, an
// absolute-form one without a path ("POST http://api.example HTTP/1.1",
// path "") and "*" for a method other than OPTIONS, and the proxy joins
// them to the origin URL's path with a slash, so the origin serves "/"
// and "/*". Priced as they came, they matched no route (every path_prefix
// begins with "/"), and a POST to "/" at a route cost of 3 cost 1.
func cleanPath(p string) string {
	if p == "" || p[0] != '/' {
		p = "/" + p
	}
	if !strings.Contains(p, "//") && !strings.Contains(p, "/.") {
		return p
	}
	np := path.Clean(p)
	if np != "/" && (strings.HasSuffix(p, "/") || strings.HasSuffix(p, "/.") || strings.HasSuffix(p, "/..")) {
		np += "/"
	}
	return np
}
