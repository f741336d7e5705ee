package httpapi

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/slidegate/slidegate/config"
	"github.com/slidegate/slidegate/internal/accuracy"
	"github.com/slidegate/slidegate/kvstore"
	"github.com/slidegate/slidegate/kvstore/memstore"
)

// accScenario is a configuration under which a client obeying the waits of
// a 429 is checked (TestRetryAfterExactOverHTTP).
type accScenario struct {
	name string
	edit func(m map[string]any)
}

// accLimit is a limit of the configuration's JSON.
func accLimit(name string, limit int, window, scope string) map[string]any {
	return map[string]any{"name": name, "limit": limit, "window": window, "scope": scope}
}

// accPlans is the plans free and pro with these limits.
func accPlans(free, pro []any) map[string]any {
	return map[string]any{"free": map[string]any{"limits": free}, "pro": map[string]any{"limits": pro}}
}

// accScenarios: one rule (shared: the deny cache remembers its denials;
// local: it never does), two rules, periods that are not minutes, ip_limits
// with a plan, scopes mixed in both, unlisted keys counted on the IP.
// POST /v1/search costs 3 everywhere (testRetryAfterExact).
var accScenarios = []accScenario{
	{"one rule", func(m map[string]any) {
		m["plans"] = accPlans([]any{accLimit("minute", 5, "1m", "shared")}, []any{accLimit("minute", 8, "1m", "shared")})
	}},
	{"one local rule", func(m map[string]any) {
		m["plans"] = accPlans([]any{accLimit("minute", 5, "1m", "local")}, []any{accLimit("minute", 8, "1m", "local")})
	}},
	{"minute and day", func(m map[string]any) {
		m["plans"] = accPlans(
			[]any{accLimit("minute", 5, "1m", "shared"), accLimit("day", 9, "24h", "shared")},
			[]any{accLimit("minute", 8, "1m", "shared"), accLimit("hour", 14, "1h", "shared")})
	}},
	{"odd periods", func(m map[string]any) {
		m["plans"] = accPlans(
			[]any{accLimit("s7", 3, "7s", "shared"), accLimit("m", 10, "1m", "local")},
			[]any{accLimit("sec", 3, "1s", "shared")})
	}},
	{"local ip_limits and plan", func(m map[string]any) {
		m["ip_limits"] = []any{accLimit("ip", 4, "10s", "local")}
		m["plans"] = accPlans(
			[]any{accLimit("minute", 5, "1m", "shared"), accLimit("day", 9, "24h", "shared")},
			[]any{accLimit("minute", 8, "1m", "shared")})
	}},
	{"shared ip_limits and plan", func(m map[string]any) {
		m["ip_limits"] = []any{accLimit("ip", 7, "1m", "shared")}
		m["plans"] = accPlans([]any{accLimit("minute", 5, "1m", "shared")}, []any{accLimit("hour", 12, "1h", "shared")})
	}},
	{"mixed scopes", func(m map[string]any) {
		m["ip_limits"] = []any{accLimit("ip", 4, "10s", "local"), accLimit("ip-min", 12, "1m", "shared")}
		m["plans"] = accPlans(
			[]any{accLimit("minute", 5, "1m", "local"), accLimit("day", 9, "24h", "shared")},
			[]any{accLimit("sec", 3, "1s", "local"), accLimit("minute", 8, "1m", "shared")})
	}},
	{"unlisted keys on the IP", func(m map[string]any) {
		m["identity"] = map[string]any{"unlisted_keys": "ip"}
		m["ip_limits"] = []any{accLimit("ip", 6, "30s", "local")}
		m["plans"] = accPlans([]any{accLimit("minute", 5, "1m", "shared")}, []any{accLimit("minute", 8, "1m", "shared")})
	}},
}

// accReq is one of the traffic's requests: two anonymous clients, the pro
// key, GETs costing 1, POSTs to /v1/search costing 3, and check API calls
// for the pro key (cost 1 to 3).
func accReq(rng *rand.Rand) req {
	r := req{remote: "192.0.2." + strconv.Itoa(1+rng.IntN(2)) + ":5000"}
	switch rng.IntN(6) {
	case 0:
		// Sometimes naming the free plan, whose counters of the same name
		// and window are the pro key's too.
		plan := []string{"", `,"plan":"free"`}[rng.IntN(2)]
		return req{method: http.MethodPost, path: CheckPath, remote: r.remote,
			body: fmt.Sprintf(`{"key":%q,"cost":%d%s}`, proKey, 1+rng.IntN(3), plan)}
	case 3:
		if rng.IntN(2) == 0 { // a CORS preflight: ip_limits alone
			r.method, r.header = http.MethodOptions, map[string]string{"Origin": "https://a.example", "Access-Control-Request-Method": "PUT"}
			return r
		}
		r.header = map[string]string{"X-API-Key": "unlisted-" + strconv.Itoa(rng.IntN(2))}
	case 1, 2:
		r.header = map[string]string{"X-API-Key": proKey}
	}
	if rng.IntN(3) == 0 {
		r.method, r.path = http.MethodPost, "/v1/search"
	}
	return r
}

// accStep moves the clock: mostly a little (with nanoseconds, so that waits
// are not whole milliseconds), sometimes to just before or just after a
// minute's boundary.
func accStep(rng *rand.Rand, at time.Time) time.Time {
	next := at.Truncate(time.Minute).Add(time.Minute)
	switch rng.IntN(40) {
	case 2, 3: // the clock steps back, and the limiter holds the newest time
		return at.Add(-time.Duration(rng.Int64N(int64(3 * time.Second))))
	case 0, 10, 20, 30:
		return next.Add(-time.Duration(1 + rng.IntN(int(time.Millisecond))))
	case 1, 11, 21, 31:
		return next.Add(time.Duration(rng.IntN(int(2 * time.Millisecond))))
	}
	return at.Add(time.Duration(rng.Int64N(int64(1500 * time.Millisecond))))
}

// accAnswer is what a client reads from an answer: whether it was refused
// (a 429, or "allowed": false from the check API), retry_after_ms,
// Retry-After and X-RateLimit-Reset.
type accAnswer struct {
	denied     bool
	retryMS    int64
	retryAfter int64
	reset      int64
}

// readAnswer reads w, the answer to r, as a client does.
func readAnswer(t *testing.T, r req, w *httptest.ResponseRecorder) accAnswer {
	t.Helper()
	if h := w.Header().Get(StoreHeader); h != "" {
		t.Fatalf("%s %s: store error: %s %s", r.method, r.path, h, w.Body)
	}
	var a accAnswer
	var body struct {
		Allowed      *bool `json:"allowed"`
		RetryAfterMS int64 `json:"retry_after_ms"`
	}
	switch {
	case r.path == CheckPath:
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || body.Allowed == nil {
			t.Fatalf("check API: %d %s", w.Code, w.Body)
		}
		a.denied = !*body.Allowed
	case w.Code == http.StatusTooManyRequests:
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
			t.Fatalf("429 body %s: %v", w.Body, err)
		}
		a.denied = true
	case w.Code != http.StatusOK:
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	a.retryMS = body.RetryAfterMS
	if a.denied {
		var err error
		if a.retryAfter, err = strconv.ParseInt(w.Header().Get("Retry-After"), 10, 64); err != nil {
			t.Fatalf("denied with Retry-After %q", w.Header().Get("Retry-After"))
		}
	}
	a.reset, _ = strconv.ParseInt(w.Header().Get("X-RateLimit-Reset"), 10, 64)
	return a
}

// TestRetryAfterExactOverHTTP: in every scenario, with and without
// count_denied (which turns the deny cache off), for the pre-filter and the
// check API, a refused request sent again with nothing in between is
// admitted at the answer's retry_after_ms, at its Retry-After (whole
// seconds), and at X-RateLimit-Reset (a Unix second), and is refused 1 ms
// before retry_after_ms; after an admission with X-RateLimit-Remaining 0,
// a request of cost 1 is admitted at X-RateLimit-Reset. Each probe replays
// the history into a fresh Handler; the first 6 of each kind in a run are
// probed. In shadow mode every answer carries the rate-limit headers the
// enforcing Handler sends, and is marked denied exactly when that one
// refuses. The clock sometimes steps back (held by the limiter).
func TestRetryAfterExactOverHTTP(t *testing.T) {
	for _, sc := range accScenarios {
		for _, st := range accStores {
			for _, countDenied := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/count_denied=%t", sc.name, st.name, countDenied), func(t *testing.T) {
					testRetryAfterExact(t, sc, st, countDenied)
				})
			}
		}
	}
}

// accStores are the shared stores the limiter meets, each over a memory
// store: the memory store itself (deciding under its lock), one that only
// adds under conditions (as DynamoDB), and one that only loads and adds (as
// Workers KV). "handler per request" serves each request with a new Handler on the
// same stores, passing on the newest time seen, as the Worker does (its
// deny cache lives for one request).
var accStores = []accStore{
	{"memory", nil, false},
	{"conditional", func(o *Options) { o.Store = condOnly{memstore.New()} }, false},
	{"load and add", func(o *Options) { o.Store = plainOnly{memstore.New()} }, false},
	{"handler per request", nil, true},
}

// accStore is a way to store the counters (accStores).
type accStore struct {
	name       string
	opts       func(*Options)
	perRequest bool
}

// accRun is a fixture that, for a store perRequest, builds a Handler for
// each request.
type accRun struct {
	*fixture
	t      *testing.T
	o      *Options // nil: one Handler
	latest time.Time
}

func newAccRun(t *testing.T, cfg *config.Config, st accStore) *accRun {
	t.Helper()
	a := &accRun{t: t}
	a.fixture = newFixture(t, cfg, func(o *Options) {
		if st.opts != nil {
			st.opts(o)
		}
		if st.perRequest {
			o.Store, o.Local = memstore.New(), memstore.New()
			a.o = o
		}
	})
	return a
}

func (a *accRun) do(r req) *httptest.ResponseRecorder {
	if a.o == nil {
		return a.fixture.do(r)
	}
	h, err := New(*a.o)
	if err != nil {
		a.t.Fatal(err)
	}
	h.Seen(a.latest)
	a.h = h
	w := a.fixture.do(r)
	a.latest = h.Latest()
	return w
}

// costOne is r as a request of cost 1 from the same client.
func costOne(r req) req {
	switch {
	case r.path == CheckPath:
		r.body = regexp.MustCompile(`"cost":\d+`).ReplaceAllString(r.body, `"cost":1`)
	case r.method == http.MethodPost:
		r.method, r.path = http.MethodGet, "/api"
	}
	return r
}

// condOnly hides every interface of its store but kvstore.Conditional.
type condOnly struct{ kvstore.Conditional }

// plainOnly hides every interface of its store but kvstore.Store.
type plainOnly struct{ kvstore.Store }

// testRetryAfterExact is TestRetryAfterExactOverHTTP for one scenario, store
// and count_denied.
func testRetryAfterExact(t *testing.T, sc accScenario, st accStore, countDenied bool) {
	cfgFor := func(shadow bool) func(map[string]any) {
		return func(m map[string]any) {
			m["api_keys"] = map[string]any{HashKey(proKey): "pro"}
			m["costs"] = []any{map[string]any{"method": "POST", "path_prefix": "/v1/search", "cost": 3}}
			sc.edit(m)
			m["count_denied"], m["shadow"] = countDenied, shadow
		}
	}
	cfg, shadowCfg := testConfig(t, cfgFor(false)), testConfig(t, cfgFor(true))
	probes := 0
	for seed := range uint64(3) {
		rng := rand.New(rand.NewPCG(seed, 11))
		run, shadow := newAccRun(t, cfg, st), newAccRun(t, shadowCfg, st)
		at := t0.Add(time.Duration(rng.Int64N(int64(time.Minute))))
		if seed == 2 { // across midnight UTC, where the day's bucket ends
			at = t0.Truncate(24 * time.Hour).Add(24*time.Hour - 20*time.Second)
		}
		var history []timedReq
		checked, reset := 0, 0
		replay := func(when time.Time, r req) accAnswer {
			f := newAccRun(t, cfg, st)
			for _, h := range history {
				f.clock.t = h.at
				f.do(h.r)
			}
			f.clock.t = when
			return readAnswer(t, r, f.do(r))
		}
		for i := range 60 {
			at = accStep(rng, at)
			r := accReq(rng)
			run.clock.t, shadow.clock.t = at, at
			w, sw := run.do(r), shadow.do(r)
			a := readAnswer(t, r, w)
			where := fmt.Sprintf("seed %d, request %d (%s %s %v) at %s", seed, i, r.method, r.path, r.header, at.Sub(t0))
			if got, want := sw.Header().Get(ShadowHeader) == "denied", a.denied; got != want {
				t.Errorf("%s: shadow marked denied %t, enforced refused %t", where, got, want)
			}
			for _, h := range []string{"RateLimit", "X-RateLimit-Remaining", "X-RateLimit-Reset"} {
				if got, want := sw.Header().Get(h), w.Header().Get(h); got != want {
					t.Errorf("%s: shadow %s %q, enforced %q", where, h, got, want)
				}
			}
			history = append(history, timedReq{at, r})
			if !a.denied && w.Header().Get("X-RateLimit-Remaining") == "0" && reset < 6 {
				// GitHub tells clients to wait for X-RateLimit-Reset when
				// Remaining is 0: a request of cost 1 is admitted then.
				reset++
				if got := replay(time.Unix(a.reset, 0), costOne(r)); got.denied {
					t.Errorf("%s: admitted with X-RateLimit-Remaining 0, Reset %+d s; at Reset a request of cost 1 was refused", where, a.reset-at.Unix())
				}
			}
			if !a.denied || checked == 6 {
				continue
			}
			checked++
			if a.retryMS < 1 || a.retryAfter*1000 < a.retryMS || (a.retryAfter-1)*1000 >= max(a.retryMS, 1000) {
				t.Fatalf("%s: retry_after_ms %d, Retry-After %d", where, a.retryMS, a.retryAfter)
			}
			ms := at.Add(time.Duration(a.retryMS) * time.Millisecond)
			for _, p := range []struct {
				what  string
				when  time.Time
				admit bool
			}{
				{"1 ms before retry_after_ms", ms.Add(-time.Millisecond), false},
				{"at retry_after_ms", ms, true},
				{"at Retry-After", at.Add(time.Duration(a.retryAfter) * time.Second), true},
				{"at X-RateLimit-Reset", time.Unix(a.reset, 0), true},
			} {
				if got := replay(p.when, r); got.denied == p.admit {
					t.Errorf("%s: refused, retry_after_ms %d, Retry-After %d, Reset %+d s; %s (+%s): denied %t",
						where, a.retryMS, a.retryAfter, a.reset-at.Unix(), p.what, p.when.Sub(at), got.denied)
				}
			}
		}
		probes += checked
	}
	if probes < 10 {
		t.Errorf("only %d refusals probed: the traffic is too light", probes)
	}
}

// TestBoundaryBurstOverHTTP: against 100 a minute, 100 requests at
// 11:59:59 and 100 at 12:00:01 get 102 through (the previous minute still
// weighs 59/60 of its 100), not 200. An attacker who then sends the
// request again at every Retry-After (exactly, in milliseconds, or in the
// header's whole seconds), or steadily at several times the limit, gets at
// most twice the limit into any one minute (docs/accuracy.md's bound; 199
// here, as the first burst leaves the window at 12:00:59, when the
// previous minute still weighs 1/60), and nothing beyond the bursts' 102
// when denied requests are counted.
func TestBoundaryBurstOverHTTP(t *testing.T) {
	noon := time.Date(2027, 1, 15, 12, 0, 0, 0, time.UTC)
	type attack struct {
		name string
		// next is when the attacker sends again after an answer at at.
		next func(at time.Time, a accAnswer) time.Time
	}
	attacks := []attack{
		{"retry at retry_after_ms", func(at time.Time, a accAnswer) time.Time {
			return at.Add(time.Duration(max(a.retryMS, 1)) * time.Millisecond)
		}},
		{"retry at Retry-After", func(at time.Time, a accAnswer) time.Time {
			return at.Add(time.Duration(max(a.retryAfter, 1)) * time.Second)
		}},
		{"steady 10x", func(at time.Time, _ accAnswer) time.Time { return at.Add(60 * time.Millisecond) }},
		{"steady 2x", func(at time.Time, _ accAnswer) time.Time { return at.Add(300 * time.Millisecond) }},
	}
	for _, st := range accStores {
		for _, countDenied := range []bool{false, true} {
			cfg := testConfig(t, func(m map[string]any) {
				m["plans"] = accPlans([]any{accLimit("minute", 100, "1m", "shared")}, []any{accLimit("minute", 100, "1m", "shared")})
				m["count_denied"] = countDenied
			})
			for _, at := range attacks {
				t.Run(fmt.Sprintf("%s/count_denied=%t/%s", st.name, countDenied, at.name), func(t *testing.T) {
					f := newAccRun(t, cfg, st)
					var admitted []time.Time
					send := func(when time.Time) accAnswer {
						f.clock.t = when
						r := req{}
						a := readAnswer(t, r, f.do(r))
						if !a.denied {
							admitted = append(admitted, when)
						}
						return a
					}
					for range 100 {
						send(noon.Add(-time.Second))
					}
					var last accAnswer
					for range 100 {
						last = send(noon.Add(time.Second))
					}
					if got, want := len(admitted), 102; got != want {
						t.Fatalf("the boundary burst got %d through, want %d", got, want)
					}
					for when := at.next(noon.Add(time.Second), last); when.Before(noon.Add(5 * time.Minute)); {
						when = at.next(when, send(when))
					}
					worst, _, err := accuracy.WorstWindow(admitted, time.Minute)
					if err != nil {
						t.Fatal(err)
					}
					bound := int64(200)
					if countDenied {
						bound = 102
					}
					t.Logf("most admitted in one minute: %d", worst)
					if worst > bound {
						t.Errorf("%d admitted in one minute, more than %d", worst, bound)
					}
				})
			}
		}
	}
}
