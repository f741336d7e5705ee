package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// nullBase returns a valid configuration that sets every field, with one
// element in every list and one entry in every map, as a tree to edit.
// Without "plans" it is valid too (the default plans have "free" and
// "pro", and no limit named "ip").
func nullBase() map[string]any {
	return map[string]any{
		"plans": map[string]any{
			"free": map[string]any{"limits": []any{map[string]any{"name": "minute", "limit": 60, "window": "1m", "scope": "local"}}, "upgrade_url": "https://example.com/up"},
			"pro":  map[string]any{"limits": []any{map[string]any{"name": "minute", "limit": 600, "window": "1m"}}},
		},
		"default_plan":   "free",
		"api_keys":       map[string]any{strings.Repeat("ab", 32): "pro"},
		"identity":       map[string]any{"headers": []any{"X-API-Key"}, "trusted_proxies": []any{"10.0.0.0/8"}, "ipv6_prefix": 56, "unlisted_keys": "ip"},
		"ip_limits":      []any{map[string]any{"name": "ip", "limit": 50, "window": "1s"}},
		"costs":          []any{map[string]any{"method": "POST", "path_prefix": "/v1/search", "cost": 5}},
		"count_denied":   true,
		"shadow":         true,
		"on_store_error": "deny",
		"store_timeout":  "1s",
		"check_token":    "tok-0123456789abcdef",
		"cors_origins":   []any{"https://app.example.com"},
	}
}

// nullSpot is one value of nullBase: its path as errors name it, how to
// reach it, and whether it is an object's member of a struct type (not a
// plan or an api_keys entry, which are a map's).
type nullSpot struct {
	path   string
	steps  []any // string: an object's member; int: a list's element
	member bool
}

func nullSpots(path string, steps []any, v any, maps bool) []nullSpot {
	var out []nullSpot
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			p := k
			if path != "" {
				p = path + "." + k
			}
			s := append(append([]any(nil), steps...), k)
			out = append(out, nullSpot{p, s, !maps})
			out = append(out, nullSpots(p, s, e, p == "plans" || p == "api_keys")...)
		}
	case []any:
		for i, e := range v {
			p := path + "[" + strconv.Itoa(i) + "]"
			s := append(append([]any(nil), steps...), i)
			out = append(out, nullSpot{p, s, false})
			out = append(out, nullSpots(p, s, e, false)...)
		}
	}
	return out
}

// set replaces the value at steps in m with v; with del, it removes the
// member instead.
func (s nullSpot) set(m map[string]any, v any, del bool) {
	var at any = m
	for i, step := range s.steps {
		last := i == len(s.steps)-1
		switch step := step.(type) {
		case string:
			o := at.(map[string]any)
			if last && del {
				delete(o, step)
			} else if last {
				o[step] = v
			}
			at = o[step]
		case int:
			a := at.([]any)
			if last {
				a[step] = v
			}
			at = a[step]
		}
	}
}

// TestNullRefusedEverywhere: a null anywhere in a configuration (a field
// of any type, at any depth, a plan, an api_keys entry, a list's element)
// is an error naming its path and showing null, never read as the
// field's zero value (the limit 0, the default plans, an open check API,
// the default key headers where [] means none). The error advises leaving
// the field out exactly where leaving it out is valid, and not for a
// field without a default (a limit's name, limit and window, a plan's
// limits, a cost's path_prefix and cost), a plan, an entry or an element.
func TestNullRefusedEverywhere(t *testing.T) {
	spots := nullSpots("", nil, nullBase(), false)
	if len(spots) < 35 {
		t.Fatalf("%d places to put a null, want every field", len(spots))
	}
	doc, _ := json.Marshal(nullBase())
	if _, err := Parse(doc); err != nil {
		t.Fatalf("nullBase: %v", err)
	}
	for _, s := range spots {
		t.Run(s.path, func(t *testing.T) {
			m := nullBase()
			s.set(m, nil, false)
			doc, _ := json.Marshal(m)
			_, err := Parse(doc)
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != s.path || fe.Value != "null" || !errors.Is(err, ErrType) || !strings.Contains(err.Error(), ", not null") {
				t.Fatalf("Parse with %s null: %v; want an error naming %s, value null", s.path, err, s.path)
			}
			left := nullBase()
			s.set(left, nil, true)
			doc, _ = json.Marshal(left)
			_, leftErr := Parse(doc)
			optional := s.member && leftErr == nil
			if got := strings.HasSuffix(err.Error(), "(leave the field out for its default)"); got != optional {
				t.Errorf("%v: advises leaving the field out: %v; want %v (left out: %v)", err, got, optional, leftErr)
			}
		})
	}
}

// TestMarshalledConfigParses: a Config built in code and written with
// encoding/json parses back to the same configuration: its nil maps and
// lists are left out (omitzero), not written as the nulls that Parse
// refuses, and an empty list (headers [], identify by IP only) is still
// written, not taken for the default.
func TestMarshalledConfigParses(t *testing.T) {
	plans := map[string]Plan{"free": {Limits: []Limit{{Name: "minute", Limit: 10, Window: "1m"}}}}
	for _, c := range []*Config{
		{Plans: plans},
		{Plans: plans, Identity: Identity{Headers: []string{}, TrustedProxies: []string{}}, IPLimits: []Limit{}, Costs: []Cost{}, CORSOrigins: []string{}, APIKeys: map[string]string{}},
		{},
	} {
		doc, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Parse(doc)
		if err != nil {
			t.Errorf("Parse(%s): %v", doc, err)
			continue
		}
		// Printed, as WithDefaults copies an empty list as nil (the same
		// list, but for headers, checked below).
		want := c.WithDefaults()
		if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) || !reflect.DeepEqual(got.Identity.Headers, want.Identity.Headers) {
			t.Errorf("Parse(%s) = %+v\nwant %+v", doc, got, want)
		}
	}
}
