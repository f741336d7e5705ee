package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate/internal/jsonv"
)

// fuzzSeeds are the documents the fuzz targets below start from: every
// fixture, the example, and a configuration that sets every field.
func fuzzSeeds(f *testing.F) {
	files, _ := filepath.Glob("testdata/invalid/*.json")
	files = append(files, "../examples/config.json")
	for _, name := range files {
		if doc, err := os.ReadFile(name); err == nil {
			f.Add(doc)
		}
	}
	f.Add([]byte(`{"plans": {"free": {"limits": [{"name": "minute", "limit": 60, "window": "1m", "scope": "local"}], "upgrade_url": "https://example.com/up"},
  "pro": {"limits": [{"name": "m", "limit": 600, "window": "60s"}]}},
 "default_plan": "free", "api_keys": {"` + strings.Repeat("ab", 32) + `": "pro"},
 "identity": {"headers": ["X-API-Key"], "trusted_proxies": ["10.0.0.0/8", "::ffff:192.168.0.0/112", "2001:db8::1"], "ipv6_prefix": 48, "unlisted_keys": "ip"},
 "ip_limits": [{"name": "ip", "limit": 50, "window": "1s"}],
 "costs": [{"method": "POST", "path_prefix": "/v1/search", "cost": 5}, {"path_prefix": "/v1/", "cost": 2}],
 "count_denied": true, "shadow": true, "on_store_error": "deny", "store_timeout": "1.5s", "check_token": "tok-0123456789abc",
 "cors_origins": ["https://app.example.com", "*"]}`))
}

// FuzzConfigRoundTrip: a configuration that parses obeys every bound the
// README documents (checked here independently of Validate), holds no
// null anywhere, and written out again as JSON (by encoding/json, which
// leaves its nil maps and lists out) it parses to the same configuration.
// One that does not parse is a *FieldError naming a field, the same one each time, that
// shows neither the check token nor a raw API key; a document that is not
// UTF-8 is refused at the line and column of its first bad byte.
func FuzzConfigRoundTrip(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, doc []byte) {
		c, err := Parse(doc)
		if err != nil {
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field == "" || fe.Err == nil {
				t.Fatalf("error %v (%T) names no field", err, err)
			}
			if at := invalidUTF8(bytes.TrimPrefix(doc, []byte("\ufeff"))); at >= 0 && len(doc) <= MaxSize && !strings.HasPrefix(fe.Field, "line ") {
				t.Fatalf("invalid UTF-8 at byte %d, error %q names no line", at, err)
			}
			if _, again := Parse(doc); again == nil || again.Error() != err.Error() {
				t.Fatalf("parsed twice: %v, then %v", err, again)
			}
			for _, s := range fuzzSecrets(doc) {
				if strings.Contains(err.Error(), s) {
					t.Fatalf("error %q shows the secret %q", err, s)
				}
			}
			return
		}
		if why := fuzzBounds(c); why != "" {
			t.Fatalf("accepted %s\n%s", why, doc)
		}
		if tree, err := jsonv.Parse(bytes.TrimPrefix(doc, []byte("\ufeff"))); err == nil && hasNull(tree) {
			t.Fatalf("accepted a null\n%s", doc)
		}
		out, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		c2, err := Parse(out)
		if err != nil {
			t.Fatalf("re-marshalled configuration does not parse: %v\n%s\nfrom\n%s", err, out, doc)
		}
		if !reflect.DeepEqual(c, c2) {
			t.Fatalf("round trip changed the configuration:\n%+v\n%+v\n%s", c, c2, out)
		}
	})
}

// hasNull reports whether a parsed JSON value is or holds a null.
func hasNull(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case map[string]any:
		for _, e := range v {
			if hasNull(e) {
				return true
			}
		}
	case []any:
		for _, e := range v {
			if hasNull(e) {
				return true
			}
		}
	}
	return false
}

// fuzzSecrets returns the check token and the api_keys entries that are
// not hashes (raw keys pasted there), of 8 bytes or more, when doc is an
// object that has them.
func fuzzSecrets(doc []byte) []string {
	tree, err := jsonv.Parse(doc)
	if err != nil {
		return nil
	}
	m, _ := tree.(map[string]any)
	var out []string
	if s, ok := m["check_token"].(string); ok && len(s) >= 8 {
		out = append(out, s)
	}
	keys, _ := m["api_keys"].(map[string]any)
	for k := range keys {
		if len(k) >= 8 && !isHash(k) {
			out = append(out, k)
		}
	}
	return out
}

// fuzzBounds returns what in c breaks a bound the README's
// configuration reference documents, or "".
func fuzzBounds(c *Config) string {
	name := func(s string) bool {
		if len(s) < 1 || len(s) > 64 {
			return false
		}
		return strings.Trim(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") == ""
	}
	smallest := int64(MaxLimit)
	limits := func(at string, ls []Limit, plan bool, taken map[string]bool) string {
		if plan && len(ls) == 0 || len(ls) > MaxRules {
			return at + ": " + strconv.Itoa(len(ls)) + " limits"
		}
		seen := map[string]bool{}
		for _, l := range ls {
			d, err := time.ParseDuration(l.Window)
			switch {
			case !name(l.Name) || seen[l.Name] || taken[l.Name]:
				return at + " name " + l.Name
			case l.Limit < 1 || l.Limit > 999_999_999_999_999:
				return at + " limit"
			case err != nil || d < time.Second || d%time.Second != 0 || d > 8784*time.Hour:
				return at + " window " + l.Window
			case l.Scope != "shared" && l.Scope != "local":
				return at + " scope " + l.Scope
			}
			seen[l.Name] = true
			smallest = min(smallest, l.Limit)
		}
		return ""
	}
	ipNames := map[string]bool{}
	if why := limits("ip_limits", c.IPLimits, false, nil); why != "" {
		return why
	}
	for _, l := range c.IPLimits {
		ipNames[l.Name] = true
	}
	if len(c.Plans) == 0 {
		return "no plans"
	}
	for n, p := range c.Plans {
		if !name(n) {
			return "plan name " + n
		}
		if why := limits("plans."+n, p.Limits, true, ipNames); why != "" {
			return why
		}
		if p.UpgradeURL != "" {
			u, err := url.Parse(p.UpgradeURL)
			if err != nil || !u.IsAbs() || u.Hostname() == "" || u.Scheme != "http" && u.Scheme != "https" || strings.ContainsAny(p.UpgradeURL, " \u00a0") {
				return "upgrade_url " + p.UpgradeURL
			}
		}
	}
	if _, ok := c.Plans[c.DefaultPlan]; !ok {
		return "default_plan " + c.DefaultPlan
	}
	for k, p := range c.APIKeys {
		if _, ok := c.Plans[p]; !ok || len(k) != 64 || strings.Trim(k, "0123456789abcdef") != "" {
			return "api_keys entry " + k
		}
	}
	for i, h := range c.Identity.Headers {
		if h == "" || strings.Trim(h, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789!#$%&'*+-.^_`|~") != "" || strings.EqualFold(h, "host") {
			return "header " + h
		}
		for _, hop := range []string{"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade"} {
			if strings.EqualFold(h, hop) {
				return "hop-by-hop header " + h
			}
		}
		for _, prev := range c.Identity.Headers[:i] {
			if strings.EqualFold(strings.ReplaceAll(prev, "-", "_"), strings.ReplaceAll(h, "-", "_")) {
				return "headers one to CGI " + prev + " " + h
			}
		}
	}
	for _, s := range c.Identity.TrustedProxies {
		if a, err := netip.ParseAddr(s); err == nil {
			if a.Zone() != "" {
				return "trusted proxy with a zone " + s
			}
			continue
		}
		p, err := netip.ParsePrefix(s)
		bits := p.Bits()
		if err == nil && p.Addr().Is4In6() {
			bits -= 96
		}
		if err != nil || bits <= 0 || p != p.Masked() {
			return "trusted proxy " + s
		}
	}
	if p := c.Identity.IPv6Prefix; p < 48 || p > 128 {
		return "ipv6_prefix"
	}
	if u := c.Identity.UnlistedKeys; u != "key" && u != "ip" {
		return "unlisted_keys " + u
	}
	for i, r := range c.Costs {
		p := r.PathPrefix
		switch {
		case r.Method != "" && (strings.ToUpper(r.Method) != r.Method || strings.Trim(r.Method, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#$%&'*+-.^_`|~") != ""):
			return "cost method " + r.Method
		case !strings.HasPrefix(p, "/") || strings.ContainsAny(p, "%?#") || strings.Contains(p, "//") || strings.Contains(p, "/./") ||
			strings.Contains(p, "/../") || strings.HasSuffix(p, "/.") || strings.HasSuffix(p, "/.."):
			return "cost path_prefix " + p
		case r.Cost < 1 || r.Cost > smallest:
			return "cost of " + p
		}
		for _, e := range c.Costs[:i] {
			if strings.HasPrefix(p, e.PathPrefix) && (e.Method == "" || e.Method == r.Method || e.Method == "GET" && r.Method == "HEAD") {
				return "cost entry covered by an earlier one: " + p
			}
		}
	}
	if c.OnStoreError != "allow" && c.OnStoreError != "deny" {
		return "on_store_error " + c.OnStoreError
	}
	if d, err := time.ParseDuration(c.StoreTimeout); err != nil || d < time.Millisecond || d > 30*time.Second {
		return "store_timeout " + c.StoreTimeout
	}
	if c.CheckToken != "" && len(c.CheckToken) < 16 {
		return "check_token of " + strconv.Itoa(len(c.CheckToken)) + " characters"
	}
	for i := 0; i < len(c.CheckToken); i++ {
		if b := c.CheckToken[i]; b <= ' ' || b > '~' {
			return "check_token byte"
		}
	}
	for _, o := range c.CORSOrigins {
		if o == "*" {
			continue
		}
		u, err := url.Parse(o)
		if err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Hostname() == "" || u.Scheme+"://"+u.Host != o || o != strings.ToLower(o) ||
			strings.HasSuffix(o, ":") || strings.HasSuffix(o, ":443") && u.Scheme == "https" || strings.HasSuffix(o, ":80") && u.Scheme == "http" {
			return "cors origin " + o
		}
	}
	return ""
}

// TestInvalidUTF8Located: a configuration that is not UTF-8 (a character
// saved in Latin-1 or Windows-1252) is refused at the line and column of
// its first bad byte, as every other syntax error is, not as
// "(document): invalid JSON: invalid UTF-8", which left the operator of a
// long file to hunt for it.
func TestInvalidUTF8Located(t *testing.T) {
	tests := []struct {
		name, doc, want string
	}{
		{"Latin-1 in a value", "{\n  \"plans\": {\"free\": {\"upgrade_url\": \"https://example.com/z\xfcrich\"}}\n}",
			"config: line 2, column 59: invalid JSON: invalid UTF-8 (byte 0xFC; save the configuration as UTF-8)"},
		{"first byte", "\xff{}", "config: line 1, column 1: invalid JSON: invalid UTF-8 (byte 0xFF; save the configuration as UTF-8)"},
		{"after characters", "{\"check_token\": \"\u00e9\u00e9\", \"\x80\": 1}",
			"config: line 1, column 24: invalid JSON: invalid UTF-8 (byte 0x80; save the configuration as UTF-8)"},
		{"after a byte order mark", "\ufeff{\n\"shadow\": \xe9}", "config: line 2, column 11: invalid JSON: invalid UTF-8 (byte 0xE9; save the configuration as UTF-8)"},
		{"truncated character", "{\"shadow\": true}\n\xe2\x82", "config: line 2, column 1: invalid JSON: invalid UTF-8 (byte 0xE2; save the configuration as UTF-8)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.doc))
			if err == nil || err.Error() != tt.want || !errors.Is(err, ErrSyntax) {
				t.Errorf("Parse: %v\nwant %s", err, tt.want)
			}
		})
	}
}

// FuzzCostsCovered: of a list of routes, the first one that an earlier
// route matches first for every request it matches (the earlier prefix
// starts its prefix; the earlier method is empty, the same, or GET for its
// HEAD) is refused, naming the first such earlier route; a list without one
// is accepted. Checked against every pair of routes.
func FuzzCostsCovered(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5})
	f.Add([]byte{10, 3, 9, 2, 1, 2, 4, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		methods := []string{"", "GET", "HEAD", "POST"}
		prefixes := []string{"/", "/a", "/a/", "/ab", "/a/b", "/b", "/ab/", "/a/b/c", "/a b", "/a/bc"}
		costs := []Cost{} // not nil: "costs": null is refused
		for i := 0; i+1 < len(data) && len(costs) < 12; i += 2 {
			costs = append(costs, Cost{Method: methods[int(data[i])%len(methods)], PathPrefix: prefixes[int(data[i+1])%len(prefixes)], Cost: 1})
		}
		doc, err := json.Marshal(map[string]any{"costs": costs})
		if err != nil {
			t.Fatal(err)
		}
		covers := func(e, r Cost) bool {
			return strings.HasPrefix(r.PathPrefix, e.PathPrefix) && (e.Method == "" || e.Method == r.Method || e.Method == "GET" && r.Method == "HEAD")
		}
		bad, by := -1, -1
	find:
		for i, r := range costs {
			for k, e := range costs[:i] {
				if covers(e, r) {
					bad, by = i, k
					break find
				}
			}
		}
		_, err = Parse(doc)
		var fe *FieldError
		switch {
		case bad < 0 && err != nil:
			t.Fatalf("%s: %v, want it accepted", doc, err)
		case bad < 0:
		case !errors.As(err, &fe) || fe.Field != "costs["+strconv.Itoa(bad)+"].path_prefix" || !strings.Contains(err.Error(), "costs["+strconv.Itoa(by)+"] ("):
			t.Fatalf("%s: %v, want costs[%d] refused as covered by costs[%d]", doc, err, bad, by)
		}
	})
}

// fuzzFields are the string fields FuzzFieldValue writes a value into:
// where in the document (set), and the path an error about it names.
var fuzzFields = []struct {
	path string
	set  func(m map[string]any, v string)
}{
	{"plans.free.limits[0].name", func(m map[string]any, v string) { fuzzLimit(m)["name"] = v }},
	{"plans.free.limits[0].window", func(m map[string]any, v string) { fuzzLimit(m)["window"] = v }},
	{"plans.free.limits[0].scope", func(m map[string]any, v string) { fuzzLimit(m)["scope"] = v }},
	{"plans.free.upgrade_url", func(m map[string]any, v string) {
		m["plans"].(map[string]any)["free"].(map[string]any)["upgrade_url"] = v
	}},
	{"default_plan", func(m map[string]any, v string) { m["default_plan"] = v }},
	{"identity.headers[0]", func(m map[string]any, v string) { m["identity"].(map[string]any)["headers"] = []any{v} }},
	{"identity.trusted_proxies[0]", func(m map[string]any, v string) { m["identity"].(map[string]any)["trusted_proxies"] = []any{v} }},
	{"identity.unlisted_keys", func(m map[string]any, v string) { m["identity"].(map[string]any)["unlisted_keys"] = v }},
	{"ip_limits[0].name", func(m map[string]any, v string) { m["ip_limits"].([]any)[0].(map[string]any)["name"] = v }},
	{"costs[0].method", func(m map[string]any, v string) { m["costs"].([]any)[0].(map[string]any)["method"] = v }},
	{"costs[0].path_prefix", func(m map[string]any, v string) { m["costs"].([]any)[0].(map[string]any)["path_prefix"] = v }},
	{"on_store_error", func(m map[string]any, v string) { m["on_store_error"] = v }},
	{"store_timeout", func(m map[string]any, v string) { m["store_timeout"] = v }},
	{"check_token", func(m map[string]any, v string) { m["check_token"] = v }},
	{"cors_origins[0]", func(m map[string]any, v string) { m["cors_origins"] = []any{v} }},
}

// fuzzLimit returns the first limit of the plan free of fuzzBase.
func fuzzLimit(m map[string]any) map[string]any {
	return m["plans"].(map[string]any)["free"].(map[string]any)["limits"].([]any)[0].(map[string]any)
}

// fuzzBase returns a valid configuration that sets every field
// fuzzFields names, as a tree to marshal.
func fuzzBase() map[string]any {
	return map[string]any{
		"plans": map[string]any{"free": map[string]any{
			"limits": []any{map[string]any{"name": "minute", "limit": 60, "window": "1m", "scope": "shared"}},
		}},
		"default_plan":   "free",
		"identity":       map[string]any{"headers": []any{"X-API-Key"}, "trusted_proxies": []any{"10.0.0.0/8"}, "unlisted_keys": "key"},
		"ip_limits":      []any{map[string]any{"name": "ip", "limit": 50, "window": "1s"}},
		"costs":          []any{map[string]any{"method": "POST", "path_prefix": "/v1/search", "cost": 5}},
		"on_store_error": "allow",
		"store_timeout":  "50ms",
		"check_token":    "tok-0123456789abc",
		"cors_origins":   []any{"https://app.example.com"},
	}
}

// FuzzFieldValue: any string in any one string field of a valid
// configuration is either accepted, and then within the README's bounds
// (fuzzBounds), or refused by an error that names exactly that field.
func FuzzFieldValue(f *testing.F) {
	for i, v := range []string{"minute", "90s", "local", "https://example.com/up", "free", "Authorization", "::ffff:10.0.0.0/104",
		"ip", "ip", "GET", "/v1/", "deny", "1s", "t0k-0123456789abc", "http://[::1]:8080"} {
		f.Add(uint8(i), v)
	}
	f.Add(uint8(3), "https://:443/x")
	f.Add(uint8(14), "https://xn--bcher-kva.example")
	f.Add(uint8(14), "https://:8443")
	f.Fuzz(func(t *testing.T, field uint8, v string) {
		fd := fuzzFields[int(field)%len(fuzzFields)]
		m := fuzzBase()
		fd.set(m, v)
		fuzzOneField(t, m, fd.path, strconv.Quote(v))
	})
}

// fuzzOneField parses m, whose field path was set to shown, and expects
// it either accepted within the README's bounds or refused by an error
// naming exactly path.
func fuzzOneField(t *testing.T, m map[string]any, path, shown string) {
	t.Helper()
	doc, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse(doc)
	if err != nil {
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != path && !ipNameClash(err, fe, path) {
			t.Fatalf("%s = %s: %v, want an error naming %s", path, shown, err, path)
		}
		return
	}
	if why := fuzzBounds(c); why != "" {
		t.Fatalf("%s = %s accepted: %s", path, shown, why)
	}
}

// ipNameClash reports whether err is the one error about path that names
// another field: a name ip_limits[0] shares with the plan's limit, which
// Validate reports at the plan's limit ("also ip_limits[0]").
func ipNameClash(err error, fe *FieldError, path string) bool {
	return path == "ip_limits[0].name" && fe.Field == "plans.free.limits[0].name" && errors.Is(err, ErrDuplicate) &&
		strings.Contains(err.Error(), "also ip_limits[0],")
}

// TestUpgradeURLWhiteSpace: an upgrade_url with a space in it (after the
// URL, pasted with it; a no-break space from a web page; a space in its
// path or query) is refused, naming the field: url.Parse takes a space in
// a path or a query, and every 429 of the plan carried the link with it.
func TestUpgradeURLWhiteSpace(t *testing.T) {
	for _, u := range []string{"https://example.com/upgrade ", "https://example.com/upgrade\u00a0", "https://example.com/up grade", "https://example.com/upgrade?plan=pro team"} {
		doc, _ := json.Marshal(map[string]any{"plans": map[string]any{"free": map[string]any{"limits": []any{map[string]any{"name": "m", "limit": 5, "window": "1m"}}, "upgrade_url": u}}})
		_, err := Parse(doc)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != "plans.free.upgrade_url" || fe.Value != strconv.Quote(u) || !strings.Contains(err.Error(), "without spaces") {
			t.Errorf("%q: %v, want an error naming plans.free.upgrade_url", u, err)
		}
	}
	if _, err := Parse([]byte(`{"plans": {"free": {"limits": [{"name": "m", "limit": 5, "window": "1m"}], "upgrade_url": "https://example.com/up%20grade"}}}`)); err != nil {
		t.Errorf("an encoded space: %v", err)
	}
}

// TestURLWithoutHostRefused: an upgrade_url or a cors_origins entry with a
// port but no host name (what "https://${HOST}:8443/upgrade" becomes with
// HOST unset) is refused, naming the field: Go's url package gives it the
// host ":8443", so it was taken, and every 429 of the plan carried a link
// to nowhere, or an origin no browser sends was listed.
func TestURLWithoutHostRefused(t *testing.T) {
	for _, tt := range []struct{ doc, field string }{
		{`{"plans": {"free": {"limits": [{"name": "m", "limit": 5, "window": "1m"}], "upgrade_url": "https://:8443/upgrade"}}}`, "plans.free.upgrade_url"},
		{`{"plans": {"free": {"limits": [{"name": "m", "limit": 5, "window": "1m"}], "upgrade_url": "http://:80"}}}`, "plans.free.upgrade_url"},
		{`{"plans": {"free": {"limits": [{"name": "m", "limit": 5, "window": "1m"}], "upgrade_url": "https://user@:8443/"}}}`, "plans.free.upgrade_url"},
		{`{"cors_origins": ["https://:8443"]}`, "cors_origins[0]"},
		{`{"cors_origins": ["*", "http://:3000"]}`, "cors_origins[1]"},
	} {
		_, err := Parse([]byte(tt.doc))
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tt.field || !errors.Is(err, ErrValue) {
			t.Errorf("%s: %v, want an error naming %s", tt.doc, err, tt.field)
		}
	}
}

// FuzzNumberValue: any JSON number in any one integer field of a valid
// configuration is either accepted, and then within the README's bounds,
// or refused by an error that names exactly that field. One beyond 2^53
// (beyond every field's range) is refused with the field's range, never
// int64's, and shown as written.
func FuzzNumberValue(f *testing.F) {
	for i, n := range []string{"60", "1e2", "5.0", "-0", "999999999999999", "1E15", "9223372036854775808", "0.5e1", "128", "1e-2", "48", "47", "-1e30", "1e400"} {
		f.Add(uint8(i), n)
	}
	fields := []struct {
		path string
		set  func(m map[string]any, n json.Number)
	}{
		{"plans.free.limits[0].limit", func(m map[string]any, n json.Number) { fuzzLimit(m)["limit"] = n }},
		{"ip_limits[0].limit", func(m map[string]any, n json.Number) { m["ip_limits"].([]any)[0].(map[string]any)["limit"] = n }},
		{"costs[0].cost", func(m map[string]any, n json.Number) { m["costs"].([]any)[0].(map[string]any)["cost"] = n }},
		{"identity.ipv6_prefix", func(m map[string]any, n json.Number) { m["identity"].(map[string]any)["ipv6_prefix"] = n }},
	}
	f.Fuzz(func(t *testing.T, field uint8, n string) {
		if v, err := jsonv.Parse([]byte(n)); err != nil || jsonv.TypeName(v) != "number" || strings.TrimSpace(n) != n {
			return
		}
		fd := fields[int(field)%len(fields)]
		m := fuzzBase()
		// A cost of 1, so that no limit the field may hold leaves the
		// cost above it (an error about the cost, rightly).
		m["costs"].([]any)[0].(map[string]any)["cost"] = 1
		fd.set(m, json.Number(n))
		fuzzOneField(t, m, fd.path, n)
		if f, _ := strconv.ParseFloat(n, 64); math.Abs(f) >= 1<<53 {
			doc, _ := json.Marshal(m)
			_, err := Parse(doc)
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Value != n || !errors.Is(err, ErrRange) && !errors.Is(err, ErrCost) || strings.Contains(fe.Err.Error(), "9223372036854775807") {
				t.Fatalf("%s = %s: %v, want the field's range, the value as written", fd.path, n, err)
			}
		}
	})
}
