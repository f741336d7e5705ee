package httpapi

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/dunglas/httpsfv"
)

// simWant is one request a client wants to make: when, and what it costs.
type simWant struct {
	at   time.Time
	cost int64
}

// simPolicy is how a client throttles itself from the headers it got.
type simPolicy interface {
	// gate returns when the client sends a request of this cost it
	// wants at now, from what it has seen.
	gate(now time.Time, cost int64) time.Time
	// seen takes an answer received at at.
	seen(at time.Time, w *httptest.ResponseRecorder)
}

// retryOnly follows Retry-After after a 429 and nothing else (urllib3's
// Retry, go-retryablehttp).
type retryOnly struct{}

func (retryOnly) gate(now time.Time, _ int64) time.Time      { return now }
func (retryOnly) seen(time.Time, *httptest.ResponseRecorder) {}

// draftPacer reads RateLimit: it sends when every limit's r is at least
// its cost, and otherwise waits the t of each limit short of it. t is
// when more quota is back, at least one unit (draft-10 §4.1.2): it is
// sure of the request only when no limit is short by more than one.
type draftPacer struct {
	at    time.Time
	items map[string][2]int64 // r, t
	sure  bool
}

func (p *draftPacer) gate(now time.Time, cost int64) time.Time {
	p.sure = true
	for _, it := range p.items {
		if it[0] < cost {
			now = later(now, p.at.Add(time.Duration(it[1])*time.Second))
			p.sure = p.sure && it[0]+1 >= cost
		}
	}
	return now
}

func (p *draftPacer) seen(at time.Time, w *httptest.ResponseRecorder) {
	l, err := httpsfv.UnmarshalList(w.Header().Values("RateLimit"))
	if err != nil {
		return
	}
	p.at, p.items = at, map[string][2]int64{}
	for _, m := range l {
		it := m.(httpsfv.Item)
		r, _ := it.Params.Get("r")
		t, _ := it.Params.Get("t")
		p.items[it.Value.(string)] = [2]int64{r.(int64), t.(int64)}
	}
}

// trioPacer reads X-RateLimit-Remaining and -Reset as octokit does: with
// 0 remaining (or, costAware, less than the request costs) it sleeps
// until the reset epoch.
type trioPacer struct {
	costAware bool
	remaining int64
	reset     time.Time
}

func (p *trioPacer) gate(now time.Time, cost int64) time.Time {
	if p.remaining == 0 || p.costAware && p.remaining < cost {
		return later(now, p.reset)
	}
	return now
}

func (p *trioPacer) seen(_ time.Time, w *httptest.ResponseRecorder) {
	p.remaining, _ = strconv.ParseInt(w.Header().Get("X-RateLimit-Remaining"), 10, 64)
	r, _ := strconv.ParseInt(w.Header().Get("X-RateLimit-Reset"), 10, 64)
	p.reset = time.Unix(r, 0)
}

// checkPacer is a service on the check API: with less remaining than the
// cost it waits reset_after_ms of the last answer; a denial's
// retry_after_ms is followed by sim itself.
type checkPacer struct {
	at        time.Time
	remaining int64
	resetMS   int64
}

func (p *checkPacer) gate(now time.Time, cost int64) time.Time {
	if p.remaining < cost && !p.at.IsZero() {
		return later(now, p.at.Add(time.Duration(p.resetMS)*time.Millisecond))
	}
	return now
}

func (p *checkPacer) seen(at time.Time, w *httptest.ResponseRecorder) {
	var b struct {
		Remaining    int64 `json:"remaining"`
		ResetAfterMS int64 `json:"reset_after_ms"`
	}
	if json.Unmarshal(w.Body.Bytes(), &b) == nil {
		p.at, p.remaining, p.resetMS = at, b.Remaining, b.ResetAfterMS
	}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// simProbes is how many waits of a run are measured: each replays the
// run so far.
const simProbes = 8

// simStats is what one client met.
type simStats struct {
	sent, admitted int
	denied         int           // 429s (check API: "allowed": false)
	unasked        int           // 429s the headers said would not come
	waits          int           // sends after a wait
	over           time.Duration // total wait beyond the earliest admission
	maxOver        time.Duration
	needless       int       // waits where the request was admitted at once
	cost           int64     // admitted
	last           time.Time // last admission
}

// simRun drives one client through wants against a fresh Handler. Every
// client follows a 429's Retry-After (the check API's retry_after_ms);
// p throttles it before it sends. Each wait is measured against the
// earliest time the request was admitted, found by replaying what was
// sent into a fresh Handler and probing at the wait's start.
func simRun(t *testing.T, cfg func() *fixture, r req, check bool, p simPolicy, wants []simWant) simStats {
	return simRunOpts(t, cfg, r, check, p, wants, 0, false)
}

// simRunOpts is simRun measuring only waits of at least probeMin, and,
// with drop, dropping the wants that came while the client waited (a
// client that keeps up rather than one with a backlog).
func simRunOpts(t *testing.T, cfg func() *fixture, r req, check bool, p simPolicy, wants []simWant, probeMin time.Duration, drop bool) simStats {
	t.Helper()
	f := cfg()
	type sent struct {
		at time.Time
		r  req
	}
	var history []sent
	var st simStats
	now := time.Time{}
	mk := func(cost int64) req {
		q := r
		if check {
			q.body = fmt.Sprintf(`{"key": %q, "cost": %d}`, r.header["X-API-Key"], cost)
			q.header = nil
			return q
		}
		if cost > 1 {
			q.method, q.path = "POST", "/v1/search"
		}
		return q
	}
	do := func(fx *fixture, at time.Time, q req) (bool, time.Duration, *httptest.ResponseRecorder) {
		fx.clock.t = at
		w := fx.do(q)
		simAgree(t, at, w, check)
		if check {
			var b struct {
				Allowed      bool  `json:"allowed"`
				RetryAfterMS int64 `json:"retry_after_ms"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &b); err != nil {
				t.Fatalf("check answer %d %s", w.Code, w.Body)
			}
			return b.Allowed, time.Duration(b.RetryAfterMS) * time.Millisecond, w
		}
		switch w.Code {
		case 200:
			return true, 0, w
		case 429:
			ra, err := strconv.Atoi(w.Header().Get("Retry-After"))
			if err != nil {
				t.Fatalf("429 with Retry-After %q", w.Header().Get("Retry-After"))
			}
			return false, time.Duration(ra) * time.Second, w
		}
		t.Fatalf("status %d: %s", w.Code, w.Body)
		return false, 0, nil
	}
	// earliest is when q, wanted at from, is first admitted: from itself,
	// or the wait of the 429 a probe gets then (exact, as
	// TestRetryAfterExactOverHTTP checks; retry_after_ms is to the ms).
	earliest := func(from time.Time, q req) time.Time {
		probe := cfg()
		for _, h := range history {
			probe.clock.t = h.at
			probe.do(h.r)
		}
		probe.clock.t = from
		w := probe.do(q)
		if check {
			var b struct {
				Allowed      bool  `json:"allowed"`
				RetryAfterMS int64 `json:"retry_after_ms"`
			}
			_ = json.Unmarshal(w.Body.Bytes(), &b)
			if b.Allowed {
				return from
			}
			return from.Add(time.Duration(b.RetryAfterMS) * time.Millisecond)
		}
		if w.Code == 200 {
			return from
		}
		var b struct {
			RetryAfterMS int64 `json:"retry_after_ms"`
		}
		_ = json.Unmarshal(w.Body.Bytes(), &b)
		return from.Add(time.Duration(b.RetryAfterMS) * time.Millisecond)
	}
	for _, want := range wants {
		if drop && want.at.Before(now) {
			continue
		}
		now = later(now, want.at)
		q := mk(want.cost)
		from := now
		at := p.gate(now, want.cost)
		retried := false
		for {
			if at.Sub(from) >= max(probeMin, 1) && st.waits < simProbes {
				st.waits++
				e := earliest(from, q)
				if e.Equal(from) {
					st.needless++
				}
				if o := at.Sub(e); o > 0 {
					st.over += o
					st.maxOver = max(st.maxOver, o)
				}
			}
			ok, wait, w := do(f, at, q)
			history = append(history, sent{at, q})
			st.sent++
			p.seen(at, w)
			if ok {
				st.admitted++
				st.cost += want.cost
				st.last = at
				now = at
				break
			}
			st.denied++
			// The client sent because the headers (or a Retry-After it
			// obeyed) said the request fits.
			if retried || trusts(p, want.cost) {
				st.unasked++
				if st.unasked <= 3 {
					t.Logf("unasked denial at +%s (cost %d, retried %t): RateLimit %s, X-RateLimit-Remaining %s, Retry-After %s, body %s",
						at.Sub(wants[0].at), want.cost, retried, w.Header().Get("RateLimit"), w.Header().Get("X-RateLimit-Remaining"), w.Header().Get("Retry-After"), w.Body)
				}
			}
			from, at, retried = at, at.Add(wait), true
		}
	}
	return st
}

// trusts reports whether p sends a request of this cost only when the
// headers say it fits: not retryOnly, nor octokit's reading of the trio
// (0 remaining or not) for a request of cost more than 1, nor RateLimit's
// reader after a wait of t that brings back less than the cost.
func trusts(p simPolicy, cost int64) bool {
	switch p := p.(type) {
	case retryOnly:
		return false
	case *trioPacer:
		return p.costAware || cost == 1
	case *draftPacer:
		return p.sure
	}
	return true
}

// simDemand is a client's wants: steady (every step), or bursty (bursts
// of n at random times); a share of them cost 5.
func simDemand(rng *rand.Rand, start time.Time, n int, step time.Duration, burst int, share5 float64) []simWant {
	var out []simWant
	at := start
	for len(out) < n {
		k := 1
		if burst > 1 {
			k = 1 + rng.IntN(burst)
		}
		for range k {
			c := int64(1)
			if rng.Float64() < share5 {
				c = 5
			}
			out = append(out, simWant{at, c})
		}
		at = at.Add(step/2 + time.Duration(rng.Int64N(int64(step))))
	}
	return out[:n]
}

// TestHeaderClientsSim drives clients that throttle themselves by the
// headers, as client libraries do (simPolicies), against the default plans
// with README's ip_limits and costs: an anonymous client (free plan, its
// IP also under ip-second) and a pro key, with steady, bursty and flooding
// demand of which 30 % costs 5, over the memory store and the stores that
// only add conditionally (DynamoDB) or only load and add (Workers KV). A
// client that sent because the headers said its request fits (or that
// waited a 429's Retry-After) is never refused; every answer's fields
// agree with each other (simAgree); a wait of Retry-After is less than a
// second longer than the exact one. The numbers each client met (429s,
// how much longer than needed it waited: RateLimit's t is when more
// quota is back, X-RateLimit-Reset when the whole quota is) are logged.
func TestHeaderClientsSim(t *testing.T) {
	cfg := testConfig(t, func(m map[string]any) {
		delete(m, "plans")
		simExample(m)
	})
	for _, st := range accStores[:3] {
		t.Run(st.name, func(t *testing.T) {
			testHeaderClients(t, func() *fixture { return newFixture(t, cfg, st.opts) })
		})
	}
}

func testHeaderClients(t *testing.T, mkf func() *fixture) {
	type demand struct {
		name  string
		n     int
		step  time.Duration
		burst int
		share float64
	}
	demands := []demand{
		{"steady", 120, 700 * time.Millisecond, 1, 0.3},
		{"bursty", 150, 8 * time.Second, 30, 0.3},
		{"flood", 250, 1500 * time.Millisecond, 80, 0.3},
	}
	for _, who := range []string{"anonymous", "pro"} {
		for _, d := range demands {
			for _, pol := range simPolicies {
				t.Run(who+"/"+d.name+"/"+pol.name, func(t *testing.T) {
					rng := rand.New(rand.NewPCG(1, 2))
					wants := simDemand(rng, t0.Add(7300*time.Millisecond), d.n, d.step, d.burst, d.share)
					key := map[string]string{"X-API-Key": who}
					switch {
					case who == "anonymous" && pol.check:
						// The check API has no anonymous client: an
						// unlisted key, on the free plan.
						key = map[string]string{"X-API-Key": "free-key"}
					case who == "anonymous":
						key = nil
					case who == "pro":
						key = map[string]string{"X-API-Key": proKey}
					}
					r := req{header: key}
					if pol.check {
						r = req{method: "POST", path: CheckPath, header: key}
					}
					st := simRun(t, mkf, r, pol.check, pol.mk(), wants)
					avg := time.Duration(0)
					if st.waits > 0 {
						avg = st.over / time.Duration(st.waits)
					}
					t.Logf("sent %d admitted %d 429s %d unasked %d waits %d (needless %d) overshoot avg %s max %s, cost %d in %s",
						st.sent, st.admitted, st.denied, st.unasked, st.waits, st.needless, avg.Round(time.Millisecond), st.maxOver.Round(time.Millisecond), st.cost, st.last.Sub(wants[0].at).Round(time.Second))
					if st.unasked > 0 {
						t.Errorf("%d 429s the headers said would not come", st.unasked)
					}
					// Retry-After is the exact wait rounded up to seconds,
					// and so is RateLimit's t for a request that more quota
					// admits: a client waits no longer than it must, where
					// one that waits until the whole quota is back waits
					// up to a window longer.
					switch pol.mk().(type) {
					case retryOnly, *draftPacer:
						if st.maxOver >= time.Second {
							t.Errorf("a wait was %s longer than needed", st.maxOver)
						}
					}
				})
			}
		}
	}
}

// simPolicies are the clients each simulation runs: check is a client of
// the check API.
var simPolicies = []struct {
	name  string
	mk    func() simPolicy
	check bool
}{
	{"retry-after", func() simPolicy { return retryOnly{} }, false},
	{"ratelimit", func() simPolicy { return &draftPacer{} }, false},
	{"trio", func() simPolicy { return &trioPacer{remaining: -1} }, false},
	{"trio-cost", func() simPolicy { return &trioPacer{costAware: true, remaining: -1} }, false},
	{"check", func() simPolicy { return &checkPacer{} }, true},
}

// simExample sets README's ip_limits and costs: ip-second 50/1s, local,
// and POST /v1/search costing 5.
func simExample(m map[string]any) {
	m["ip_limits"] = []any{map[string]any{"name": "ip-second", "limit": 50, "window": "1s", "scope": "local"}}
	m["costs"] = []any{map[string]any{"method": "POST", "path_prefix": "/v1/search", "cost": 5}}
}

// simAgree checks that the fields of one answer agree with each other:
// RateLimit has an item for every RateLimit-Policy item, none with more
// than its quota left, and t 0 only with the whole quota; X-RateLimit-*
// is one of the items (its reset epoch no earlier than now + t, when more
// quota is back, give or take the roundings, and within two windows) and
// on an admission the one with the least left; a denial's Retry-After is
// no later than X-RateLimit-Reset and no earlier than the t of any rule
// that refused (draft-10 §6); the 429 body (or the check API's answer and
// its rules) says what the headers say.
func simAgree(t *testing.T, at time.Time, w *httptest.ResponseRecorder, check bool) {
	t.Helper()
	l, err := httpsfv.UnmarshalList(w.Header().Values("RateLimit"))
	if err != nil || len(l) == 0 {
		t.Fatalf("RateLimit %q: %v", w.Header().Values("RateLimit"), err)
	}
	pol, err := httpsfv.UnmarshalList(w.Header().Values("RateLimit-Policy"))
	if err != nil || len(pol) != len(l) {
		t.Fatalf("RateLimit-Policy %q against RateLimit %q", w.Header().Values("RateLimit-Policy"), w.Header().Values("RateLimit"))
	}
	hi := func(name string) int64 {
		v, err := strconv.ParseInt(w.Header().Get(name), 10, 64)
		if err != nil {
			t.Fatalf("%s %q", name, w.Header().Get(name))
		}
		return v
	}
	limit, remaining, reset := hi("X-RateLimit-Limit"), hi("X-RateLimit-Remaining"), hi("X-RateLimit-Reset")
	minR, match := int64(1<<62), false
	ts := make([]int64, len(l))
	for i, m := range l {
		it := m.(httpsfv.Item)
		r, _ := it.Params.Get("r")
		tt, _ := it.Params.Get("t")
		q, _ := pol[i].(httpsfv.Item).Params.Get("q")
		win, _ := pol[i].(httpsfv.Item).Params.Get("w")
		minR, ts[i] = min(minR, r.(int64)), tt.(int64)
		if r.(int64) > q.(int64) {
			t.Errorf("%s: r %d over q %d", it.Value, r, q)
		}
		if r.(int64) == q.(int64) && tt.(int64) != 0 {
			t.Errorf("%s: r %d is the whole quota, t %d", it.Value, r, tt)
		}
		// The trio is one of the items: same remaining, and a reset
		// epoch (the whole quota back) no earlier than now + t (more of
		// it back), both rounded up.
		if q.(int64) == limit && r.(int64) == remaining {
			if end := at.Add(time.Duration(tt.(int64)) * time.Second).Unix(); reset <= at.Unix()+2*win.(int64)+1 && reset >= end-1 {
				match = true
			}
		}
	}
	if !match {
		t.Errorf("X-RateLimit-* %d/%d/%d is no item of RateLimit %s at %d", limit, remaining, reset, w.Header().Get("RateLimit"), at.Unix())
	}
	denied := w.Code == 429
	var refused []int // the rules that refused a denied request
	if check {
		var b struct {
			Allowed      bool  `json:"allowed"`
			Remaining    int64 `json:"remaining"`
			Limit        int64 `json:"limit"`
			ResetAfterMS int64 `json:"reset_after_ms"`
			RetryAfterMS int64 `json:"retry_after_ms"`
			Rules        []struct {
				Allowed      bool  `json:"allowed"`
				Remaining    int64 `json:"remaining"`
				ResetAfterMS int64 `json:"reset_after_ms"`
			} `json:"rules"`
		}
		_ = json.Unmarshal(w.Body.Bytes(), &b)
		denied = !b.Allowed
		if b.Remaining != remaining || b.Limit != limit {
			t.Errorf("check: remaining %d limit %d, trio %d %d", b.Remaining, b.Limit, remaining, limit)
		}
		if len(b.Rules) != len(l) {
			t.Fatalf("check: %d rules, RateLimit %d items", len(b.Rules), len(l))
		}
		for i, m := range l {
			it := m.(httpsfv.Item)
			r, _ := it.Params.Get("r")
			tt, _ := it.Params.Get("t")
			if b.Rules[i].Remaining != r.(int64) || (b.Rules[i].ResetAfterMS+999)/1000 < tt.(int64) {
				t.Errorf("check: rule %d remaining %d reset_after_ms %d, RateLimit %s", i, b.Rules[i].Remaining, b.Rules[i].ResetAfterMS, w.Header().Get("RateLimit"))
			}
			if !b.Rules[i].Allowed {
				refused = append(refused, i)
			}
		}
		if denied && max((b.RetryAfterMS+999)/1000, 1) != hi("Retry-After") {
			t.Errorf("check: retry_after_ms %d, Retry-After %s", b.RetryAfterMS, w.Header().Get("Retry-After"))
		}
	} else if denied {
		var b struct {
			Remaining    int64    `json:"remaining"`
			Limit        int64    `json:"limit"`
			RetryAfterMS int64    `json:"retry_after_ms"`
			Violated     []string `json:"violated-policies"`
		}
		_ = json.Unmarshal(w.Body.Bytes(), &b)
		for _, name := range b.Violated {
			for i, m := range l {
				if m.(httpsfv.Item).Value == name {
					refused = append(refused, i)
				}
			}
		}
		if b.Remaining != remaining || b.Limit != limit || max((b.RetryAfterMS+999)/1000, 1) != hi("Retry-After") {
			t.Errorf("429 body %s against trio %d/%d, Retry-After %s", w.Body, limit, remaining, w.Header().Get("Retry-After"))
		}
	}
	if denied {
		ra := hi("Retry-After")
		if ra > max(reset-at.Unix(), 1) {
			t.Errorf("Retry-After %d after X-RateLimit-Reset %d at %d", ra, reset, at.Unix())
		}
		if len(refused) == 0 {
			t.Errorf("denied, and no rule refused: %s", w.Body)
		}
		for _, i := range refused {
			if ts[i] > ra {
				t.Errorf("Retry-After %d earlier than the t of refusing rule %d: RateLimit %s", ra, i, w.Header().Get("RateLimit"))
			}
		}
	} else if remaining != minR {
		t.Errorf("admitted: X-RateLimit-Remaining %d, least r %d (RateLimit %s)", remaining, minR, w.Header().Get("RateLimit"))
	}
}

// TestHeaderClientsDaySim: a client of examples/config.json's free plan
// (5 a minute, 1,000 a day) that wants 4.5 units a minute, under the
// minute limit, uses up its day and then throttles itself by the
// headers, for three days. One that follows Retry-After or RateLimit's t
// gets the whole day's quota.
func TestHeaderClientsDaySim(t *testing.T) {
	cfg := testConfig(t, func(m map[string]any) {
		m["plans"] = map[string]any{"free": map[string]any{"limits": []any{
			map[string]any{"name": "minute", "limit": 5, "window": "1m"},
			map[string]any{"name": "day", "limit": 1000, "window": "24h"},
		}}}
		m["api_keys"] = map[string]any{}
		simExample(m)
	})
	mkf := func() *fixture { return newFixture(t, cfg, nil) }
	for _, share := range []float64{0.2} {
		for _, pol := range simPolicies {
			t.Run(fmt.Sprintf("cost5=%.1f/%s", share, pol.name), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(3, 4))
				start := t0.Add(-8 * time.Hour) // midnight UTC
				wants := simDemand(rng, start, 3*24*60*5/2, 24*time.Second, 1, share)
				r := req{header: map[string]string{"X-API-Key": "free-key"}}
				if pol.check {
					r = req{method: "POST", path: CheckPath, header: map[string]string{"X-API-Key": "free-key"}}
				}
				st := simRunOpts(t, mkf, r, pol.check, pol.mk(), wants, 10*time.Minute, true)
				days := st.last.Sub(start).Hours() / 24
				t.Logf("sent %d, 429s %d (unasked %d), admitted cost %d in %.2f days (%.0f a day), waits over 10 min %d, overshoot avg %s max %s",
					st.sent, st.denied, st.unasked, st.cost, days, float64(st.cost)/days, st.waits, (st.over / time.Duration(max(st.waits, 1))).Round(time.Second), st.maxOver.Round(time.Second))
				if st.unasked > 0 {
					t.Errorf("%d 429s the headers said would not come", st.unasked)
				}
				// A client that waits a 429's Retry-After, or RateLimit's
				// t (when more quota is back), gets the day's quota.
				// X-RateLimit-Reset and reset_after_ms are when the whole
				// quota is back: a client that waits for them gets about
				// half of it, as README says.
				if perDay := float64(st.cost) / days; (pol.name == "retry-after" || pol.name == "ratelimit") && perDay < 950 {
					t.Errorf("admitted %.0f a day of the day limit's 1,000", perDay)
				}
			})
		}
	}
}
