package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestCheckAPIKeyLengthBound: a key of exactly 1 KiB is accepted (the
// README: "key (required, ≤ 1 KiB)"); one byte more is a 400 naming key.
func TestCheckAPIKeyLengthBound(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    int
		code int
	}{
		{"1024 bytes", maxKeyLen, http.StatusOK},
		{"1025 bytes", maxKeyLen + 1, http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, testConfig(t, nil), nil)
			w := f.do(req{method: http.MethodPost, path: CheckPath, body: `{"key": "` + strings.Repeat("k", tc.n) + `"}`})
			if w.Code != tc.code {
				t.Fatalf("key of %d bytes: %d %s; want %d", tc.n, w.Code, w.Body, tc.code)
			}
			if tc.code == http.StatusBadRequest && !strings.Contains(w.Body.String(), `"name":"key"`) {
				t.Errorf("the 400 does not name key: %s", w.Body)
			}
		})
	}
}

// TestCheckAPIShadowDenialHasNoWait: in shadow mode a denial is answered
// "allowed": true, and like the missing Retry-After header its top-level
// retry_after_ms is 0: a caller that waits when retry_after_ms is positive
// must not wait on a shadow denial. The rule that denied still reports its
// own wait in rules[].
func TestCheckAPIShadowDenialHasNoWait(t *testing.T) {
	f := newFixture(t, testConfig(t, func(m map[string]any) { m["shadow"] = true }), nil)
	for range 3 { // the free plan's minute holds 3
		f.do(req{method: http.MethodPost, path: CheckPath, body: `{"key":"a"}`})
	}
	w := f.do(req{method: http.MethodPost, path: CheckPath, body: `{"key":"a"}`})
	var resp checkResponse
	if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil {
		t.Fatalf("%d %s: %v", w.Code, w.Body, err)
	}
	if !resp.Allowed || !resp.ShadowDenied || resp.RetryAfterMS != 0 {
		t.Fatalf("shadow denial: allowed %t, shadow_denied %t, retry_after_ms %d; want true, true, 0 (%s)",
			resp.Allowed, resp.ShadowDenied, resp.RetryAfterMS, w.Body)
	}
	var waits int
	for _, r := range resp.Rules {
		if !r.Allowed && r.RetryAfterMS > 0 {
			waits++
		}
	}
	if waits == 0 {
		t.Errorf("no rule reports the denial's wait: %s", w.Body)
	}
}

// TestCheckAPICostUpToTheSmallestLimit: a cost equal to the plan's smallest
// limit is accepted (only more is a 400, per the README), and admitted on
// an empty counter; one more is a 400 naming cost.
func TestCheckAPICostUpToTheSmallestLimit(t *testing.T) {
	for _, tc := range []struct {
		name string
		body string
		code int
	}{
		{"free plan, cost 3 of 3", `{"key": "a", "cost": 3}`, http.StatusOK},
		{"free plan, cost 4 of 3", `{"key": "a", "cost": 4}`, http.StatusBadRequest},
		{"pro plan, cost 10 of 10", `{"key": "a", "plan": "pro", "cost": 10}`, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, testConfig(t, nil), nil)
			w := f.do(req{method: http.MethodPost, path: CheckPath, body: tc.body})
			if w.Code != tc.code {
				t.Fatalf("%s: %d %s; want %d", tc.body, w.Code, w.Body, tc.code)
			}
			switch tc.code {
			case http.StatusOK:
				if !strings.Contains(w.Body.String(), `"allowed":true`) || !strings.Contains(w.Body.String(), `"remaining":0`) {
					t.Errorf("%s: %s; want admitted with nothing left", tc.body, w.Body)
				}
			default:
				if !strings.Contains(w.Body.String(), `"name":"cost"`) {
					t.Errorf("the 400 does not name cost: %s", w.Body)
				}
			}
		})
	}
}
