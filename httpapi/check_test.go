package httpapi

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestCheckAPI(t *testing.T) {
	f := newFixture(t, testConfig(t, nil), nil)
	post := func(body string) (int, map[string]any, string) {
		w := f.do(req{method: "POST", path: "/v1/check", body: body})
		var m map[string]any
		if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil {
			t.Fatalf("body %q: %v", w.Body, err)
		}
		return w.Code, m, w.Header().Get("RateLimit")
	}
	code, m, rl := post(`{"key": "` + proKey + `"}`)
	if code != 200 || m["allowed"] != true || m["plan"] != "pro" || m["limit"] != float64(10) || m["remaining"] != float64(9) || m["policy"] != "minute" {
		t.Errorf("key's own plan: %d %v", code, m)
	}
	if rl != `"minute";r=9;t=51` {
		t.Errorf("RateLimit = %q", rl)
	}
	rules, _ := m["rules"].([]any)
	if len(rules) != 1 {
		t.Fatalf("rules = %v", m["rules"])
	}
	wantRule := `{"allowed":true,"limit":10,"name":"minute","remaining":9,"reset_after_ms":50001,"retry_after_ms":0,"window_s":60}`
	if got := mustJSON(t, rules[0]); got != wantRule {
		t.Errorf("rule = %s, want %s", got, wantRule)
	}
	// The caller may name the plan; the key's count is shared across plans
	// (a rule of the same name is the same counter).
	code, m, _ = post(`{"key": "` + proKey + `", "plan": "free", "cost": 2}`)
	if code != 200 || m["allowed"] != true || m["plan"] != "free" || m["remaining"] != float64(0) {
		t.Errorf("plan override: %d %v", code, m)
	}
	code, m, _ = post(`{"key": "` + proKey + `", "plan": "free"}`)
	if code != 200 || m["allowed"] != false || m["retry_after_ms"] != float64(50001) || m["policy"] != "minute" {
		t.Errorf("denied: %d %v", code, m)
	}
	// Unlisted key: default plan. Cost 0 reads without counting.
	for range 2 {
		code, m, _ = post(`{"key": "other", "cost": 0}`)
		if code != 200 || m["plan"] != "free" || m["remaining"] != float64(3) {
			t.Errorf("cost 0: %d %v", code, m)
		}
	}
	if f.served != 0 {
		t.Errorf("the check API reached the origin")
	}
}

func TestCheckAPIHeadersOnDenial(t *testing.T) {
	f := newFixture(t, testConfig(t, nil), nil)
	for range 3 {
		f.do(req{method: "POST", path: "/v1/check", body: `{"key":"a"}`})
	}
	w := f.do(req{method: "POST", path: "/v1/check", body: `{"key":"a"}`})
	if w.Code != 200 {
		t.Fatalf("status %d", w.Code)
	}
	wantHeader(t, w, "RateLimit-Policy", `"minute";q=3;w=60, "day";q=100;w=86400`)
	wantHeader(t, w, "Retry-After", "51")
	wantHeader(t, w, "X-RateLimit-Remaining", "0")
	if !strings.Contains(f.logs.String(), `"msg":"denied"`) {
		t.Errorf("denial not logged")
	}
}

func TestCheckAPIErrors(t *testing.T) {
	f := newFixture(t, testConfig(t, nil), nil)
	tests := []struct {
		name, body string
		field      string
		detail     string
	}{
		{"empty body", ``, "(body)", `(body): is empty: send {"key": "..."}`},
		{"not JSON", `key=abc`, "(body)", "(body): invalid JSON at byte 1: invalid character 'k' looking for beginning of value"},
		{"array", `[]`, "(body)", "(body): must be a JSON object"},
		{"truncated", `{"key": "a"`, "(body)", "(body): ends in the middle of the JSON"},
		{"trailing", `{"key": "a"} {}`, "(body)", "(body): must hold one JSON object and nothing after it"},
		{"unknown field", `{"key": "a", "plna": "pro"}`, "plna", "plna: unknown field (known: key, plan, cost)"},
		{"key missing", `{"cost": 1}`, "key", "key: is required"},
		{"key not a string", `{"key": 5}`, "key", "key: must be a string, got JSON number"},
		{"cost not a number", `{"key": "a", "cost": "1"}`, "cost", "cost: must be an integer, got JSON string"},
		{"cost fractional", `{"key": "a", "cost": 1.5}`, "cost", "cost: must be an integer, got JSON number 1.5"},
		{"cost negative", `{"key": "a", "cost": -1}`, "cost", "cost: -1: must not be negative"},
		{"cost above limit", `{"key": "a", "cost": 4}`, "cost", `cost: 4: must be at most 3, the smallest limit of plan "free"`},
		{"cost within pro", `{"key": "a", "plan": "pro", "cost": 11}`, "cost", `cost: 11: must be at most 10, the smallest limit of plan "pro"`},
		{"unknown plan", `{"key": "a", "plan": "gold"}`, "plan", `plan: "gold": no such plan`},
		{"oversized", `{"key": "` + strings.Repeat("a", MaxCheckBody) + `"}`, "(body)", "(body): larger than 4096 bytes"},
		{"key too long", `{"key": "` + strings.Repeat("a", 2000) + `"}`, "key", "key: longer than 1024 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := f.do(req{method: "POST", path: "/v1/check", body: tt.body})
			if w.Code != 400 {
				t.Fatalf("status %d, want 400: %s", w.Code, w.Body)
			}
			wantHeader(t, w, "Content-Type", "application/problem+json")
			var p problem
			if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
				t.Fatal(err)
			}
			if p.Status != 400 || p.Title != "Bad Request" || p.Type != "about:blank" || p.Detail != tt.detail {
				t.Errorf("problem %+v, want detail %q", p, tt.detail)
			}
			if len(p.InvalidParams) != 1 || p.InvalidParams[0].Name != tt.field {
				t.Errorf("invalid-params %+v, want %q", p.InvalidParams, tt.field)
			}
		})
	}
}

func TestCheckAPIToken(t *testing.T) {
	cfg := testConfig(t, func(m map[string]any) { m["check_token"] = "s3cret-token" })
	f := newFixture(t, cfg, nil)
	tests := []struct {
		name   string
		auth   string
		status int
	}{
		{"none", "", 401},
		{"wrong", "Bearer nope", 401},
		{"wrong scheme", "Basic s3cret-token", 401},
		{"no scheme", "s3cret-token", 401},
		{"prefix of the token", "Bearer s3cret", 401},
		{"right", "Bearer s3cret-token", 200},
		{"scheme case-insensitive", "bearer s3cret-token", 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hd := map[string]string{}
			if tt.auth != "" {
				hd["Authorization"] = tt.auth
			}
			w := f.do(req{method: "POST", path: "/v1/check", body: `{"key":"a"}`, header: hd})
			if w.Code != tt.status {
				t.Errorf("status %d, want %d", w.Code, tt.status)
			}
			if tt.status == 401 {
				wantHeader(t, w, "WWW-Authenticate", `Bearer realm="slidegate"`)
				wantHeader(t, w, "Content-Type", "application/problem+json")
			}
		})
	}
}

func TestCheckAPIShadowAndStoreError(t *testing.T) {
	f := newFixture(t, testConfig(t, func(m map[string]any) { m["shadow"] = true }), nil)
	for range 3 {
		f.do(req{method: "POST", path: "/v1/check", body: `{"key":"a"}`})
	}
	w := f.do(req{method: "POST", path: "/v1/check", body: `{"key":"a"}`})
	if !strings.Contains(w.Body.String(), `"allowed":true`) || !strings.Contains(w.Body.String(), `"shadow_denied":true`) {
		t.Errorf("shadow check = %s", w.Body)
	}
	wantHeader(t, w, "Retry-After", "")
	wantHeader(t, w, ShadowHeader, "denied")

	for _, mode := range []string{"allow", "deny"} {
		f := newFixture(t, testConfig(t, func(m map[string]any) { m["on_store_error"] = mode }), func(o *Options) { o.Store = &failStore{} })
		w := f.do(req{method: "POST", path: "/v1/check", body: `{"key":"a"}`})
		switch mode {
		case "allow":
			if w.Code != 200 || !strings.Contains(w.Body.String(), `"store_error":true`) || !strings.Contains(w.Body.String(), `"allowed":true`) {
				t.Errorf("allow: %d %s", w.Code, w.Body)
			}
			wantHeader(t, w, StoreHeader, StoreErrorAllowed)
		case "deny":
			if w.Code != 503 {
				t.Errorf("deny: %d %s", w.Code, w.Body)
			}
			wantHeader(t, w, StoreHeader, StoreErrorDenied)
		}
	}
}

func FuzzDecodeCheck(f *testing.F) {
	for _, s := range []string{``, `{}`, `{"key":"a"}`, `{"key":"a","plan":"pro","cost":3}`, `{"key":"a","cost":-1}`, `{"key":1}`, `[1]`, `{"x":1}`, `{"key":"a"}{}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, ferr := decodeCheck(bytes.NewReader(body))
		if ferr != nil {
			if ferr.field == "" || ferr.reason == "" {
				t.Fatalf("error without a field or reason: %+v", ferr)
			}
			return
		}
		if req.Key == "" || len(req.Key) > maxKeyLen {
			t.Fatalf("accepted key of %d bytes", len(req.Key))
		}
		if req.Cost != nil && *req.Cost < 0 {
			t.Fatalf("accepted cost %d", *req.Cost)
		}
		if len(body) > MaxCheckBody {
			t.Fatalf("accepted %d bytes", len(body))
		}
	})
}
