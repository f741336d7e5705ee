package config

import (
	"net/netip"
	"time"
)

// Default values of the fields whose zero value means "use the default".
const (
	DefaultPlanName     = "free"
	DefaultIPv6Prefix   = 64
	DefaultStoreTimeout = 50 * time.Millisecond
	DefaultOnStoreError = "allow"
	DefaultUnlistedKeys = UnlistedKey
)

// DefaultHeaders are the request headers that carry an API key when
// Identity.Headers is nil, in the order they are tried.
var DefaultHeaders = []string{"X-API-Key", "Authorization"}

// Values of Limit.Scope and Config.OnStoreError.
const (
	ScopeShared  = "shared"
	ScopeLocal   = "local"
	OnErrorAllow = "allow"
	OnErrorDeny  = "deny"
)

// Values of Identity.UnlistedKeys.
const (
	UnlistedKey = "key"
	UnlistedIP  = "ip"
)

// Config is a whole slidegate configuration. Parse returns one with every
// default filled in; a Config built in code may leave fields zero, and each
// field documents what its zero value means. Call Validate before use (New
// in package httpapi does). A Config is not modified by slidegate after
// Validate and may then be shared between goroutines.
//
// Parse refuses a null for any field, so the fields that can be nil are
// tagged omitzero: encoding/json leaves a nil map or list out, which
// reads back as nil, where it wrote null; an empty one is still written
// ([] headers: identify by IP only).
type Config struct {
	// Plans by name. Nil means the three default plans (see Default).
	Plans map[string]Plan `json:"plans,omitzero"`
	// DefaultPlan is the plan of clients without an API key and of keys not
	// listed in APIKeys. Empty means "free".
	DefaultPlan string `json:"default_plan"`
	// APIKeys maps the lower-case hex SHA-256 of an API key (the whole
	// header value; `slidegate hash-key KEY` prints it) to a plan name.
	APIKeys map[string]string `json:"api_keys,omitzero"`
	// Identity says how a client is identified.
	Identity Identity `json:"identity"`
	// IPLimits apply to the client IP before the plan limits, to every
	// request, with or without an API key. Empty means none.
	IPLimits []Limit `json:"ip_limits,omitzero"`
	// Costs weigh requests by route; the first matching entry wins, so an
	// entry that an earlier one matches first for every request (a prefix
	// of its prefix, for its method too) is refused. A request that
	// matches none costs 1.
	Costs []Cost `json:"costs,omitzero"`
	// CountDenied counts the cost of denied requests too, so that a client
	// that keeps retrying stays blocked.
	CountDenied bool `json:"count_denied"`
	// Shadow decides, sets headers and logs, but never blocks.
	Shadow bool `json:"shadow"`
	// OnStoreError is "allow" or "deny": what happens to a request when the
	// counter store fails or does not answer within StoreTimeout. Empty
	// means "allow".
	OnStoreError string `json:"on_store_error"`
	// StoreTimeout bounds the store calls of one request together (one
	// deadline for its ip_limits and plan checks), as a Go duration ("50ms")
	// from MinStoreTimeout to MaxStoreTimeout (1ms to 30s). Empty means
	// 50ms.
	StoreTimeout string `json:"store_timeout"`
	// CheckToken, when set, is the bearer token that POST /v1/check
	// requires: at least MinCheckToken characters of printable ASCII,
	// without spaces. Empty leaves the check API open.
	CheckToken string `json:"check_token"`
	// CORSOrigins are the browser origins ("https://app.example.com", or
	// "*" for any) whose pages may read slidegate's answers: its own 429s
	// and 503s carry Access-Control-Allow-Origin for them, and every
	// answer they get (the origin's too, when the origin allows them)
	// Access-Control-Expose-Headers naming the rate-limit headers, which a
	// page's script cannot read otherwise. Empty means none.
	CORSOrigins []string `json:"cors_origins,omitzero"`
}

// Plan is a named set of limits that apply together to one identity.
type Plan struct {
	// Limits all apply; a request is admitted only when every one admits
	// it. At least one, at most limiter.MaxRules.
	Limits []Limit `json:"limits,omitzero"`
	// UpgradeURL, when set, is put in the body of a 429 answered under
	// this plan. Absolute http or https URL, without spaces.
	UpgradeURL string `json:"upgrade_url,omitempty"`
}

// Limit admits at most Limit units of cost in any sliding window of length
// Window.
type Limit struct {
	// Name identifies the limit in headers, bodies, logs and storage keys:
	// 1 to 64 characters of A-Z a-z 0-9 . _ -, unique among the limits
	// that can apply to one request (a plan's limits and ip_limits).
	Name string `json:"name"`
	// Limit is the cost admitted per window: 1 to 999999999999999.
	Limit int64 `json:"limit"`
	// Window is a Go duration, a whole number of seconds, at least 1s and
	// at most MaxWindow (8784h, 366 days).
	Window string `json:"window"`
	// Scope is "shared" (counted in the store every node shares) or
	// "local" (counted in this process or isolate only: cheap, for short
	// flood guards). Empty means "shared".
	Scope string `json:"scope,omitempty"`
}

// Identity says how a client is identified.
type Identity struct {
	// Headers carry an API key; the first one present is the key. Nil
	// means X-API-Key, then Authorization; an empty list means clients are
	// identified by IP only. None may be hop-by-hop (Proxy-Authorization:
	// never sent to the origin), and no two one name to a CGI-style origin
	// (X-API-Key and X_API_KEY).
	Headers []string `json:"headers,omitzero"`
	// TrustedProxies are the IPs or CIDRs of reverse proxies in front of
	// slidegate. X-Forwarded-For is read only when the socket peer is one
	// of them; then the client is its right-most address that is not. An
	// IPv4-mapped CIDR is its IPv4 CIDR, and needs at least 96 bits
	// (::ffff:10.0.0.0/104 is 10.0.0.0/8). A CIDR of every address
	// (0.0.0.0/0, ::/0) is refused: every client would be a proxy, and
	// name itself in X-Forwarded-For; so is a CIDR with bits set past its
	// length (10.0.0.5/24: the network, or the one address?).
	TrustedProxies []string `json:"trusted_proxies,omitzero"`
	// IPv6Prefix groups IPv6 clients by this many leading bits,
	// MinIPv6Prefix (48) to 128: one household or host usually holds a
	// whole /64, and a site a /48 at most. Zero means 64.
	IPv6Prefix int `json:"ipv6_prefix"`
	// UnlistedKeys says who a request is, with an API key that is not in
	// APIKeys: "key" (the key is its own identity, with DefaultPlan: a
	// client that makes keys up gets a fresh quota with each) or "ip" (the
	// request is limited as one without a key: on its client IP, with
	// DefaultPlan). Empty means "key". The check API's keys are always
	// their own identity.
	UnlistedKeys string `json:"unlisted_keys"`
}

// Cost weighs the requests of a route.
type Cost struct {
	// Method is an upper-case HTTP method; empty matches every method.
	// "GET" matches HEAD requests too (a HEAD route matches HEAD only).
	Method string `json:"method,omitempty"`
	// PathPrefix matches request paths that start with it, once decoded
	// and cleaned of empty and dot segments ("//v1/items/." is
	// "/v1/items/"). It starts with "/" and is itself clean: no "//",
	// "/./", "/../", '%', '?' or '#', no last segment "." or "..".
	PathPrefix string `json:"path_prefix"`
	// Cost is what a matching request counts against every limit: at
	// least 1 and at most the smallest limit that can apply.
	Cost int64 `json:"cost"`
}

// Default returns the configuration used when there is none: plans free
// (60 a minute, 10,000 a day), pro (600 a minute, 100,000 a day) and
// enterprise (6,000 a minute, 1,000,000 a day), "free" for clients without
// a listed key, no IP limits, no route costs.
func Default() *Config {
	c := &Config{Plans: defaultPlans()}
	c.fillDefaults()
	return c
}

func defaultPlans() map[string]Plan {
	plan := func(minute, day int64) Plan {
		return Plan{Limits: []Limit{
			{Name: "minute", Limit: minute, Window: "1m"},
			{Name: "day", Limit: day, Window: "24h"},
		}}
	}
	return map[string]Plan{
		"free":       plan(60, 10_000),
		"pro":        plan(600, 100_000),
		"enterprise": plan(6_000, 1_000_000),
	}
}

// WithDefaults returns a copy of c in which every zero field that has a
// default holds it. c is not modified.
func (c *Config) WithDefaults() *Config {
	d := c.clone()
	d.fillDefaults()
	return d
}

// clone copies c deeply enough that fillDefaults on the copy leaves c alone.
func (c *Config) clone() *Config {
	d := *c
	if c.Plans != nil {
		d.Plans = make(map[string]Plan, len(c.Plans))
		for name, p := range c.Plans {
			p.Limits = append([]Limit(nil), p.Limits...)
			d.Plans[name] = p
		}
	}
	if c.APIKeys != nil {
		d.APIKeys = make(map[string]string, len(c.APIKeys))
		for k, v := range c.APIKeys {
			d.APIKeys[k] = v
		}
	}
	if c.Identity.Headers != nil {
		d.Identity.Headers = append([]string{}, c.Identity.Headers...)
	}
	d.Identity.TrustedProxies = append([]string(nil), c.Identity.TrustedProxies...)
	d.IPLimits = append([]Limit(nil), c.IPLimits...)
	d.Costs = append([]Cost(nil), c.Costs...)
	d.CORSOrigins = append([]string(nil), c.CORSOrigins...)
	return &d
}

// fillDefaults writes the default of every zero field that has one, so that
// a parsed Config shows what is in effect.
func (c *Config) fillDefaults() {
	if c.Plans == nil {
		c.Plans = defaultPlans()
	}
	if c.DefaultPlan == "" {
		c.DefaultPlan = DefaultPlanName
	}
	if c.Identity.Headers == nil {
		c.Identity.Headers = append([]string(nil), DefaultHeaders...)
	}
	if c.Identity.IPv6Prefix == 0 {
		c.Identity.IPv6Prefix = DefaultIPv6Prefix
	}
	if c.Identity.UnlistedKeys == "" {
		c.Identity.UnlistedKeys = DefaultUnlistedKeys
	}
	if c.OnStoreError == "" {
		c.OnStoreError = DefaultOnStoreError
	}
	if c.StoreTimeout == "" {
		c.StoreTimeout = DefaultStoreTimeout.String()
	}
	for name, p := range c.Plans {
		for i := range p.Limits {
			if p.Limits[i].Scope == "" {
				p.Limits[i].Scope = ScopeShared
			}
		}
		c.Plans[name] = p
	}
	for i := range c.IPLimits {
		if c.IPLimits[i].Scope == "" {
			c.IPLimits[i].Scope = ScopeShared
		}
	}
}

// Period returns the parsed Window; zero when it does not parse (Validate
// reports that).
func (l Limit) Period() time.Duration {
	d, err := time.ParseDuration(l.Window)
	if err != nil {
		return 0
	}
	return d
}

// LongestWindow returns the longest window of any plan limit or ip_limit:
// how long a store must keep an identity's counters (DynamoDB's TTL).
func (c *Config) LongestWindow() time.Duration {
	var d time.Duration
	for _, p := range c.Plans {
		for _, l := range p.Limits {
			d = max(d, l.Period())
		}
	}
	for _, l := range c.IPLimits {
		d = max(d, l.Period())
	}
	return d
}

// IsLocal reports whether the limit is counted in process memory only.
func (l Limit) IsLocal() bool { return l.Scope == ScopeLocal }

// Timeout returns the parsed StoreTimeout, or 50ms when it is empty or
// does not parse (Validate reports that).
func (c *Config) Timeout() time.Duration {
	d, err := time.ParseDuration(c.StoreTimeout)
	if err != nil || d <= 0 {
		return DefaultStoreTimeout
	}
	return d
}

// DenyOnStoreError reports whether a request is denied when the store
// fails.
func (c *Config) DenyOnStoreError() bool { return c.OnStoreError == OnErrorDeny }

// Prefixes returns TrustedProxies parsed, skipping entries that do not
// parse (Validate reports them).
func (i Identity) Prefixes() []netip.Prefix {
	out := make([]netip.Prefix, 0, len(i.TrustedProxies))
	for _, s := range i.TrustedProxies {
		if p, err := parsePrefix(s); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// parsePrefix parses an IP ("10.0.0.1", a single address) or a CIDR
// ("10.0.0.0/8") without bits set past its length.
func parsePrefix(s string) (netip.Prefix, error) {
	if a, err := netip.ParseAddr(s); err == nil {
		if a.Zone() != "" {
			return netip.Prefix{}, errZone
		}
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	if p.Addr().Is4In6() {
		if p.Bits() < 96 {
			// Its bits count from the IPv6 address: ::ffff:10.0.0.0/8
			// is ::/8, which holds every IPv4 address. Written so, it
			// is surely 10.0.0.0/8 meant, and taken as 0.0.0.0/0 it
			// made every client a proxy, free to pick its identity in
			// X-Forwarded-For.
			return netip.Prefix{}, errMappedBits
		}
		p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
	}
	if p.Bits() == 0 {
		// 0.0.0.0/0 or ::/0: every client of that family is a proxy,
		// and the left-most X-Forwarded-For address, which it writes
		// itself, its identity.
		return netip.Prefix{}, errEveryone
	}
	if p != p.Masked() {
		// 10.0.0.5/24, an interface's address as `ip addr` shows it:
		// masked, it trusted the whole /24 where the one proxy was
		// surely meant, and every client there could name itself in
		// X-Forwarded-For. Returned as written, for the error to say
		// both readings.
		return p, errHostBits
	}
	return p, nil
}
