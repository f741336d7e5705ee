package httpapi

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestCheckAPIKeyLengthBound: a key is bounded by the body alone (the
// README: "no longer than the body's 72 KiB allow"): the longest one a body
// of MaxCheckBody bytes holds is taken, and one byte more makes the body
// a 400 naming it. A bound of 1 KiB of the key's own refused the bearer
// tokens identity providers issue, which the pre-filter counts
// (TestCheckKeyIsThePreFiltersIdentity).
func TestCheckAPIKeyLengthBound(t *testing.T) {
	longest := MaxCheckBody - len(`{"key": ""}`)
	for _, tc := range []struct {
		name  string
		n     int
		code  int
		field string
	}{
		{"1025 bytes", 1025, http.StatusOK, ""},
		{"the longest the body holds", longest, http.StatusOK, ""},
		{"one byte more", longest + 1, http.StatusBadRequest, "(body)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, testConfig(t, nil), nil)
			w := f.do(req{method: http.MethodPost, path: CheckPath, body: `{"key": "` + strings.Repeat("k", tc.n) + `"}`})
			if w.Code != tc.code {
				t.Fatalf("key of %d bytes: %d %s; want %d", tc.n, w.Code, w.Body, tc.code)
			}
			if tc.field != "" && !strings.Contains(w.Body.String(), `"name":"`+tc.field+`"`) {
				t.Errorf("the 400 does not name %s: %s", tc.field, w.Body)
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

// TestCheckAPIReadIsCostZero holds the README on cost 0: a read fits, so
// it is allowed on a used-up key (remaining 0, no wait, no denial logged)
// unless a count is past its limit (count_denied, or counted under a
// higher limit of the same name), and a request of cost
// n >= 1 is admitted exactly when the read's remaining is at least n.
func TestCheckAPIReadIsCostZero(t *testing.T) {
	for _, countDenied := range []bool{false, true} {
		t.Run(fmt.Sprint("count_denied=", countDenied), func(t *testing.T) {
			f := newFixture(t, testConfig(t, func(m map[string]any) { m["count_denied"] = countDenied }), nil)
			check := func(body string) checkResponse {
				t.Helper()
				w := f.do(req{method: http.MethodPost, path: CheckPath, body: body})
				var resp checkResponse
				if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil || w.Code != http.StatusOK {
					t.Fatalf("%s: %d %s: %v", body, w.Code, w.Body, err)
				}
				return resp
			}
			for range 4 { // the free plan's minute holds 3: the 4th is denied
				check(`{"key":"a"}`)
			}
			f.logs.Reset()
			read := check(`{"key":"a","cost":0}`)
			logged := strings.Contains(f.logs.String(), `"cost":0`)
			if read.Remaining != 0 || read.Allowed == countDenied || logged != countDenied || (read.RetryAfterMS > 0) != countDenied {
				t.Errorf("read of a used-up key: %+v, denial logged %t", read, logged)
			}
			// Counted under a higher limit of the same name and window
			// (pro's minute holds 10), the count is past free's 3 without
			// count_denied too.
			for range 5 {
				check(`{"key":"c","plan":"pro"}`)
			}
			f.logs.Reset()
			read = check(`{"key":"c","plan":"free","cost":0}`)
			if read.Allowed || read.RetryAfterMS <= 0 || !strings.Contains(f.logs.String(), `"cost":0`) {
				t.Errorf("read under free of a key counted 5 under pro: %+v, log %s", read, f.logs)
			}
			rng := rand.New(rand.NewPCG(3, 4))
			seen := map[bool]int{}
			for i := range 60 {
				f.clock.t = f.clock.t.Add(time.Duration(rng.IntN(90000)) * time.Millisecond)
				n := 1 + rng.IntN(3)
				read := check(`{"key":"b","cost":0}`)
				got := check(fmt.Sprintf(`{"key":"b","cost":%d}`, n))
				if got.Allowed != (read.Remaining >= int64(n)) {
					t.Fatalf("#%d: read remaining %d, then cost %d allowed %t", i, read.Remaining, n, got.Allowed)
				}
				seen[got.Allowed]++
			}
			if seen[true] == 0 || seen[false] == 0 {
				t.Errorf("allowed/denied %d/%d: the run did not reach both", seen[true], seen[false])
			}
		})
	}
}
