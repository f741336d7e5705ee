package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slidegate/slidegate/internal/jsonv"
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
		{"oversized", `{"key": "` + strings.Repeat("a", MaxCheckBody) + `"}`, "(body)", "(body): larger than 73728 bytes"},
		{"key twice", `{"key": "a", "key": "b"}`, "key", "key: appears more than once"},
		{"key twice, once escaped", `{"key": "a", "k\u0065y": "b"}`, "key", "key: appears more than once"},
		{"key twice, first invalid", `{"key": 5, "key": "b"}`, "key", "key: appears more than once"},
		{"key twice, first an object", `{"key": {"key": 1, "key": 2}, "cost": 1, "key": "b"}`, "key", "key: holds a member given more than once"},
		{"cost twice", `{"key": "a", "cost": 1, "cost": 1}`, "cost", "cost: appears more than once"},
		{"plan twice", `{"plan": "pro", "key": "a", "plan": "free"}`, "plan", "plan: appears more than once"},
		{"cost beyond int64", `{"key": "a", "cost": 9223372036854775808}`, "cost", "cost: 9223372036854775808: must be at most 999999999999999, the largest limit a plan can have"},
		{"cost beyond float64", `{"key": "a", "cost": 1e400}`, "cost", "cost: 1e400: must be at most 999999999999999, the largest limit a plan can have"},
		{"cost 2^53 as a float", `{"key": "a", "cost": 9007199254740992.0}`, "cost", "cost: 9007199254740992.0: must be at most 999999999999999, the largest limit a plan can have"},
		{"cost at int64 max", `{"key": "a", "cost": 9223372036854775807}`, "cost", `cost: 9223372036854775807: must be at most 3, the smallest limit of plan "free"`},
		{"cost below int64", `{"key": "a", "cost": -9223372036854775809}`, "cost", "cost: -9223372036854775809: must not be negative"},
		{"cost at int64 min", `{"key": "a", "cost": -9223372036854775808}`, "cost", "cost: -9223372036854775808: must not be negative"},
		{"cost tiny fraction", `{"key": "a", "cost": 1e-400}`, "cost", "cost: must be an integer, got JSON number 1e-400"},
		{"cost fraction", `{"key": "a", "cost": 2.5e0}`, "cost", "cost: must be an integer, got JSON number 2.5e0"},
		{"cost boolean", `{"key": "a", "cost": true}`, "cost", "cost: must be an integer, got JSON boolean"},
		{"plan not a string", `{"key": "a", "plan": 1}`, "plan", "plan: must be a string, got JSON number"},
		{"plan in another case", `{"key": "a", "plan": "Pro"}`, "plan", `plan: "Pro": no such plan`},
		{"field in another case", `{"Key": "a"}`, "Key", "Key: unknown field (known: key, plan, cost)"},
		{"byte order mark, then garbage", "\ufeffkey=a", "(body)", "(body): invalid JSON at byte 4: invalid character 'k' looking for beginning of value"},
		{"two byte order marks", "\ufeff\ufeff{}", "(body)", "(body): invalid JSON at byte 4: invalid character 'ï' looking for beginning of value"},
		{"only a byte order mark", "\ufeff", "(body)", `(body): is empty: send {"key": "..."}`},
		{"invalid UTF-8", "{\"key\": \"\xff\"}", "(body)", "(body): invalid JSON: invalid UTF-8"},
		{"trailing comma", `{"key": "a",}`, "(body)", "(body): invalid JSON at byte 13: invalid character '}' looking for beginning of object key string"},
		{"error on the last byte", `{"key": "a"]`, "(body)", "(body): invalid JSON at byte 12: invalid character ']' after object key:value pair"},
		{"null", `null`, "(body)", "(body): must be a JSON object"},
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
	cfg := testConfig(t, func(m map[string]any) { m["check_token"] = "s3cret-token-0123" })
	f := newFixture(t, cfg, nil)
	tests := []struct {
		name   string
		auth   string
		status int
	}{
		{"none", "", 401},
		{"wrong", "Bearer nope", 401},
		{"wrong scheme", "Basic s3cret-token-0123", 401},
		{"no scheme", "s3cret-token-0123", 401},
		{"prefix of the token", "Bearer s3cret", 401},
		{"token in another case", "Bearer S3CRET-TOKEN", 401},
		{"token and more", "Bearer s3cret-token-0123 extra", 401},
		{"token and a comma", "Bearer s3cret-token-0123,", 401},
		{"tab after the scheme", "Bearer\ts3cret-token-0123", 401},
		{"scheme alone", "Bearer", 401},
		{"scheme and a space", "Bearer ", 401},
		{"right", "Bearer s3cret-token-0123", 200},
		{"scheme case-insensitive", "bearer s3cret-token-0123", 200},
		{"scheme upper case", "BEARER s3cret-token-0123", 200},
		{"two spaces (1*SP)", "Bearer  s3cret-token-0123", 200},
		{"trailing space", "Bearer s3cret-token-0123 ", 200},
		{"wrong line first", "Bearer nope\nBearer s3cret-token-0123", 401},
		{"right line first", "Bearer s3cret-token-0123\nBearer nope", 401},
		{"right line twice", "Bearer s3cret-token-0123\nBearer s3cret-token-0123", 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, CheckPath, strings.NewReader(`{"key":"a"}`))
			if tt.auth != "" {
				for _, line := range strings.Split(tt.auth, "\n") {
					r.Header.Add("Authorization", line)
				}
			}
			w := httptest.NewRecorder()
			f.h.ServeHTTP(w, r)
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
			wantHeader(t, w, "Retry-After", "1")
		}
	}
}

func FuzzDecodeCheck(f *testing.F) {
	for _, s := range []string{``, `{}`, `{"key":"a"}`, `{"key":"a","plan":"pro","cost":3}`, `{"key":"a","cost":-1}`, `{"key":1}`, `[1]`, `{"x":1}`, `{"key":"a"}{}`,
		`{"key":"a","key":"b"}`, `{"key":"a","k\u0065y":"b"}`, `{"key":{"key":1},"cost":1}`, "\ufeff{\"key\":\"a\"}", `{"key":"a","cost":1e400}`, `{"key":"a","cost":9223372036854775808}`,
		`{"key":" a\t"}`, `{"key":"AWS4-HMAC-SHA256 Credential=x"}`, `{"key":"Digest username=\"u\""}`} {
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
		// The body bounds the key's length; what is accepted is a key
		// the pre-filter counts: trimmed, and no credential of one request.
		if req.Key == "" || req.Key != trimKey(req.Key) || signature(req.Key) {
			t.Fatalf("accepted key %.80q, which the pre-filter would not count so", req.Key)
		}
		if req.Cost != nil && *req.Cost < 0 {
			t.Fatalf("accepted cost %d", *req.Cost)
		}
		if len(body) > MaxCheckBody {
			t.Fatalf("accepted %d bytes", len(body))
		}
		if path, ok := jsonv.Repeated(bytes.TrimPrefix(body, []byte("\ufeff"))); ok {
			t.Fatalf("accepted %+v given twice", path)
		}
	})
}

// TestCheckAPIBodyForms: bodies that are one JSON object are read whatever
// is around them that JSON allows: a byte order mark, white space, any
// Content-Type (curl -d sends application/x-www-form-urlencoded).
func TestCheckAPIBodyForms(t *testing.T) {
	tests := []struct {
		name, contentType, body string
	}{
		{"byte order mark", "application/json", "\ufeff{\"key\":\"a\"}"},
		{"trailing newline", "application/json", "{\"key\":\"a\"}\r\n"},
		{"white space around", "application/json", " \t\n{ \"key\" : \"a\" }\n "},
		{"no Content-Type", "", `{"key":"a"}`},
		{"charset", "application/json; charset=utf-8", `{"key":"a"}`},
		{"text/plain", "text/plain", `{"key":"a"}`},
		{"curl -d", "application/x-www-form-urlencoded", `{"key":"a"}`},
		{"cost 1.0", "application/json", `{"key":"a","cost":1.0}`},
		{"cost 1e0", "application/json", `{"key":"a","cost":1e0}`},
		{"plan and cost null", "application/json", `{"key":"a","plan":null,"cost":null}`},
		{"escaped key", "application/json", `{"key":"\u0061"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, testConfig(t, nil), nil)
			r := httptest.NewRequest(http.MethodPost, CheckPath, strings.NewReader(tt.body))
			if tt.contentType != "" {
				r.Header.Set("Content-Type", tt.contentType)
			}
			w := httptest.NewRecorder()
			f.h.ServeHTTP(w, r)
			if w.Code != http.StatusOK {
				t.Fatalf("status %d: %s", w.Code, w.Body)
			}
			// Counted as the key "a", with cost 1.
			w = f.do(req{method: http.MethodPost, path: CheckPath, body: `{"key":"a","cost":0}`})
			wantHeader(t, w, "X-RateLimit-Remaining", "2")
		})
	}
}

// TestCheckAPIMethods: the check API answers POST only, with a 405 that
// says so, whatever the body and token.
func TestCheckAPIMethods(t *testing.T) {
	f := newFixture(t, testConfig(t, func(m map[string]any) { m["check_token"] = "tok-0123456789abc" }), nil)
	for _, method := range []string{http.MethodGet, http.MethodHead, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions, "CHECK"} {
		t.Run(method, func(t *testing.T) {
			w := f.do(req{method: method, path: CheckPath, body: `{"key":"a"}`, header: map[string]string{"Authorization": "Bearer tok-0123456789abc"}})
			if w.Code != http.StatusMethodNotAllowed {
				t.Errorf("status %d, want 405", w.Code)
			}
			wantHeader(t, w, "Allow", "POST")
			wantHeader(t, w, "Content-Type", "application/problem+json")
			wantHeader(t, w, "RateLimit", "")
		})
	}
	if f.served != 0 {
		t.Errorf("the origin saw %d requests", f.served)
	}
}

// TestCheckAPIChunkedBody: a chunked body (no Content-Length) is bounded
// like any other: MaxCheckBody is read, a byte more is a 400 naming the body, and
// the server neither reads a long one to its end first nor fails.
func TestCheckAPIChunkedBody(t *testing.T) {
	f := newFixture(t, testConfig(t, nil), nil)
	var chunked atomic.Bool
	var read atomic.Int64 // bytes of the body the handler read
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunked.Store(len(r.TransferEncoding) == 1 && r.TransferEncoding[0] == "chunked" && r.ContentLength == -1)
		read.Store(0)
		r.Body = countingBody{r.Body, &read}
		f.h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	const head = `{"key":"a","cost":0}`
	for _, size := range []int{MaxCheckBody, MaxCheckBody + 1, 1 << 20} {
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			body := head + strings.Repeat(" ", size-len(head))
			// A reader without a length: the client sends it chunked.
			r, err := http.NewRequest(http.MethodPost, srv.URL+CheckPath, io.MultiReader(strings.NewReader(body)))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := srv.Client().Do(r)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if !chunked.Load() {
				t.Fatal("the body did not arrive chunked")
			}
			if n := read.Load(); n > MaxCheckBody+1 {
				t.Errorf("the handler read %d bytes of the body, want at most %d", n, MaxCheckBody+1)
			}
			var p problem
			_ = json.NewDecoder(resp.Body).Decode(&p)
			switch {
			case size <= MaxCheckBody && resp.StatusCode != http.StatusOK:
				t.Errorf("status %d, want 200: %+v", resp.StatusCode, p)
			case size > MaxCheckBody && (resp.StatusCode != http.StatusBadRequest || len(p.InvalidParams) != 1 || p.InvalidParams[0].Name != "(body)"):
				t.Errorf("status %d %+v, want a 400 naming (body)", resp.StatusCode, p)
			}
		})
	}
}

// TestCheckHeadersMatchBody: over a run of checks (keys, plans named or
// not, costs 0 to 3, a clock that moves), each answer's rate-limit headers
// say what its JSON says: the deciding rule's limit, remaining and reset,
// every rule's remaining and quota, a t that fits its waits (the JSON has
// no field for it), and Retry-After when denied.
func TestCheckHeadersMatchBody(t *testing.T) {
	for _, mode := range []string{"plain", "shadow", "count_denied"} {
		t.Run(mode, func(t *testing.T) {
			f := newFixture(t, testConfig(t, func(m map[string]any) {
				m["shadow"] = mode == "shadow"
				m["count_denied"] = mode == "count_denied"
			}), nil)
			rng := rand.New(rand.NewPCG(1, 2))
			denied := 0
			for i := range 300 {
				f.clock.t = f.clock.t.Add(time.Duration(rng.IntN(3000)) * time.Millisecond)
				body := fmt.Sprintf(`{"key":%q,"cost":%d`, []string{"a", "b", proKey}[rng.IntN(3)], rng.IntN(4))
				if plan := []string{"", "free", "pro"}[rng.IntN(3)]; plan != "" {
					body += fmt.Sprintf(`,"plan":%q`, plan)
				}
				body += "}"
				w := f.do(req{method: http.MethodPost, path: CheckPath, body: body})
				if w.Code == http.StatusBadRequest { // a cost above the free plan's 3
					continue
				}
				var resp checkResponse
				if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil {
					t.Fatalf("%s: %d %s: %v", body, w.Code, w.Body, err)
				}
				h := w.Header()
				bad := func(what, want string) {
					t.Errorf("#%d %s: %s = %q, want %q from %s", i, body, what, h.Get(what), want, w.Body)
				}
				check := func(name, want string) {
					if h.Get(name) != want {
						bad(name, want)
					}
				}
				check("X-RateLimit-Limit", strconv.FormatInt(resp.Limit, 10))
				check("X-RateLimit-Remaining", strconv.FormatInt(resp.Remaining, 10))
				reset := f.clock.t.Add(time.Duration(resp.ResetAfterMS) * time.Millisecond)
				check("X-RateLimit-Reset", strconv.FormatInt(reset.Add(time.Second-1).Unix(), 10))
				var policy []string
				deciding := 0
				items := strings.Split(h.Get("RateLimit"), ", ")
				if len(items) != len(resp.Rules) {
					bad("RateLimit", fmt.Sprintf("%d items", len(resp.Rules)))
					items = make([]string, len(resp.Rules))
				}
				for j, r := range resp.Rules {
					// t is when more quota is back: 0 with nothing used,
					// never after the whole quota is back, nor after a
					// denying rule admits the retry (draft-10 §6).
					head, tv, _ := strings.Cut(items[j], ";t=")
					sec, err := strconv.ParseInt(tv, 10, 64)
					if head != fmt.Sprintf("%q;r=%d", r.Name, r.Remaining) || err != nil || sec > (r.ResetAfterMS+999)/1000 || (sec == 0) != (r.Remaining == r.Limit) ||
						!r.Allowed && r.RetryAfterMS >= 0 && sec > max((r.RetryAfterMS+999)/1000, 1) {
						t.Errorf("#%d %s: RateLimit item %q does not fit %+v", i, body, items[j], r)
					}
					policy = append(policy, fmt.Sprintf("%q;q=%d;w=%d", r.Name, r.Limit, r.WindowS))
					if r.Name == resp.Policy && r.Limit == resp.Limit && r.Remaining == resp.Remaining && r.ResetAfterMS == resp.ResetAfterMS {
						deciding++
					}
				}
				check("RateLimit-Policy", strings.Join(policy, ", "))
				if deciding != 1 {
					t.Errorf("#%d: policy %q is not one of the rules: %s", i, resp.Policy, w.Body)
				}
				want := ""
				if !resp.Allowed {
					want = strconv.FormatInt(max((resp.RetryAfterMS+999)/1000, 1), 10)
					denied++
				}
				check("Retry-After", want)
				if resp.ShadowDenied {
					denied++
					check(ShadowHeader, "denied")
				}
			}
			if denied == 0 {
				t.Error("no check was denied")
			}
		})
	}
}

// countingBody counts the bytes read from a request body.
type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (c countingBody) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.n.Add(int64(n))
	return n, err
}
