package config

import (
	"errors"
	"strings"
	"testing"
)

// TestEveryFieldErrorNamesFieldAndValue: for each field, a value of the
// wrong type, out of range, empty, or not one of its words is an error
// that names the field's path and shows the value as written (but for
// check_token and api_keys, whose values may be secrets, shown by type).
func TestEveryFieldErrorNamesFieldAndValue(t *testing.T) {
	const limit = `{"name": "m", "limit": 5, "window": "1m"}`
	plan := func(limits string) string { return `{"plans": {"free": {"limits": [` + limits + `]}}}` }
	lim := func(field, value string) string {
		return plan(strings.Replace(limit, `"`+field+`": `+map[string]string{"name": `"m"`, "limit": "5", "window": `"1m"`}[field], `"`+field+`": `+value, 1))
	}
	for _, tc := range []struct {
		name, doc, field, value string
		kind                    error
	}{
		{"plans wrong type", `{"plans": []}`, "plans", "array", ErrType},
		{"plans empty", `{"plans": {}}`, "plans", "{}", ErrEmpty},
		{"plan wrong type", `{"plans": {"free": 1}}`, "plans.free", "1", ErrType},
		{"plan name", `{"plans": {"fr ee": {"limits": [` + limit + `]}}, "default_plan": "fr ee"}`, "plans", `"fr ee"`, ErrName},
		{"limits wrong type", `{"plans": {"free": {"limits": {}}}}`, "plans.free.limits", "object", ErrType},
		{"limits empty", plan(""), "plans.free.limits", "[]", ErrEmpty},
		{"limit wrong type", plan(`"m"`), "plans.free.limits[0]", `"m"`, ErrType},
		{"name wrong type", lim("name", "5"), "plans.free.limits[0].name", "5", ErrType},
		{"name empty", lim("name", `""`), "plans.free.limits[0].name", `""`, ErrName},
		{"name character", lim("name", `"a/b"`), "plans.free.limits[0].name", `"a/b"`, ErrName},
		{"limit wrong type", lim("limit", `"5"`), "plans.free.limits[0].limit", `"5"`, ErrType},
		{"limit zero", lim("limit", "0"), "plans.free.limits[0].limit", "0", ErrRange},
		{"limit negative", lim("limit", "-5"), "plans.free.limits[0].limit", "-5", ErrRange},
		{"limit too large", lim("limit", "1000000000000000"), "plans.free.limits[0].limit", "1000000000000000", ErrRange},
		{"limit fraction", lim("limit", "5.5"), "plans.free.limits[0].limit", "5.5", ErrType},
		{"limit null", lim("limit", "null"), "plans.free.limits[0].limit", "null", ErrType},
		{"limit beyond int64", lim("limit", "1e20"), "plans.free.limits[0].limit", "1e20", ErrRange},
		{"window wrong type", lim("window", "60"), "plans.free.limits[0].window", "60", ErrType},
		{"window empty", lim("window", `""`), "plans.free.limits[0].window", `""`, ErrDuration},
		{"window in days", lim("window", `"1d"`), "plans.free.limits[0].window", `"1d"`, ErrDuration},
		{"window fraction of a second", lim("window", `"1.5s"`), "plans.free.limits[0].window", `"1.5s"`, ErrRange},
		{"window below a second", lim("window", `"500ms"`), "plans.free.limits[0].window", `"500ms"`, ErrRange},
		{"window negative", lim("window", `"-1m"`), "plans.free.limits[0].window", `"-1m"`, ErrRange},
		{"window too long", lim("window", `"8785h"`), "plans.free.limits[0].window", `"8785h"`, ErrRange},
		{"scope word", plan(`{"name": "m", "limit": 5, "window": "1m", "scope": "Local"}`), "plans.free.limits[0].scope", `"Local"`, ErrValue},
		{"scope wrong type", plan(`{"name": "m", "limit": 5, "window": "1m", "scope": true}`), "plans.free.limits[0].scope", "true", ErrType},
		{"upgrade_url relative", `{"plans": {"free": {"limits": [` + limit + `], "upgrade_url": "/upgrade"}}}`, "plans.free.upgrade_url", `"/upgrade"`, ErrValue},
		{"upgrade_url wrong type", `{"plans": {"free": {"limits": [` + limit + `], "upgrade_url": 1}}}`, "plans.free.upgrade_url", "1", ErrType},
		{"default_plan wrong type", `{"default_plan": 1}`, "default_plan", "1", ErrType},
		{"default_plan other case", `{"default_plan": "Free"}`, "default_plan", `"Free"`, ErrNoPlan},
		{"default_plan missing plan", plan(limit)[:len(plan(limit))-1] + `, "default_plan": "gold"}`, "default_plan", `"gold"`, ErrNoPlan},
		{"default free, no plan free", `{"plans": {"basic": {"limits": [` + limit + `]}}}`, "default_plan", `"free"`, ErrNoPlan},
		{"api_keys unknown plan", `{"api_keys": {"` + strings.Repeat("a", 64) + `": "gold"}}`, "api_keys." + strings.Repeat("a", 64), `"gold"`, ErrNoPlan},
		{"identity wrong type", `{"identity": "ip"}`, "identity", `"ip"`, ErrType},
		{"headers wrong type", `{"identity": {"headers": "X-API-Key"}}`, "identity.headers", `"X-API-Key"`, ErrType},
		{"header empty", `{"identity": {"headers": [""]}}`, "identity.headers[0]", `""`, ErrValue},
		{"header with a colon", `{"identity": {"headers": ["X-API-Key:"]}}`, "identity.headers[0]", `"X-API-Key:"`, ErrValue},
		{"trusted proxy empty", `{"identity": {"trusted_proxies": [""]}}`, "identity.trusted_proxies[0]", `""`, ErrValue},
		{"trusted proxy host name", `{"identity": {"trusted_proxies": ["proxy.local"]}}`, "identity.trusted_proxies[0]", `"proxy.local"`, ErrValue},
		{"trusted proxy wrong type", `{"identity": {"trusted_proxies": [10]}}`, "identity.trusted_proxies[0]", "10", ErrType},
		{"ipv6_prefix wrong type", `{"identity": {"ipv6_prefix": "64"}}`, "identity.ipv6_prefix", `"64"`, ErrType},
		{"ipv6_prefix negative", `{"identity": {"ipv6_prefix": -1}}`, "identity.ipv6_prefix", "-1", ErrRange},
		{"ipv6_prefix too large", `{"identity": {"ipv6_prefix": 129}}`, "identity.ipv6_prefix", "129", ErrRange},
		{"ipv6_prefix too short", `{"identity": {"ipv6_prefix": 32}}`, "identity.ipv6_prefix", "32", ErrRange},
		{"unlisted_keys word", `{"identity": {"unlisted_keys": "IP"}}`, "identity.unlisted_keys", `"IP"`, ErrValue},
		{"unlisted_keys wrong type", `{"identity": {"unlisted_keys": false}}`, "identity.unlisted_keys", "false", ErrType},
		{"ip_limits wrong type", `{"ip_limits": {}}`, "ip_limits", "object", ErrType},
		{"ip_limit zero", `{"ip_limits": [{"name": "ip", "limit": 0, "window": "1s"}]}`, "ip_limits[0].limit", "0", ErrRange},
		{"costs wrong type", `{"costs": {}}`, "costs", "object", ErrType},
		{"cost method lower case", `{"costs": [{"method": "post", "path_prefix": "/v1", "cost": 2}]}`, "costs[0].method", `"post"`, ErrValue},
		{"cost method list", `{"costs": [{"method": "GET,POST", "path_prefix": "/v1", "cost": 2}]}`, "costs[0].method", `"GET,POST"`, ErrValue},
		{"cost path relative", `{"costs": [{"path_prefix": "v1/search", "cost": 2}]}`, "costs[0].path_prefix", `"v1/search"`, ErrValue},
		{"cost path empty", `{"costs": [{"path_prefix": "", "cost": 2}]}`, "costs[0].path_prefix", `""`, ErrValue},
		{"cost path encoded", `{"costs": [{"path_prefix": "/v1/a%20b", "cost": 2}]}`, "costs[0].path_prefix", `"/v1/a%20b"`, ErrValue},
		{"cost zero", `{"costs": [{"path_prefix": "/v1", "cost": 0}]}`, "costs[0].cost", "0", ErrRange},
		{"cost wrong type", `{"costs": [{"path_prefix": "/v1", "cost": "2"}]}`, "costs[0].cost", `"2"`, ErrType},
		{"count_denied wrong type", `{"count_denied": "true"}`, "count_denied", `"true"`, ErrType},
		{"shadow wrong type", `{"shadow": 1}`, "shadow", "1", ErrType},
		{"on_store_error word", `{"on_store_error": "Deny"}`, "on_store_error", `"Deny"`, ErrValue},
		{"on_store_error empty is the default", `{"on_store_error": ""}`, "", "", nil},
		{"store_timeout wrong type", `{"store_timeout": 50}`, "store_timeout", "50", ErrType},
		{"store_timeout zero", `{"store_timeout": "0s"}`, "store_timeout", `"0s"`, ErrRange},
		{"store_timeout in days", `{"store_timeout": "1d"}`, "store_timeout", `"1d"`, ErrDuration},
		{"cors_origins wrong type", `{"cors_origins": "*"}`, "cors_origins", `"*"`, ErrType},
		{"cors origin empty", `{"cors_origins": [""]}`, "cors_origins[0]", `""`, ErrValue},
		{"cors origin with a path", `{"cors_origins": ["https://app.example.com/"]}`, "cors_origins[0]", `"https://app.example.com/"`, ErrValue},
		// Secrets: named by type or length, never shown.
		{"check_token wrong type", `{"check_token": 12345}`, "check_token", "a number", ErrType},
		{"check_token null", `{"check_token": null}`, "check_token", "null", ErrType},
		{"check_token with a space", `{"check_token": "s3cret token"}`, "check_token", "", ErrValue},
		// Not the key, which may be a raw one: its plan, to tell the
		// entry among the others.
		{"api_keys entry not a hash", `{"api_keys": {"s3cret": "pro"}}`, `api_keys["<6 characters, not a lower-case hex SHA-256>"]`, `"pro"`, ErrKeyHash},
		{"api_keys plan wrong type", `{"api_keys": {"s3cret": 1}}`, `api_keys["<6 characters, not a lower-case hex SHA-256>"]`, "a number", ErrType},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc))
			if tc.kind == nil {
				if err != nil {
					t.Fatalf("Parse: %v; want it valid", err)
				}
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("Parse error %v (%T), want a *FieldError", err, err)
			}
			if fe.Field != tc.field || fe.Value != tc.value || !errors.Is(err, tc.kind) {
				t.Errorf("Parse error %v: field %s, value %s; want field %s, value %s, %v", err, fe.Field, fe.Value, tc.field, tc.value, tc.kind)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("error %v shows the secret", err)
			}
		})
	}
}
