package config

import (
	"errors"
	"testing"
)

// TestRepeatedMember: a member given twice in one object is an error
// naming its path (JSON keeps the last, so the first was ignored without a
// word); the same name in different objects, and names or braces inside
// string values, are not.
func TestRepeatedMember(t *testing.T) {
	tests := []struct {
		name, doc, want string
		found           bool
	}{
		{"top level", `{"shadow": true, "count_denied": false, "shadow": false}`, "shadow", true},
		{"written with an escape", `{"shadow": true, "\u0073hadow": false}`, "shadow", true},
		{"plan", `{"plans": {"free": {"limits": []}, "free": {"limits": []}}}`, "plans.free", true},
		{"in an array's object", `{"ip_limits": [{"name": "a"}, {"name": "b", "window": "1s", "name": "c"}]}`, "ip_limits[1].name", true},
		{"hashed api key", `{"api_keys": {"7b340101426eaa6810ee547503b923bfd895a40cd62b1e52686bf8ffaa8d6e36": "pro", "7b340101426eaa6810ee547503b923bfd895a40cd62b1e52686bf8ffaa8d6e36": "free"}}`,
			"api_keys.7b340101426eaa6810ee547503b923bfd895a40cd62b1e52686bf8ffaa8d6e36", true},
		{"after nested arrays", `{"identity": {"headers": ["a", "b"], "trusted_proxies": [], "headers": []}}`, "identity.headers", true},
		{"same name in sibling objects", `{"plans": {"free": {"limits": [{"name": "a"}, {"name": "b"}]}, "pro": {"limits": [{"name": "a"}]}}}`, "", false},
		{"same name at two depths", `{"identity": {"identity": 1, "headers": []}, "headers": 2}`, "", false},
		{"names inside strings", `{"check_token": "\"shadow\": {,[", "shadow": true, "cors_origins": ["}", "\\", "shadow"]}`, "", false},
		{"empty name twice", `{"": 1, "": 2}`, `""`, true},
		{"invisible name", "{\"identity\": {\"a\u200b\": 1, \"a\u200b\": 2}}", `identity."a\u200b"`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := repeatedMember([]byte(tt.doc))
			if ok != tt.found || got != tt.want {
				t.Errorf("repeatedMember(%s) = %q, %v; want %q, %v", tt.doc, got, ok, tt.want, tt.found)
			}
		})
	}
}

// TestParseRepeatedMember: Parse refuses a repeated member before it
// judges the values, with ErrDuplicate and no value shown.
func TestParseRepeatedMember(t *testing.T) {
	_, err := Parse([]byte(`{"check_token": "first-secret", "check_token": "second-secret"}`))
	var fe *FieldError
	if !errors.As(err, &fe) || !errors.Is(err, ErrDuplicate) {
		t.Fatalf("Parse error %v, want a *FieldError matching ErrDuplicate", err)
	}
	if got, want := fe.Field, "check_token"; got != want || fe.Value != "" {
		t.Errorf("field %q value %q, want %q and no value", got, fe.Value, want)
	}
}
