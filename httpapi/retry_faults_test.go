package httpapi

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate/kvstore"
	"github.com/slidegate/slidegate/kvstore/memstore"
)

// pstore is a shared store (loads and adds) that fails the calls whose
// number, counted from the request's first, is in fail or at least from,
// or every call while down; fails counts the calls it failed.
type pstore struct {
	s     *memstore.Store
	n     int
	fails int
	fail  map[int]bool
	from  int // every call from this number on fails; 0 none
	down  bool
}

func (s *pstore) call() error {
	s.n++
	if s.down || s.fail[s.n] || s.from > 0 && s.n >= s.from {
		s.fails++
		return errors.New("pstore: down")
	}
	return nil
}

func (s *pstore) Load(ctx context.Context, id string, slots []kvstore.Slot, counts []int64) error {
	if err := s.call(); err != nil {
		return err
	}
	return s.s.Load(ctx, id, slots, counts)
}

func (s *pstore) Add(ctx context.Context, id string, slots []kvstore.Slot, costs []int64) error {
	if err := s.call(); err != nil {
		return err
	}
	return s.s.Add(ctx, id, slots, costs)
}

// pdynamo fails as DynamoDB does: reads come from memory (the cache) and
// never fail; writes fail when pstore says so.
type pdynamo struct{ *pstore }

func (s pdynamo) Load(ctx context.Context, id string, slots []kvstore.Slot, counts []int64) error {
	return s.s.Load(ctx, id, slots, counts)
}

func (s pdynamo) AddIf(ctx context.Context, id string, conds []kvstore.Cond, counts []int64) (bool, error) {
	if err := s.call(); err != nil {
		return false, err
	}
	return s.s.AddIf(ctx, id, conds, counts)
}

// pkv fails as Workers KV does: a Load (a list) may fail; a Peek and an
// Add never do.
type pkv struct{ *pstore }

func (s pkv) Add(ctx context.Context, id string, slots []kvstore.Slot, costs []int64) error {
	return s.s.Add(ctx, id, slots, costs)
}

func (s pkv) Peek(ctx context.Context, id string, slots []kvstore.Slot, counts []int64) error {
	return s.s.Load(ctx, id, slots, counts)
}

// pstep is one request of a scenario and how the store fails during it.
type pstep struct {
	at    time.Time
	post  bool // cost 2
	key   bool // with an API key
	chk   bool // a check API call for probe-key
	down  bool
	fail  int // a call number that fails; 0 none
	fail2 int // another
	from  int // every call from this number on fails (down mid-request); 0 none
}

// pscen is a configuration (ip_limits and the free plan, of limits built
// by pl) and the requests played on it.
type pscen struct {
	ip, plan    []any
	countDenied bool
	shadow      bool
	policy      string
	profile     int // 0 plain, 1 dynamo, 2 kv
	steps       []pstep
}

func (sc pscen) String() string {
	b, _ := json.Marshal(map[string]any{"ip": sc.ip, "plan": sc.plan, "cd": sc.countDenied, "pol": sc.policy, "shadow": sc.shadow, "profile": sc.profile})
	var s []string
	for _, st := range sc.steps {
		s = append(s, fmt.Sprintf("%s post=%t key=%t down=%t fail=%d,%d from=%d chk=%t", st.at.Sub(t0), st.post, st.key, st.down, st.fail, st.fail2, st.from, st.chk))
	}
	return string(b) + "\n  " + strings.Join(s, "\n  ")
}

// pobs is what a request did besides its answer: the store calls that
// failed, the WARN lines logged, whether a refund of the ip rules failed,
// and the counts of every rule before and after it.
type pobs struct {
	fails, warns  int
	kept          bool // a refund failed
	before, after map[string]int64
}

// snapshot reads the previous and current bucket's count of every rule,
// for the client's IP and for probe-key.
func (sc pscen) snapshot(t *testing.T, local, shared *memstore.Store, at time.Time) map[string]int64 {
	out := map[string]int64{}
	for _, id := range []string{"ip:192.0.2.1", keyIdentity(hashOf("probe-key"))} {
		for _, group := range [][]any{sc.ip, sc.plan} {
			for _, l := range group {
				m := l.(map[string]any)
				d, _ := time.ParseDuration(m["window"].(string))
				st := shared
				if m["scope"] == "local" {
					st = local
				}
				i := int64(at.UnixNano()) / int64(d)
				for _, b := range []int64{i - 1, i} {
					c := []int64{0}
					_ = st.Load(context.Background(), id, []kvstore.Slot{{Name: m["name"].(string), Bucket: b, Length: d}}, c)
					out[fmt.Sprintf("%s/%s/%d", id, m["name"], b-i)] = c[0]
				}
			}
		}
	}
	return out
}

// hashOf is hashKey's answer for k.
func hashOf(k string) *[sha256.Size]byte {
	var h [sha256.Size]byte
	hashKey(k, &h)
	return &h
}

// replay plays the steps on fresh stores and returns the answers.
func (sc pscen) replay(t *testing.T) ([]*httptest.ResponseRecorder, *fixture) {
	ws, f, _ := sc.replayObs(t)
	return ws, f
}

// replayObs is replay with what each request did.
func (sc pscen) replayObs(t *testing.T) ([]*httptest.ResponseRecorder, *fixture, []pobs) {
	cfg := testConfig(t, func(m map[string]any) {
		m["ip_limits"] = append([]any{}, sc.ip...) // [], not null, without one
		m["plans"] = map[string]any{"free": map[string]any{"limits": sc.plan}}
		m["api_keys"] = map[string]any{}
		m["costs"] = []any{map[string]any{"method": "POST", "path_prefix": "/v1/search", "cost": 2}}
		m["count_denied"] = sc.countDenied
		m["shadow"] = sc.shadow
		m["on_store_error"] = sc.policy
	})
	st := &pstore{s: memstore.New()}
	local := memstore.New()
	var store kvstore.Store = st
	switch sc.profile {
	case 1:
		store = pdynamo{st}
	case 2:
		store = pkv{st}
	}
	f := newFixture(t, cfg, func(o *Options) { o.Local, o.Store = local, store })
	var out []*httptest.ResponseRecorder
	var obs []pobs
	for _, s := range sc.steps {
		st.n, st.down, st.fail, st.from, st.fails = 0, s.down, map[int]bool{s.fail: true, s.fail2: true}, s.from, 0
		f.clock.t = s.at
		r := req{}
		if s.post {
			r = req{method: http.MethodPost, path: "/v1/search"}
		}
		if s.key {
			r.header = map[string]string{"X-API-Key": "probe-key"}
		}
		if s.chk {
			c := 1
			if s.post {
				c = 2
			}
			r = req{method: http.MethodPost, path: CheckPath, body: fmt.Sprintf(`{"key":"probe-key","cost":%d}`, c)}
		}
		before := sc.snapshot(t, local, st.s, s.at)
		logs := f.logs.Len()
		out = append(out, f.do(r))
		lines := f.logs.String()[logs:]
		obs = append(obs, pobs{fails: st.fails, warns: strings.Count(lines, `"store error"`), kept: strings.Contains(lines, keptIP), before: before, after: sc.snapshot(t, local, st.s, s.at)})
	}
	return out, f, obs
}

// TestRetryAfterUnderStoreFaults plays random traffic (anonymous, keyed,
// check API calls, cost 1 and 2, the clock stepping back) on random
// ip_limits and plans of both scopes, count_denied, shadow and
// on_store_error, against a shared store that fails every call of a
// request or its calls of one or two numbers, as a plain store (every
// call may fail), as DynamoDB fails (writes only; reads are its cache) and
// as Workers KV does (lists only; peeks and adds are in memory). It checks
// the invariants the reviews of the outage fixes (ec9e03b, 182bf1e)
// named: a refusal's retry at retry_after_ms is admitted, the store then
// answering or still down, unless a rule the refusal did not decide (its
// store failed) refuses it; a millisecond earlier it is refused; a refused
// request leaves no count (but count_denied's, and a shared ip count whose
// refund failed); RateLimit names policies of RateLimit-Policy, once each;
// a store error is logged, and no more than once. SLIDEGATE_FAULT_SCENARIOS
// sets the number of scenarios per store (25; the review ran 6000 with
// several seeds, SLIDEGATE_FAULT_SEED).
func TestRetryAfterUnderStoreFaults(t *testing.T) {
	n, seed := 25, uint64(14)
	if s := os.Getenv("SLIDEGATE_FAULT_SCENARIOS"); s != "" {
		_, _ = fmt.Sscan(s, &n)
	}
	if s := os.Getenv("SLIDEGATE_FAULT_SEED"); s != "" {
		_, _ = fmt.Sscan(s, &seed)
	}
	for profile, name := range []string{"plain", "dynamodb", "workers kv"} {
		t.Run(name, func(t *testing.T) { faultScenarios(t, profile, n, seed) })
	}
}

func faultScenarios(t *testing.T, profile, n int, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 14))
	windows, scopes := []string{"10s", "1m", "1h"}, []string{"local", "shared"}
	found := 0
	for iter := 0; iter < n && found < 8; iter++ {
		var sc pscen
		for i, n := 0, rng.IntN(3); i < n; i++ {
			sc.ip = append(sc.ip, accLimit(fmt.Sprintf("ip%d", i), 2+rng.IntN(5), windows[rng.IntN(3)], scopes[rng.IntN(2)]))
		}
		for i, n := 0, 1+rng.IntN(3); i < n; i++ {
			sc.plan = append(sc.plan, accLimit(fmt.Sprintf("p%d", i), 2+rng.IntN(5), windows[rng.IntN(3)], scopes[rng.IntN(2)]))
		}
		sc.countDenied = rng.IntN(2) == 0
		sc.shadow = rng.IntN(4) == 0
		sc.policy = []string{"allow", "deny"}[rng.IntN(2)]
		sc.profile = profile
		at := t0.Add(10 * time.Second)
		for i, n := 0, 4+rng.IntN(8); i < n; i++ {
			at = at.Add(time.Duration(rng.IntN(3000)) * time.Millisecond)
			if rng.IntN(15) == 0 {
				at = at.Add(-time.Duration(rng.IntN(2000)) * time.Millisecond)
			}
			s := pstep{at: at, post: rng.IntN(3) == 0, key: rng.IntN(3) == 0, chk: rng.IntN(5) == 0}
			switch rng.IntN(5) {
			case 0:
				s.down = true
			case 1:
				s.fail = 1 + rng.IntN(7)
				if rng.IntN(2) == 0 {
					s.fail2 = 1 + rng.IntN(7)
				}
			case 2:
				s.from = 2 + rng.IntN(5)
			}
			sc.steps = append(sc.steps, s)
		}
		ws, f, obs := sc.replayObs(t)
		for i, w := range ws {
			o := obs[i]
			if o.warns > o.fails || (o.fails > 0 && o.warns == 0) {
				found++
				t.Errorf("LOG request %d: %d store errors, %d WARN lines (%d)\n%s\n%s", i+1, o.fails, o.warns, w.Code, f.logs, sc)
			}
			if (w.Code != 200 || w.Header().Get(ShadowHeader) != "") && !sc.countDenied {
				for k, v := range o.after {
					if v != o.before[k] && !(o.kept && strings.HasPrefix(k, "ip:")) {
						found++
						t.Errorf("COUNTED request %d refused (%d) changed %s from %d to %d\n%s", i+1, w.Code, k, o.before[k], v, sc)
					}
				}
			}
			var seen = map[string]bool{}
			for _, item := range strings.Split(w.Header().Get("RateLimit"), ", ") {
				name, _, _ := strings.Cut(item, ";")
				if name != "" && (seen[name] || !strings.Contains(w.Header().Get("RateLimit-Policy"), name+";")) {
					found++
					t.Errorf("HEADER request %d: RateLimit %q, policy %q\n%s", i+1, w.Header().Get("RateLimit"), w.Header().Get("RateLimit-Policy"), sc)
				}
				seen[name] = true
			}
			if sc.steps[i].chk && w.Code == 200 {
				var cr struct {
					Allowed    bool  `json:"allowed"`
					RetryMS    int64 `json:"retry_after_ms"`
					StoreError bool  `json:"store_error"`
					Rules      []struct {
						Name    string `json:"name"`
						Allowed bool   `json:"allowed"`
					} `json:"rules"`
				}
				if err := json.Unmarshal(w.Body.Bytes(), &cr); err != nil {
					t.Fatal(err)
				}
				if cr.Allowed || cr.RetryMS < 0 || sc.shadow {
					continue
				}
				for _, down := range []bool{false, true} {
					if down && sc.policy == "deny" {
						continue
					}
					for _, d := range []time.Duration{-time.Millisecond, 0} {
						rs := sc
						rs.steps = append(append([]pstep(nil), sc.steps[:i+1]...), pstep{at: sc.steps[i].at.Add(time.Duration(cr.RetryMS)*time.Millisecond + d), post: sc.steps[i].post, chk: true, down: down})
						rws, _ := rs.replay(t)
						r := rws[len(rws)-1]
						var rr = cr
						rr.Rules = nil
						_ = json.Unmarshal(r.Body.Bytes(), &rr)
						switch {
						case d == 0 && !rr.Allowed:
							named := true
							for _, x := range rr.Rules {
								if !x.Allowed {
									in := false
									for _, y := range cr.Rules {
										in = in || y.Name == x.Name
									}
									named = named && in
								}
							}
							if named {
								found++
								t.Errorf("CHECK TOO EARLY retry(down=%t) of step %d: %s; retry %s\n%s", down, i+1, w.Body, r.Body, sc)
							}
						case d < 0 && rr.Allowed && !rr.StoreError && !down:
							found++
							t.Errorf("CHECK TOO LATE retry of step %d: %s; retry %s\n%s", i+1, w.Body, r.Body, sc)
						}
					}
				}
				continue
			}
			if w.Code != 429 {
				continue
			}
			var body tooMany
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
				t.Fatal(err)
			}
			if body.RetryAfterMS < 0 {
				continue
			}
			rl := w.Header().Get("RateLimit")
			for _, down := range []bool{false, true} {
				if down && sc.policy == "deny" {
					continue
				}
				for _, d := range []time.Duration{-time.Millisecond, 0} {
					rs := sc
					rs.steps = append(append([]pstep(nil), sc.steps[:i+1]...), pstep{at: sc.steps[i].at.Add(time.Duration(body.RetryAfterMS)*time.Millisecond + d), post: sc.steps[i].post, key: sc.steps[i].key, chk: sc.steps[i].chk, down: down})
					rws, _ := rs.replay(t)
					r := rws[len(rws)-1]
					switch {
					case d == 0 && r.Code == 429:
						var rb tooMany
						_ = json.Unmarshal(r.Body.Bytes(), &rb)
						var real []string
						for _, v := range rb.ViolatedPolicies {
							if v[0] == 'p' {
								real = append(real, v)
							}
						}
						if len(real) == 0 {
							real = rb.ViolatedPolicies
						}
						named := true
						for _, v := range real {
							named = named && strings.Contains(rl, `"`+v+`"`)
						}
						if named {
							found++
							t.Errorf("TOO EARLY retry(down=%t) of request %d: 429 %s (RateLimit %q; retry's RateLimit %q, violated %v)\n%s", down, i+1, w.Body, rl, r.Header().Get("RateLimit"), rb.ViolatedPolicies, sc)
						}
					case d < 0 && r.Code == 200 && !down && r.Header().Get(StoreHeader) == "":
						found++
						t.Errorf("TOO LATE retry 1ms before, of request %d: 200; 429 was %s (RateLimit %q)\n%s", i+1, w.Body, rl, sc)
					}
				}
			}
		}
	}
}
