package config

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestRangeBounds: the documented ranges include their ends. Each value
// at a bound parses; one step past it is an error naming the field.
func TestRangeBounds(t *testing.T) {
	name64, name65 := strings.Repeat("n", 64), strings.Repeat("n", 65)
	for _, tc := range []struct {
		name  string
		doc   string
		field string // "" means valid
		kind  error
	}{
		{"ipv6_prefix 128", `{"identity": {"ipv6_prefix": 128}}`, "", nil},
		{"ipv6_prefix 129", `{"identity": {"ipv6_prefix": 129}}`, "identity.ipv6_prefix", ErrRange},
		// ipv6_prefix: a prefix shorter than a site's /48 counts many
		// sites as one client.
		{"ipv6_prefix 48", `{"identity": {"ipv6_prefix": 48}}`, "", nil},
		{"ipv6_prefix 47", `{"identity": {"ipv6_prefix": 47}}`, "identity.ipv6_prefix", ErrRange},
		{"ipv6_prefix 8", `{"identity": {"ipv6_prefix": 8}}`, "identity.ipv6_prefix", ErrRange},
		{"ipv6_prefix 1", `{"identity": {"ipv6_prefix": 1}}`, "identity.ipv6_prefix", ErrRange},
		// 2^32+64: 64 where an int has 32 bits (GOARCH=386), if cut.
		{"ipv6_prefix 4294967360", `{"identity": {"ipv6_prefix": 4294967360}}`, "identity.ipv6_prefix", ErrRange},
		{"limit name of 64 characters", `{"ip_limits": [{"name": "` + name64 + `", "limit": 5, "window": "1s"}]}`, "", nil},
		{"limit name of 65 characters", `{"ip_limits": [{"name": "` + name65 + `", "limit": 5, "window": "1s"}]}`, "ip_limits[0].name", ErrName},
		{"plan name of 64 characters", `{"default_plan": "` + name64 + `", "plans": {"` + name64 + `": {"limits": [{"name": "m", "limit": 5, "window": "1m"}]}}}`, "", nil},
		// store_timeout: a typo of "50ms" ("50ns", "50m") is refused,
		// not taken for every remote call failing, or for a hung store
		// holding requests for 50 minutes with on_store_error unheard.
		{"store_timeout 1ms", `{"store_timeout": "1ms"}`, "", nil},
		{"store_timeout 999µs", `{"store_timeout": "999µs"}`, "store_timeout", ErrRange},
		{"store_timeout 50ns", `{"store_timeout": "50ns"}`, "store_timeout", ErrRange},
		{"store_timeout 30s", `{"store_timeout": "30s"}`, "", nil},
		{"store_timeout 30.001s", `{"store_timeout": "30.001s"}`, "store_timeout", ErrRange},
		{"store_timeout 50m", `{"store_timeout": "50m"}`, "store_timeout", ErrRange},
		// check_token: a placeholder left in ("changeme") is refused.
		{"check_token empty", `{"check_token": ""}`, "", nil},
		{"check_token of 16 characters", `{"check_token": "` + strings.Repeat("t", 16) + `"}`, "", nil},
		{"check_token of 15 characters", `{"check_token": "` + strings.Repeat("t", 15) + `"}`, "check_token", ErrValue},
		{"check_token changeme", `{"check_token": "changeme"}`, "check_token", ErrValue},
		{"plan name of 65 characters", `{"default_plan": "` + name65 + `", "plans": {"` + name65 + `": {"limits": [{"name": "m", "limit": 5, "window": "1m"}]}}}`, "plans", ErrName},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc))
			if tc.field == "" {
				if err != nil {
					t.Fatalf("Parse: %v; want it valid", err)
				}
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field || !errors.Is(err, tc.kind) {
				t.Fatalf("Parse error %v; want a %v naming %s", err, tc.kind, tc.field)
			}
		})
	}
}

// TestLongestWindowCountsIPLimits: the longest window, which the DynamoDB
// store keeps an identity's item for, includes ip_limits: an ip_limit of a
// week beside plans of a day must keep its counters for the week.
func TestLongestWindowCountsIPLimits(t *testing.T) {
	c, err := Parse([]byte(`{"ip_limits": [{"name": "ip-week", "limit": 5000, "window": "168h"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.LongestWindow(), 168*time.Hour; got != want {
		t.Fatalf("LongestWindow = %s; want %s (the ip_limit's)", got, want)
	}
}

// TestAPIKeyHashIsHex: an api_keys entry must be a lower-case hex SHA-256.
// One of 64 characters with letters past f can never match a key's hash:
// its clients would get the default plan, so it is an error at startup.
func TestAPIKeyHashIsHex(t *testing.T) {
	for _, tc := range []struct {
		name string
		key  string
		ok   bool
	}{
		{"hex", strings.Repeat("0123456789abcdef", 4), true},
		{"a g among hex", "g" + strings.Repeat("0", 63), false},
		{"a z among hex", strings.Repeat("0", 63) + "z", false},
		{"upper-case hex", strings.Repeat("ABCDEF0123456789", 4), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(`{"api_keys": {"` + tc.key + `": "pro"}}`))
			if tc.ok {
				if err != nil {
					t.Fatalf("Parse: %v; want it valid", err)
				}
				return
			}
			if !errors.Is(err, ErrKeyHash) {
				t.Fatalf("Parse error %v; want %v", err, ErrKeyHash)
			}
		})
	}
}

// TestHugeIntegersOutOfFieldRange: a number beyond 2^53 in an integer
// field, however written (in digits beyond int64, with an exponent, of
// either sign), is refused with the field's own range, as one just past
// it is, and shown as written; the range of int64 said nothing of the
// field's (a limit of 1e20 was "must be an integer between
// -9223372036854775808 and 9223372036854775807", 1e30 "must be written in
// digits"). Every integer field of Config is here: a field whose range
// reached 2^53 would take a huge number as the bound decode keeps it as.
func TestHugeIntegersOutOfFieldRange(t *testing.T) {
	const limitRange = "must be between 1 and 999999999999999"
	const prefixRange = "must be between 48 and 128 (a site is assigned a /48 at most: a shorter prefix counts many sites as one client)"
	fields := []struct {
		path, neg, pos string
		set            func(n string) string
	}{
		{"plans.P.limits[i].limit", limitRange, limitRange, func(n string) string {
			return `{"plans": {"free": {"limits": [{"name": "m", "limit": ` + n + `, "window": "1m"}]}}}`
		}},
		{"identity.ipv6_prefix", prefixRange, prefixRange, func(n string) string {
			return `{"identity": {"ipv6_prefix": ` + n + `}}`
		}},
		{"ip_limits[i].limit", limitRange, limitRange, func(n string) string {
			return `{"ip_limits": [{"name": "ip", "limit": ` + n + `, "window": "1s"}]}`
		}},
		{"costs[i].cost", "must be at least 1", "must be at most 50, the smallest limit that can apply (ip_limits[0])", func(n string) string {
			return `{"ip_limits": [{"name": "ip", "limit": 50, "window": "1s"}], "costs": [{"path_prefix": "/", "cost": ` + n + `}]}`
		}},
	}
	var covered []string
	for _, f := range fields {
		covered = append(covered, f.path)
		at := strings.NewReplacer("P", "free", "[i]", "[0]").Replace(f.path)
		for _, n := range []string{"9007199254740992", "9223372036854775807", "9223372036854775808", "100000000000000000000", "1e30", "1.5e300", "1e400", "9007199254740993.5",
			"-9223372036854775808", "-9223372036854775809", "-1e30", "-1e400"} {
			_, err := Parse([]byte(f.set(n)))
			want := "config: " + at + ": " + n + ": " + f.pos
			if n[0] == '-' {
				want = "config: " + at + ": " + n + ": " + f.neg
			}
			if err == nil || err.Error() != want || !errors.Is(err, ErrRange) && !errors.Is(err, ErrCost) {
				t.Errorf("%s %s: %v\nwant %s", f.path, n, err, want)
			}
		}
	}
	var ints []string
	var walk func(path string, t reflect.Type)
	walk = func(path string, t reflect.Type) {
		switch t.Kind() {
		case reflect.Struct:
			for i := range t.NumField() {
				p := tagName(t.Field(i))
				if path != "" {
					p = path + "." + p
				}
				walk(p, t.Field(i).Type)
			}
		case reflect.Map:
			walk(path+".P", t.Elem())
		case reflect.Slice:
			walk(path+"[i]", t.Elem())
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			ints = append(ints, path)
		}
	}
	walk("", reflect.TypeOf(Config{}))
	if !slices.Equal(ints, covered) {
		t.Errorf("integer fields %v, tested %v", ints, covered)
	}
}
