package config

import (
	"fmt"
	"maps"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/slidegate/slidegate/limiter"
	"github.com/slidegate/slidegate/window"
)

// MaxRules is the most limits a plan (or ip_limits) may have: what one
// limiter call judges.
const MaxRules = limiter.MaxRules

// MaxLimit is the largest Limit: the largest integer an HTTP structured
// field (RFC 9651) can carry, since it is sent in RateLimit-Policy.
const MaxLimit = 999_999_999_999_999

// MaxWindow is the longest Window: 366 days. Far longer windows would
// overflow the expiry of their counters.
const MaxWindow = 366 * 24 * time.Hour

// MinStoreTimeout and MaxStoreTimeout bound StoreTimeout. Below, every
// call to a remote store fails, and every request is decided by
// OnStoreError; above, a store that hangs holds requests past the 30 s
// that gateways (API Gateway's HTTP API) and clients commonly wait, and
// OnStoreError never answers. Typos of "50ms" ("50ns", "50m") fall
// outside.
const (
	MinStoreTimeout = time.Millisecond
	MaxStoreTimeout = 30 * time.Second
)

// MinCheckToken is the shortest CheckToken, in characters.
const MinCheckToken = 16

// MinIPv6Prefix is the shortest IPv6Prefix. A site (a home, an office, a
// hosting customer) is assigned a /48 at most (RIPE-690 advises a /48 or
// a /56 for one), so a shorter prefix groups whole sites into one client
// with one quota: a provider's customers at /32, all of IPv6 at /1, where
// one busy client then denies every other. GitLab's per-IP limits take 48
// to 128 too, and express-rate-limit advises 48 to 64.
const MinIPv6Prefix = 48

// Validate reports the first problem with c as a *FieldError, or nil.
// Zero fields are judged as their defaults. Plans are checked in name order,
// so the same configuration always reports the same error.
func (c *Config) Validate() error {
	defaultPlans := c.Plans == nil
	c = c.WithDefaults()
	if len(c.Plans) == 0 {
		return &FieldError{Field: "plans", Value: "{}", Err: because(ErrEmpty, "must define at least one plan")}
	}
	names := slices.Sorted(maps.Keys(c.Plans))
	// Names used by ip_limits, so a plan cannot reuse one: both can judge
	// one request and share one set of headers and one IP identity.
	ipNames := map[string]string{}
	if err := checkLimits("ip_limits", c.IPLimits, false, ipNames, nil); err != nil {
		return err
	}
	if defaultPlans {
		// Named at the ip_limit: the default plans' paths are nowhere in
		// the file ("plans.enterprise.limits[0]" for an ip_limit "minute").
		for i, l := range c.IPLimits {
			for _, name := range names {
				if slices.ContainsFunc(c.Plans[name].Limits, func(pl Limit) bool { return pl.Name == l.Name }) {
					return &FieldError{Field: "ip_limits[" + strconv.Itoa(i) + "].name", Value: quote(l.Name), Err: because(ErrDuplicate, "duplicate name: also a limit of the default plans (%s: plans is not set), and both apply to one request", strings.Join(names, ", "))}
				}
			}
		}
	}
	smallest, smallestAt := int64(MaxLimit)+1, ""
	for i, l := range c.IPLimits {
		if l.Limit < smallest {
			smallest, smallestAt = l.Limit, "ip_limits["+strconv.Itoa(i)+"]"
		}
	}
	for _, name := range names {
		path := "plans." + name
		if !validName(name) {
			return &FieldError{Field: "plans", Value: quote(name), Err: because(ErrName, "plan names must be 1 to 64 characters of A-Z a-z 0-9 . _ -")}
		}
		p := c.Plans[name]
		if err := checkLimits(path+".limits", p.Limits, true, map[string]string{}, ipNames); err != nil {
			return err
		}
		for i, l := range p.Limits {
			if l.Limit < smallest {
				smallest, smallestAt = l.Limit, path+".limits["+strconv.Itoa(i)+"]"
				if defaultPlans {
					smallestAt += ", a default plan's: plans is not set"
				}
			}
		}
		if p.UpgradeURL != "" {
			u, err := url.Parse(p.UpgradeURL)
			// Hostname, not Host: "https://${HOST}:8443/upgrade" with HOST
			// unset has the host ":8443" and no host name. url.Parse takes
			// a space in the path or the query: pasted after the URL, or a
			// no-break space from a web page, it went into every 429 of
			// the plan, and the link 404ed. (Unicode's rarer spaces are let
			// be: unicode.IsSpace's table took 0.4 KB of the Worker's
			// gzipped bundle.)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || strings.ContainsAny(p.UpgradeURL, " \u00a0") {
				return &FieldError{Field: path + ".upgrade_url", Value: quote(p.UpgradeURL), Err: because(ErrValue, "must be an absolute http or https URL with a host name, without spaces (a space is %%20)")}
			}
		}
	}
	if _, ok := c.Plans[c.DefaultPlan]; !ok {
		return &FieldError{Field: "default_plan", Value: quote(c.DefaultPlan), Err: because(ErrNoPlan, "no such plan (plans: %s)", strings.Join(names, ", "))}
	}
	keys := make([]string, 0, len(c.APIKeys))
	for k := range c.APIKeys {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !isHash(k) {
			// The key is not shown (it may be a raw key), so its plan is,
			// to tell the entry among the others; but only a plan: an
			// entry written the wrong way round ("free": "sk_live_...")
			// holds the key there, and it went into every log the error
			// reached. (A map lookup, not a message with the value's
			// length: that took 0.3 KB of the Worker's gzipped bundle.)
			v := quote(c.APIKeys[k])
			if _, ok := c.Plans[c.APIKeys[k]]; !ok {
				v = ""
			}
			return &FieldError{Field: keyField(k), Value: v, Err: because(ErrKeyHash, "must be the 64-character lower-case hex SHA-256 of the key (slidegate hash-key KEY prints it)")}
		}
		if plan := c.APIKeys[k]; !slices.Contains(names, plan) {
			return &FieldError{Field: keyField(k), Value: quote(plan), Err: because(ErrNoPlan, "no such plan (plans: %s)", strings.Join(names, ", "))}
		}
	}
	if err := c.Identity.validate(); err != nil {
		return err
	}
	covers := firstCovers(c.Costs)
	for i, r := range c.Costs {
		path := "costs[" + strconv.Itoa(i) + "]"
		if r.Method != "" && !validMethod(r.Method) {
			return &FieldError{Field: path + ".method", Value: quote(r.Method), Err: because(ErrValue, "must be an upper-case HTTP method such as POST, or empty for every method")}
		}
		if !strings.HasPrefix(r.PathPrefix, "/") {
			return &FieldError{Field: path + ".path_prefix", Value: quote(r.PathPrefix), Err: because(ErrValue, "must start with /")}
		}
		if !cleanPrefix(r.PathPrefix) {
			return &FieldError{Field: path + ".path_prefix", Value: quote(r.PathPrefix), Err: because(ErrValue, "can never match: request paths are matched decoded and cleaned, so a prefix must not contain //, /./, /../, %%, ? or #, nor end in /. or /..")}
		}
		if k := covers[i]; k < i {
			e := c.Costs[k]
			return &FieldError{Field: path + ".path_prefix", Value: quote(r.PathPrefix), Err: because(ErrValue, "can never match: costs[%d] (%s %q) comes first and matches every request this entry does (the first match wins): %s", k, methodOrAny(e.Method), e.PathPrefix, coveredFix(e, r))}
		}
		if r.Cost < 1 {
			return &FieldError{Field: path + ".cost", Value: num(r.Cost), Err: because(ErrRange, "must be at least 1")}
		}
		if r.Cost > smallest {
			return &FieldError{Field: path + ".cost", Value: num(r.Cost), Err: because(ErrCost, "must be at most %d, the smallest limit that can apply (%s)", smallest, smallestAt)}
		}
	}
	if c.OnStoreError != OnErrorAllow && c.OnStoreError != OnErrorDeny {
		return &FieldError{Field: "on_store_error", Value: quote(c.OnStoreError), Err: because(ErrValue, "must be \"allow\" or \"deny\"")}
	}
	d, err := time.ParseDuration(c.StoreTimeout)
	if err != nil {
		return &FieldError{Field: "store_timeout", Value: quote(c.StoreTimeout), Err: because(ErrDuration, "must be a Go duration such as \"50ms\"")}
	}
	if d < MinStoreTimeout || d > MaxStoreTimeout {
		return &FieldError{Field: "store_timeout", Value: quote(c.StoreTimeout), Err: because(ErrRange, "must be between 1ms and 30s: shorter, every store call fails; longer, a store that hangs outlasts its clients, and on_store_error is never heard")}
	}
	// A short token is a placeholder ("tok", "secret", "changeme") that
	// was never replaced: the check API counts against any key, on any
	// plan the caller names, and its 401s are not limited, so a token of
	// a few characters is soon found.
	badToken := c.CheckToken != "" && len(c.CheckToken) < MinCheckToken
	for _, r := range c.CheckToken {
		badToken = badToken || r <= ' ' || r > '~'
	}
	if badToken {
		return &FieldError{Field: "check_token", Err: because(ErrValue, "must be at least 16 characters of printable ASCII, without spaces (openssl rand -hex 16 prints one)")}
	}
	for i, o := range c.CORSOrigins {
		if o != "*" && !isOrigin(o) {
			return &FieldError{Field: "cors_origins[" + strconv.Itoa(i) + "]", Value: quote(o), Err: because(ErrValue, "must be \"*\" or an origin as browsers send it: scheme and host, and a port if not the default, such as \"https://app.example.com\" (no path, no trailing slash, lower case)")}
		}
	}
	return nil
}

// isOrigin reports whether s is an origin serialized as a browser's Origin
// header carries it (RFC 6454): http or https, a lower-case host, a port
// unless it is the scheme's default, nothing else.
func isOrigin(s string) bool {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" || strings.HasSuffix(s, "?") || strings.HasSuffix(s, "#") {
		return false
	}
	if p := u.Port(); p == "" && strings.HasSuffix(u.Host, ":") || u.Scheme == "https" && p == "443" || u.Scheme == "http" && p == "80" {
		return false // a browser leaves the default port out
	}
	if !browserHost(u.Hostname()) {
		return false
	}
	return s == strings.ToLower(s) && u.Scheme+"://"+u.Host == s
}

// browserHost reports whether host is written as a browser serializes it
// in an Origin (the URL standard's host serializer): an IP address in its
// canonical form (::1, never 0:0::1; 127.0.0.1, never 127.1 or 0x7f.0.0.1:
// a host whose last label is a number is an IPv4 address), or a domain in
// lower-case ASCII (Punycode for Unicode), underscores allowed, no
// wildcards.
func browserHost(host string) bool {
	if host == "" {
		return false // "https://:8443": no origin a browser sends
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return a.Zone() == "" && a.String() == host
	}
	last := strings.TrimSuffix(host, ".")
	last = last[strings.LastIndexByte(last, '.')+1:]
	if last != "" && (strings.Trim(last, "0123456789") == "" || strings.HasPrefix(last, "0x")) {
		return false // a number the browser reads as an IPv4 address, not so written
	}
	for _, c := range host {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' && c != '.' && c != '_' {
			return false
		}
	}
	return true
}

// checkLimits validates one list of limits. seen collects names within the
// list; reserved holds names the list must not reuse (ip_limits' names for
// a plan), mapped to where they are defined.
func checkLimits(path string, ls []Limit, required bool, seen, reserved map[string]string) error {
	if required && len(ls) == 0 {
		return &FieldError{Field: path, Value: "[]", Err: because(ErrEmpty, "a plan needs at least one limit")}
	}
	if len(ls) > MaxRules {
		return &FieldError{Field: path, Value: fmt.Sprintf("%d limits", len(ls)), Err: because(ErrTooMany, "a plan or ip_limits may have at most %d", MaxRules)}
	}
	for i, l := range ls {
		at := path + "[" + strconv.Itoa(i) + "]" // fmt costs more in Wasm, where this runs per request
		if !validName(l.Name) {
			return &FieldError{Field: at + ".name", Value: quote(l.Name), Err: because(ErrName, "must be 1 to 64 characters of A-Z a-z 0-9 . _ -")}
		}
		if prev, ok := seen[l.Name]; ok {
			return &FieldError{Field: at + ".name", Value: quote(l.Name), Err: because(ErrDuplicate, "duplicate name: also %s", prev)}
		}
		if prev, ok := reserved[l.Name]; ok {
			return &FieldError{Field: at + ".name", Value: quote(l.Name), Err: because(ErrDuplicate, "duplicate name: also %s, and both apply to one request", prev)}
		}
		seen[l.Name] = at
		if l.Limit < 1 || l.Limit > MaxLimit {
			return &FieldError{Field: at + ".limit", Value: num(l.Limit), Err: because(ErrRange, "must be between 1 and %d", int64(MaxLimit))}
		}
		d, err := time.ParseDuration(l.Window)
		switch {
		case err != nil:
			return &FieldError{Field: at + ".window", Value: quote(l.Window), Err: because(ErrDuration, "must be a Go duration such as \"1m\" or \"24h\"")}
		case d < window.MinPeriod:
			return &FieldError{Field: at + ".window", Value: quote(l.Window), Err: because(ErrRange, "must be at least 1s")}
		case d%time.Second != 0:
			return &FieldError{Field: at + ".window", Value: quote(l.Window), Err: because(ErrRange, "must be a whole number of seconds")}
		case d > MaxWindow:
			return &FieldError{Field: at + ".window", Value: quote(l.Window), Err: because(ErrRange, "must be at most %s (366 days)", fmtHours(MaxWindow))}
		}
		if l.Scope != "" && l.Scope != ScopeShared && l.Scope != ScopeLocal {
			return &FieldError{Field: at + ".scope", Value: quote(l.Scope), Err: because(ErrValue, "must be \"shared\" or \"local\"")}
		}
	}
	return nil
}

func (i Identity) validate() error {
	for j, h := range i.Headers {
		at := fmt.Sprintf("identity.headers[%d]", j)
		if !validToken(h) {
			return &FieldError{Field: at, Value: quote(h), Err: because(ErrValue, "must be an HTTP header name")}
		}
		if slices.ContainsFunc(hopByHop, func(name string) bool { return strings.EqualFold(name, h) }) {
			return &FieldError{Field: at, Value: quote(h), Err: because(ErrValue, "must not be a hop-by-hop header (%s): the proxy never sends it to the origin, so a client could be counted on a made-up value while the origin serves the next key header", strings.Join(hopByHop, ", "))}
		}
		if strings.EqualFold(h, "Host") {
			// net/http keeps Host out of the header map: the local server
			// would count every client by IP, the Worker every client of
			// a host name as one key.
			return &FieldError{Field: at, Value: quote(h), Err: because(ErrValue, "must not be Host: it names the site, not a client, and the local server does not read it as a header")}
		}
		for k, prev := range i.Headers[:j] {
			if cgiName(prev) == cgiName(h) {
				return &FieldError{Field: at, Value: quote(h), Err: because(ErrValue, "must not be the same name as identity.headers[%d] %q to an origin that reads headers CGI-style (case ignored, \"-\" read as \"_\"): a client could be counted on one and served by the other", k, prev)}
			}
		}
	}
	for j, s := range i.TrustedProxies {
		var why string
		switch p, err := parsePrefix(s); {
		case err == errHostBits:
			why = "has bits set past its length: write " + p.Masked().String() + " to trust that network, or " + p.Addr().String() + " for the one address"
		case err == errMappedBits: // returned as is; errors.Is would link reflectlite into the Worker
			why = "an IPv4-mapped CIDR counts its bits from the IPv6 address, so fewer than 96 hold every IPv4 address: write the IPv4 CIDR (10.0.0.0/8), or 96 more bits (::ffff:10.0.0.0/104)"
		case err == errEveryone:
			why = "trusts every address: any client could name itself in X-Forwarded-For, a fresh identity with each request: list the proxies' addresses or CIDRs"
		case err == errZone:
			why = "has a zone: a peer's address is compared without one, so write the address alone"
		case err != nil:
			why = "must be an IP address or a CIDR such as 10.0.0.0/8"
		default:
			continue
		}
		return &FieldError{Field: fmt.Sprintf("identity.trusted_proxies[%d]", j), Value: quote(s), Err: because(ErrValue, "%s", why)}
	}
	if i.IPv6Prefix < MinIPv6Prefix || i.IPv6Prefix > 128 {
		return &FieldError{Field: "identity.ipv6_prefix", Value: num(int64(i.IPv6Prefix)), Err: because(ErrRange, "must be between %d and 128 (a site is assigned a /48 at most: a shorter prefix counts many sites as one client)", MinIPv6Prefix)}
	}
	if i.UnlistedKeys != UnlistedKey && i.UnlistedKeys != UnlistedIP {
		return &FieldError{Field: "identity.unlisted_keys", Value: quote(i.UnlistedKeys), Err: because(ErrValue, "must be \"key\" or \"ip\"")}
	}
	return nil
}

// hopByHop are the headers a proxy never forwards (RFC 9110 7.6.1, and
// those httputil.ReverseProxy and the Worker's proxy drop).
var hopByHop = []string{"Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Proxy-Connection", "TE", "Trailer", "Transfer-Encoding", "Upgrade"}

// cgiName is the name a CGI-style origin (WSGI, Rack, PHP) reads header
// name under: upper case, "-" read as "_".
func cgiName(name string) string {
	return strings.ReplaceAll(strings.ToUpper(name), "-", "_")
}

// validName is not inlined: a copy of its loop at each of its callers
// took 0.2 KB of the Worker's gzipped bundle.
//
//go:noinline
func validName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch b := s[i]; {
		case b >= 'a' && b <= 'z', b >= 'A' && b <= 'Z', b >= '0' && b <= '9', b == '.', b == '_', b == '-':
		default:
			return false
		}
	}
	return true
}

// keyField names the api_keys entry k in an error. A key that is not a
// hash is most likely a raw API key pasted by mistake: it is described by
// its length, never printed.
func keyField(k string) string {
	if isHash(k) {
		return "api_keys." + k
	}
	return fmt.Sprintf("api_keys[%q]", fmt.Sprintf("<%d characters, not a lower-case hex SHA-256>", utf8.RuneCountInString(k)))
}

// cleanPrefix reports whether a path prefix can match a request path as
// the handler matches it: percent-decoded (so no '%' is left of an
// encoding, and '?' and '#' are never part of it), without empty or dot
// segments. A last segment "." or ".." never survives cleaning, nor does
// "//", "/./" or "/../" anywhere.
func cleanPrefix(p string) bool {
	if strings.ContainsAny(p, "%?#") {
		return false
	}
	for _, bad := range []string{"//", "/./", "/../"} {
		if strings.Contains(p, bad) {
			return false
		}
	}
	return !strings.HasSuffix(p, "/.") && !strings.HasSuffix(p, "/..")
}

// firstCovers returns, for each route, the index of the first route that
// matches every request it matches (itself, when no earlier one does): one
// whose prefix starts its prefix and that takes every method it takes
// (any, the same, or GET for its HEAD). A route covered by an earlier one
// is never the first match. Each route looks up its own prefixes of the
// lengths that routes have, rather than comparing every pair of routes
// (seconds, for the 30,000 routes a configuration may hold), and without
// a sort, whose generic code took 8 KB (gzip) of the Worker's bundle.
func firstCovers(costs []Cost) []int {
	// Keyed by method, a space (no method has one) and prefix.
	firstOf := make(map[string]int, len(costs))
	var lengths []int // of the prefixes, each once
	for i, c := range costs {
		k := c.Method + " " + c.PathPrefix
		if _, ok := firstOf[k]; !ok {
			firstOf[k] = i
		}
		if !slices.Contains(lengths, len(c.PathPrefix)) {
			lengths = append(lengths, len(c.PathPrefix))
		}
	}
	first := make([]int, len(costs))
	var key []byte
	for i, r := range costs {
		first[i] = i
		covering := [3]string{"", r.Method, r.Method}
		if r.Method == "HEAD" {
			covering[2] = "GET"
		}
		for _, n := range lengths {
			if n > len(r.PathPrefix) {
				continue
			}
			for _, m := range covering {
				key = append(append(append(key[:0], m...), ' '), r.PathPrefix[:n]...)
				if k, ok := firstOf[string(key)]; ok && k < first[i] {
					first[i] = k
				}
			}
		}
	}
	return first
}

// coveredFix says how to make route r, covered by the earlier route e,
// apply: the longer prefix first; of one prefix, the entry of the one
// method first (a longer prefix was no help there); the same route twice
// has one too many.
func coveredFix(e, r Cost) string {
	switch {
	case e.PathPrefix != r.PathPrefix:
		return "put the entry of the longer prefix first"
	case e.Method == r.Method:
		return "the same route twice: remove one"
	}
	return "put the " + r.Method + " entry first"
}

// methodOrAny names a route's method in an error.
func methodOrAny(m string) string {
	if m == "" {
		return "every method"
	}
	return m
}

// fmtHours formats d in whole hours, as it may be written in a window.
func fmtHours(d time.Duration) string {
	return strconv.FormatInt(int64(d/time.Hour), 10) + "h"
}

func isHash(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if b := s[i]; !(b >= '0' && b <= '9' || b >= 'a' && b <= 'f') {
			return false
		}
	}
	return true
}

// validToken reports whether s is an RFC 9110 token (a header or method name).
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		if b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' {
			continue
		}
		if !strings.ContainsRune("!#$%&'*+-.^_`|~", rune(b)) {
			return false
		}
	}
	return true
}

func validMethod(s string) bool {
	return validToken(s) && strings.ToUpper(s) == s
}
