package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/dunglas/httpsfv"

	"github.com/slidegate/slidegate/config"
)

// fuzzWindows are the windows FuzzRateLimitFields' rules take.
var fuzzWindows = [...]string{"1s", "2s", "7s", "1m", "1h", "24h", "8784h"}

// sfItem is one item of a RateLimit or RateLimit-Policy list: its name and
// its integer parameters.
type sfItem struct {
	name   string
	params map[string]int64
}

// sfItems parses the lines of a list field of rate-limit items, each an
// sf-string with integer parameters; it fails t otherwise.
func sfItems(t *testing.T, field string, lines []string) []sfItem {
	t.Helper()
	list, err := httpsfv.UnmarshalList(lines)
	if err != nil {
		t.Fatalf("%s %q is no structured-field list: %v", field, lines, err)
	}
	var out []sfItem
	for _, m := range list {
		it, ok := m.(httpsfv.Item)
		name, isString := it.Value.(string)
		if !ok || !isString {
			t.Fatalf("%s %q: %#v is no sf-string item", field, lines, m)
		}
		s := sfItem{name: name, params: map[string]int64{}}
		for _, k := range it.Params.Names() {
			v, _ := it.Params.Get(k)
			n, ok := v.(int64)
			if !ok {
				t.Fatalf("%s %q: parameter %s=%v is no integer", field, lines, k, v)
			}
			s.params[k] = n
		}
		out = append(out, s)
	}
	return out
}

// intField parses a field that is one integer; it fails t otherwise.
func intField(t *testing.T, w *httptest.ResponseRecorder, name string) int64 {
	t.Helper()
	vs := w.Header()[name]
	if len(vs) != 1 {
		t.Fatalf("%s: %q, want one line", name, vs)
	}
	n, err := strconv.ParseInt(vs[0], 10, 64)
	if err != nil {
		t.Fatalf("%s: %q is no integer", name, vs[0])
	}
	return n
}

// FuzzRateLimitFields walks a client through requests of costs 1 and the
// smallest limit, with and without a key, at fuzzed steps of time, under
// fuzzed ip_limits and plan limits (of shared and local scope, with and
// without count_denied), and checks every answer's fields as a
// client reads them: RateLimit-Policy and RateLimit parse as
// structured-field lists (RFC 9651) of the configured rules with their
// quota and window, and remaining and reset within them; the X-RateLimit
// trio is one of RateLimit's items, its Reset no earlier than that item's
// t from now; a 429's Retry-After is at least 1 s, no later than the
// trio's Reset, no earlier than the t of a rule with less left than the
// cost (draft-10 §6), and its body's retry_after_ms. And the numbers hold: a request
// at the same instant that costs no more than X-RateLimit-Remaining is
// admitted, so is one that costs no more than the least r of RateLimit
// after an admission or a denial, and a refused request sent again
// Retry-After seconds later is admitted (nothing else arrives in between).
func FuzzRateLimitFields(f *testing.F) {
	f.Add([]byte{0, 2, 9, 5}, []byte{0, 0, 0, 0, 2, 0, 10, 0, 3, 0, 0, 200, 6, 0})
	f.Add([]byte{1, 0, 3}, []byte{2, 0, 2, 0, 2, 1, 0, 255, 0, 0})
	f.Add([]byte{2, 1, 3, 4, 1, 0, 6, 1}, []byte{4, 0, 4, 0, 4, 0, 5, 0, 5, 0, 5, 0, 0, 30, 2, 0})
	f.Add([]byte{0, 5, 0}, []byte{0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{7, 1, 3, 2, 2, 4, 0}, []byte{6, 0, 14, 0, 4, 0, 12, 3, 0, 0, 10, 0, 2, 0})
	f.Add([]byte{0, 4, 3}, []byte{0, 0, 2, 0, 0, 0})
	f.Add([]byte{2, 3, 1}, []byte{0, 0, 0, 0, 0, 0, 8, 0, 8, 1, 0, 0, 8, 0})
	f.Fuzz(func(t *testing.T, rules, ops []byte) {
		// rules: a count of ip_limits (0 or 1), then a limit and a
		// window per rule; the plan gets the rest (1 to 3).
		if len(rules) < 3 || len(ops) > 64 {
			return
		}
		// rules[0]: ip_limits or not, count_denied, local scope for
		// every other rule.
		nIP, countDenied, local := int(rules[0]&1), rules[0]&2 != 0, rules[0]&4 != 0
		var ip, planLimits []any
		minLimit := int64(config.MaxLimit)
		limits := map[string][2]int64{} // name: limit, window in seconds
		for i, j := 0, 1; j+1 < len(rules) && i < 1+nIP+2; i, j = i+1, j+2 {
			lim := int64(1 + rules[j]%12)
			win := fuzzWindows[int(rules[j+1])%len(fuzzWindows)]
			name := "r" + strconv.Itoa(i)
			d, _ := time.ParseDuration(win)
			limits[name] = [2]int64{lim, int64(d / time.Second)}
			minLimit = min(minLimit, lim)
			l := map[string]any{"name": name, "limit": lim, "window": win}
			if local && i%2 == 1 {
				l["scope"] = "local"
			}
			if i < nIP {
				ip = append(ip, l)
			} else {
				planLimits = append(planLimits, l)
			}
		}
		if len(planLimits) == 0 {
			return
		}
		cfg := testConfig(t, func(m map[string]any) {
			m["plans"] = map[string]any{"free": map[string]any{"limits": planLimits}}
			m["api_keys"] = map[string]any{}
			if ip != nil {
				m["ip_limits"] = ip
			}
			m["costs"] = []any{map[string]any{"path_prefix": "/c", "cost": minLimit}}
			m["count_denied"] = countDenied
		})
		fx := newFixture(t, cfg, nil)
		step := time.Second / 4
		type sent struct {
			key  bool
			cost int64
		}
		var last *sent // the previous request, when it was admitted
		var lastRemaining int64
		// room is the least r of the previous answer's RateLimit, for
		// the identity roomKey says: every rule has that much left.
		room, roomKey := int64(-1), false
		do := func(s sent, dt time.Duration) (int, int64) {
			fx.clock.t = fx.clock.t.Add(dt)
			now := fx.clock.t
			r := req{path: "/x"}
			if s.cost > 1 {
				r.path = "/c"
			}
			if s.key {
				r.header = map[string]string{"X-API-Key": "fuzz-key"}
			}
			w := fx.do(r)
			if w.Code != http.StatusOK && w.Code != http.StatusTooManyRequests {
				t.Fatalf("status %d: %s", w.Code, w.Body)
			}
			policy := sfItems(t, "RateLimit-Policy", w.Header()["Ratelimit-Policy"])
			for _, it := range policy {
				l, ok := limits[it.name]
				if !ok || it.params["q"] != l[0] || it.params["w"] != l[1] || len(it.params) != 2 {
					t.Fatalf("RateLimit-Policy item %+v: want q=%d;w=%d of a configured rule", it, l[0], l[1])
				}
			}
			items := sfItems(t, "RateLimit", w.Header()["Ratelimit"])
			if len(items) != len(policy) {
				t.Fatalf("RateLimit %q has %d items, RateLimit-Policy %d", w.Header()["Ratelimit"], len(items), len(policy))
			}
			minR := int64(config.MaxLimit)
			for i, it := range items {
				l := limits[it.name]
				r, rok := it.params["r"]
				tt, tok := it.params["t"]
				if it.name != policy[i].name || !rok || !tok || len(it.params) != 2 || r < 0 || r > l[0] || tt < 0 || tt > 2*l[1] {
					t.Fatalf("RateLimit item %+v against rule %s (limit %d, window %d s)", it, policy[i].name, l[0], l[1])
				}
				minR = min(minR, r)
			}
			room, roomKey = minR, s.key
			lim, rem, reset := intField(t, w, "X-Ratelimit-Limit"), intField(t, w, "X-Ratelimit-Remaining"), intField(t, w, "X-Ratelimit-Reset")
			found := false
			for _, it := range items {
				// t is when more of the rule's quota is back, no later
				// than its whole quota (the trio's Reset), and that within
				// two windows.
				d := reset - now.Unix() - it.params["t"]
				found = found || limits[it.name][0] == lim && it.params["r"] == rem && d >= 0 && d <= 2*limits[it.name][1]+1
			}
			if !found {
				t.Fatalf("X-RateLimit-Limit %d, -Remaining %d, -Reset %d (now %d) are no item of RateLimit %q", lim, rem, reset, now.Unix(), w.Header()["Ratelimit"])
			}
			if w.Code == http.StatusOK {
				if vs := w.Header()["Retry-After"]; vs != nil {
					t.Fatalf("admitted with Retry-After %q", vs)
				}
				last, lastRemaining = &s, rem
				return w.Code, 0
			}
			last = nil
			retry := intField(t, w, "Retry-After")
			if retry < 1 || retry > reset-now.Unix() {
				t.Fatalf("Retry-After %d after X-RateLimit-Reset %d (now %d)", retry, reset, now.Unix())
			}
			// draft-10 §6: no Retry-After earlier than the t of a rule
			// that refuses the request (it has less than the cost left).
			for _, it := range items {
				if it.params["r"] < s.cost && it.params["t"] > retry {
					t.Fatalf("Retry-After %d before the t of %+v, RateLimit %q", retry, it, w.Header()["Ratelimit"])
				}
			}
			var body struct {
				RetryAfterMS int64 `json:"retry_after_ms"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
				t.Fatal(err)
			}
			if got := (body.RetryAfterMS + 999) / 1000; got != retry {
				t.Fatalf("retry_after_ms %d, Retry-After %d", body.RetryAfterMS, retry)
			}
			return w.Code, retry
		}
		for i := 0; i+1 < len(ops); i += 2 {
			s := sent{key: ops[i]&4 != 0, cost: 1}
			if ops[i]&2 != 0 {
				s.cost = minLimit
			}
			dt := time.Duration(ops[i+1]) * step
			if ops[i+1] >= 250 {
				dt = time.Duration(ops[i+1]-249) * 24 * time.Hour
			}
			prev, prevRemaining, prevRoom, prevRoomKey := last, lastRemaining, room, roomKey
			code, retry := do(s, dt)
			if prev != nil && dt == 0 && prev.key == s.key && s.cost <= prevRemaining && code != http.StatusOK {
				t.Fatalf("op %d: refused a request of cost %d at the instant X-RateLimit-Remaining was %d", i/2, s.cost, prevRemaining)
			}
			// After a denial too; not with local rules, whose RateLimit
			// r a deny-cache denial may show stale (known, left alone).
			if !local && dt == 0 && i > 0 && prevRoomKey == s.key && s.cost <= prevRoom && code != http.StatusOK {
				t.Fatalf("op %d: refused a request of cost %d at the instant RateLimit's least r was %d", i/2, s.cost, prevRoom)
			}
			if code == http.StatusTooManyRequests && ops[i]&8 != 0 {
				if again, _ := do(s, time.Duration(retry)*time.Second); again != http.StatusOK {
					t.Fatalf("op %d: refused again %d s later, when its Retry-After had passed", i/2, retry)
				}
			}
		}
	})
}
