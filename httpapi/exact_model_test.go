package httpapi

import (
	"encoding/json"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate/config"
)

// The exactness model: an independent account of what every answer of the
// pre-filter and the check API must say, kept beside a real Handler on a
// memory store and compared with it field by field, answer by answer.
//
// It counts admitted cost per identity, limit name, window, scope and
// epoch-aligned bucket, and decides a rule by the README's formula with
// 128-bit products: estimate = floor(previous × overlap) + current, admitted
// iff estimate + cost <= limit. Its waits are found by bisection over the
// nanoseconds (the estimate never rises while nothing arrives), not by the
// closed form of window.wait. What a request leaves counted follows the
// README's "Limits" step: ip_limits first, the plan only if they admit, a
// refused request counted nowhere unless count_denied (and then by every
// rule that decided it, the plan not at all when ip_limits refused). Every
// rule is then reported on the counts the request left: r is limit minus
// the estimate, t the wait until r rises (under count_denied, for a rule
// left short of the request's cost, until that cost fits), and a refused
// request's Retry-After the wait until every rule admits it again.

// xmPeriods are the windows the configurations draw from: ones that divide
// a day and ones that do not (7s, 90s, 7m, 168h, 8784h), the shortest and
// the longest a limit may have.
var xmPeriods = []time.Duration{
	time.Second, 2 * time.Second, 7 * time.Second, 90 * time.Second, time.Minute,
	7 * time.Minute, time.Hour, 24 * time.Hour, 168 * time.Hour, 8784 * time.Hour,
}

// xmRule is one limit of the generated configuration.
type xmRule struct {
	name   string
	limit  int64
	period time.Duration
	local  bool
}

// xmConfig is a generated configuration: ip_limits, the plans free and pro,
// the cost of POST /v1/search, and the switches.
type xmConfig struct {
	ip          []xmRule
	plans       map[string][]xmRule
	searchCost  int64
	countDenied bool
	shadow      bool
	unlistedIP  bool
}

func (c *xmConfig) String() string {
	var b strings.Builder
	f := func(rs []xmRule) {
		for _, r := range rs {
			fmt.Fprintf(&b, " %s=%d/%s", r.name, r.limit, r.period)
			if r.local {
				b.WriteString("(local)")
			}
		}
	}
	b.WriteString("ip:")
	f(c.ip)
	b.WriteString("; free:")
	f(c.plans["free"])
	b.WriteString("; pro:")
	f(c.plans["pro"])
	fmt.Fprintf(&b, "; search costs %d; count_denied %t, shadow %t, unlisted ip %t", c.searchCost, c.countDenied, c.shadow, c.unlistedIP)
	return b.String()
}

// xmGenConfig draws a configuration. Limits are mostly small, so that
// refusals are common; pro may reuse a name of free's, with the same window
// and scope (one counter, two limits) or another window (two counters).
func xmGenConfig(rng *rand.Rand) *xmConfig {
	c := &xmConfig{plans: map[string][]xmRule{}}
	// Limits and costs are scaled up at times, to the largest limit a
	// configuration may hold, where floor(prev × overlap) needs more than
	// 64 bits on the way.
	scale := []int64{1, 1, 1, 1_000_003, 100_000_000_000_007}[rng.IntN(5)]
	rule := func(name string) xmRule {
		r := xmRule{name: name, limit: 1 + rng.Int64N(8), period: xmPeriods[rng.IntN(len(xmPeriods))], local: rng.IntN(3) == 0}
		if rng.IntN(6) == 0 {
			r.limit = 10 + rng.Int64N(40)
		}
		r.limit = min(r.limit*scale, config.MaxLimit)
		return r
	}
	for i := range rng.IntN(3) {
		c.ip = append(c.ip, rule("ip"+strconv.Itoa(i)))
	}
	free := []xmRule{}
	for i := range 1 + rng.IntN(3) {
		free = append(free, rule("r"+strconv.Itoa(i)))
	}
	pro := []xmRule{}
	for i := range 1 + rng.IntN(3) {
		r := rule("p" + strconv.Itoa(i))
		if i < len(free) && rng.IntN(2) == 0 {
			r.name = free[i].name
			if rng.IntN(2) == 0 {
				r.period, r.local = free[i].period, free[i].local
			}
		}
		pro = append(pro, r)
	}
	c.plans["free"], c.plans["pro"] = free, pro
	smallest := int64(1 << 62)
	for _, rs := range [][]xmRule{c.ip, free, pro} {
		for _, r := range rs {
			smallest = min(smallest, r.limit)
		}
	}
	c.searchCost = 1 + rng.Int64N(smallest)
	c.countDenied = rng.IntN(3) == 0
	c.shadow = rng.IntN(5) == 0
	c.unlistedIP = rng.IntN(4) == 0
	return c
}

// config is c as the Handler's configuration.
func (c *xmConfig) config(t *testing.T) *config.Config {
	t.Helper()
	limits := func(rs []xmRule) []any {
		out := []any{}
		for _, r := range rs {
			scope := "shared"
			if r.local {
				scope = "local"
			}
			out = append(out, map[string]any{"name": r.name, "limit": r.limit, "window": r.period.String(), "scope": scope})
		}
		return out
	}
	return testConfig(t, func(m map[string]any) {
		m["plans"] = map[string]any{
			"free": map[string]any{"limits": limits(c.plans["free"])},
			"pro":  map[string]any{"limits": limits(c.plans["pro"])},
		}
		if len(c.ip) > 0 {
			m["ip_limits"] = limits(c.ip)
		}
		m["costs"] = []any{map[string]any{"method": "POST", "path_prefix": "/v1/search", "cost": c.searchCost}}
		m["count_denied"], m["shadow"] = c.countDenied, c.shadow
		if c.unlistedIP {
			m["identity"] = map[string]any{"unlisted_keys": "ip"}
		}
	})
}

// xmKey names one counter: an identity's count of one limit (name, window,
// scope) in one bucket.
type xmKey struct {
	id     string
	name   string
	period time.Duration
	local  bool
	bucket int64
}

// xmModel is the reference: the counts of admitted (or, with count_denied,
// decided) cost, and the newest time the limiter has recorded.
type xmModel struct {
	c      *xmConfig
	counts map[xmKey]int64
	last   int64 // Unix nanoseconds
}

// clock is the time a request read at now is decided at (the README's
// "Clocks"): the newest time recorded when the clock stepped back by up to
// a minute. A time is recorded when it falls in a later millisecond than
// the recorded one (limiter.clockSlack); within that millisecond a request
// is decided at its own time, in the same buckets.
func (m *xmModel) clock(now time.Time) time.Time {
	n := now.UnixNano()
	switch {
	case n < m.last && m.last-n <= int64(time.Minute):
		return time.Unix(0, m.last)
	case n/int64(time.Millisecond) != m.last/int64(time.Millisecond):
		m.last = n
	}
	return now
}

// since makes a's waits count from now, the caller's time, when it was
// decided at a later time (the clock stepped back): zero stays zero.
func (a *xmAnswer) since(step time.Duration) {
	if step <= 0 {
		return
	}
	for _, d := range []*time.Duration{&a.retry, &a.shown.reset, &a.shown.retry} {
		if *d > 0 {
			*d += step
		}
	}
	for i := range a.rules {
		for _, d := range []*time.Duration{&a.rules[i].reset, &a.rules[i].retry, &a.rules[i].next} {
			if *d > 0 {
				*d += step
			}
		}
	}
}

// bucket is floor(t / p) over the Unix nanoseconds, and the time elapsed in
// that bucket.
func xmBucket(t time.Time, p time.Duration) (int64, int64) {
	n := t.UnixNano()
	i := n / int64(p)
	if n%int64(p) < 0 {
		i--
	}
	return i, n - i*int64(p)
}

func (m *xmModel) key(id string, r xmRule, bucket int64) xmKey {
	return xmKey{id, r.name, r.period, r.local, bucket}
}

// estimate is floor(prev × (p - e) / p) + cur at t. The product takes
// 128 bits: a count near the largest limit times a window of a year in
// nanoseconds.
func (m *xmModel) estimate(id string, r xmRule, t time.Time) int64 {
	i, e := xmBucket(t, r.period)
	prev, cur := m.counts[m.key(id, r, i-1)], m.counts[m.key(id, r, i)]
	hi, lo := bits.Mul64(uint64(prev), uint64(int64(r.period)-e))
	w, _ := bits.Div64(hi, lo, uint64(r.period))
	return int64(w) + cur
}

func (m *xmModel) admits(id string, r xmRule, t time.Time, cost int64) bool {
	return m.estimate(id, r, t)+cost <= r.limit
}

func (m *xmModel) add(id string, rs []xmRule, t time.Time, cost int64) {
	for _, r := range rs {
		i, _ := xmBucket(t, r.period)
		m.counts[m.key(id, r, i)] += cost
	}
}

// xmCheck is one group of rules decided on one identity.
type xmCheck struct {
	id    string
	rules []xmRule
}

// waitUntil is the least d >= 0 at which ok(t + d) holds, by bisection:
// ok is false, then true for good, and true two of the longest windows on
// (every count has left by then).
func xmWaitUntil(t time.Time, ok func(time.Time) bool) time.Duration {
	if ok(t) {
		return 0
	}
	lo, hi := int64(0), int64(2*8784*time.Hour)+1
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if ok(t.Add(time.Duration(mid))) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return time.Duration(hi)
}

// xmRuleView is what the answer must say of one rule.
type xmRuleView struct {
	name      string
	limit     int64
	period    time.Duration
	allowed   bool
	remaining int64
	reset     time.Duration // until the estimate is 0
	retry     time.Duration // 0 when allowed: until this rule admits the request again
	// next is RateLimit's t: until more quota is back (remaining rises),
	// or, for a rule that refuses, until it admits if that is sooner
	// (draft-10 §6: no Retry-After earlier than t); 0 when all is left.
	next time.Duration
}

// xmAnswer is what the model expects of one answer.
type xmAnswer struct {
	admitted bool
	rules    []xmRuleView
	shown    xmRuleView    // the rule X-RateLimit-* show
	retry    time.Duration // refused: until every rule admits the request again
}

// view reports every rule of groups on the counts left at t, for a request
// of cost: admitted says whether the request went through.
func (m *xmModel) view(t time.Time, groups []xmCheck, cost int64, admitted bool) xmAnswer {
	a := xmAnswer{admitted: admitted}
	for _, g := range groups {
		for _, r := range g.rules {
			v := xmRuleView{name: r.name, limit: r.limit, period: r.period, allowed: true}
			used := m.estimate(g.id, r, t)
			v.remaining = min(max(r.limit-used, 0), r.limit)
			v.reset = xmWaitUntil(t, func(at time.Time) bool { return m.estimate(g.id, r, at) <= 0 })
			if !admitted {
				v.retry = xmWaitUntil(t, func(at time.Time) bool { return m.admits(g.id, r, at, cost) })
				v.allowed = v.retry == 0
			}
			if v.remaining < r.limit {
				v.next = xmWaitUntil(t, func(at time.Time) bool {
					return r.limit-m.estimate(g.id, r, at) > v.remaining || !v.allowed && m.admits(g.id, r, at, cost)
				})
			}
			if m.c.countDenied && v.remaining < cost && cost <= r.limit {
				// A refused request is counted: t is when this cost
				// fits again, not when one unit is back.
				v.next = xmWaitUntil(t, func(at time.Time) bool { return m.admits(g.id, r, at, cost) })
			}
			a.rules = append(a.rules, v)
		}
	}
	if !admitted {
		// Every rule must admit at once; each admits for good from its own
		// wait on, so the request's wait is the longest, and its rule (the
		// first of the longest) is the one shown.
		a.retry = xmWaitUntil(t, func(at time.Time) bool {
			for _, g := range groups {
				for _, r := range g.rules {
					if !m.admits(g.id, r, at, cost) {
						return false
					}
				}
			}
			return true
		})
		best := -1
		for i, v := range a.rules {
			if !v.allowed && (best < 0 || v.retry > a.rules[best].retry) {
				best = i
			}
		}
		a.shown = a.rules[best]
		return a
	}
	// Admitted: the least remaining; of those, the one whose quota is back
	// last; of those, the first.
	a.shown = a.rules[0]
	for _, v := range a.rules[1:] {
		if v.remaining < a.shown.remaining || v.remaining == a.shown.remaining && v.reset > a.shown.reset {
			a.shown = v
		}
	}
	return a
}

// decide is the README's "Limits" step for a request of cost at t: ip (nil
// for the check API) on the client IP, then plan on id. It counts what the
// request leaves counted and returns what the answer must say.
func (m *xmModel) decide(t time.Time, ip *xmCheck, plan xmCheck, cost int64) xmAnswer {
	all := func(g xmCheck) bool {
		for _, r := range g.rules {
			if !m.admits(g.id, r, t, cost) {
				return false
			}
		}
		return true
	}
	groups := []xmCheck{plan}
	if ip != nil {
		groups = []xmCheck{*ip, plan}
		if !all(*ip) {
			if m.c.countDenied {
				m.add(ip.id, ip.rules, t, cost)
			}
			return m.view(t, groups, cost, false)
		}
		m.add(ip.id, ip.rules, t, cost)
	}
	if all(plan) {
		m.add(plan.id, plan.rules, t, cost)
		return m.view(t, groups, cost, true)
	}
	if m.c.countDenied {
		m.add(plan.id, plan.rules, t, cost)
	} else if ip != nil {
		m.add(ip.id, ip.rules, t, -cost)
	}
	return m.view(t, groups, cost, false)
}

// xmReq is one request of the traffic.
type xmReq struct {
	ipN   int    // client 192.0.2.ipN
	key   string // "", proKey or "unlisted-0"
	post  bool   // POST /v1/search, else GET /api
	check bool   // a check API call for key (never "")
	plan  string // check API: the plan named, or ""
	cost  int64  // check API: the cost
}

func (r xmReq) String() string {
	if r.check {
		return fmt.Sprintf("check key=%s plan=%q cost=%d", r.key, r.plan, r.cost)
	}
	m := "GET /api"
	if r.post {
		m = "POST /v1/search"
	}
	return fmt.Sprintf("%s from .%d key=%q", m, r.ipN, r.key)
}

func (r xmReq) http() req {
	h := req{remote: "192.0.2." + strconv.Itoa(r.ipN) + ":4000"}
	if r.check {
		body := fmt.Sprintf(`{"key":%q,"cost":%d`, r.key, r.cost)
		if r.plan != "" {
			body += fmt.Sprintf(`,"plan":%q`, r.plan)
		}
		h.method, h.path, h.body = http.MethodPost, CheckPath, body+"}"
		return h
	}
	if r.key != "" {
		h.header = map[string]string{"X-API-Key": r.key}
	}
	if r.post {
		h.method, h.path = http.MethodPost, "/v1/search"
	}
	return h
}

// groups returns the model's checks of r: ip_limits (nil for none, and for
// the check API), the plan and its identity, and the cost; ok is false for
// a check API cost above the plan's smallest limit (a 400).
func (m *xmModel) groups(r xmReq) (ip *xmCheck, plan xmCheck, cost int64, ok bool) {
	ipID := "ip:" + strconv.Itoa(r.ipN)
	keyID := "key:" + r.key
	if r.check {
		name := r.plan
		if name == "" {
			name = "free"
			if r.key == proKey {
				name = "pro"
			}
		}
		for _, l := range m.c.plans[name] {
			if r.cost > l.limit {
				return nil, xmCheck{}, 0, false
			}
		}
		return nil, xmCheck{keyID, m.c.plans[name]}, r.cost, true
	}
	cost = 1
	if r.post {
		cost = m.c.searchCost
	}
	if len(m.c.ip) > 0 {
		ip = &xmCheck{ipID, m.c.ip}
	}
	switch {
	case r.key == proKey:
		plan = xmCheck{keyID, m.c.plans["pro"]}
	case r.key != "" && !m.c.unlistedIP:
		plan = xmCheck{keyID, m.c.plans["free"]}
	default:
		plan = xmCheck{ipID, m.c.plans["free"]}
	}
	return ip, plan, cost, true
}

// xmGot is what one answer said.
type xmGot struct {
	status    int
	admitted  bool
	items     string // RateLimit
	limit     string // X-RateLimit-*
	remaining string
	reset     string
	retry     string         // Retry-After
	body      map[string]any // numbers as json.Number
}

// want returns what the answer to a request at t must say, in xmGot's form.
func (a xmAnswer) want(t time.Time, r xmReq, shadow bool) xmGot {
	g := xmGot{status: http.StatusOK, admitted: a.admitted}
	var items []string
	for _, v := range a.rules {
		items = append(items, fmt.Sprintf("%q;r=%d;t=%d", v.name, v.remaining, xmCeil(v.next, time.Second)))
	}
	g.items = strings.Join(items, ", ")
	g.limit = strconv.FormatInt(a.shown.limit, 10)
	g.remaining = strconv.FormatInt(a.shown.remaining, 10)
	reset := t.Add(a.shown.reset)
	g.reset = strconv.FormatInt(xmCeil(time.Duration(reset.UnixNano()), time.Second), 10)
	if !a.admitted && !shadow {
		g.retry = strconv.FormatInt(max(xmCeil(a.retry, time.Second), 1), 10)
		if !r.check {
			g.status = http.StatusTooManyRequests
		}
	}
	if shadow {
		g.admitted = true
	}
	return g
}

// xmCeil is d / unit rounded up, for d >= 0.
func xmCeil(d, unit time.Duration) int64 {
	return int64((d + unit - 1) / unit)
}

// xmRead reads an answer as a client does.
func xmRead(w *httptest.ResponseRecorder, r xmReq) xmGot {
	h := w.Header()
	g := xmGot{status: w.Code, items: h.Get("RateLimit"), limit: h.Get("X-RateLimit-Limit"),
		remaining: h.Get("X-RateLimit-Remaining"), reset: h.Get("X-RateLimit-Reset"), retry: h.Get("Retry-After")}
	g.admitted = w.Code == http.StatusOK
	if r.check || w.Code != http.StatusOK {
		d := json.NewDecoder(w.Body)
		d.UseNumber() // limits and waits past 2^53 would round as float64
		_ = d.Decode(&g.body)
	}
	if r.check {
		g.admitted, _ = g.body["allowed"].(bool)
	}
	return g
}

// xmCompareBody checks the JSON of a 429 or of a check API answer against a.
func xmCompareBody(a xmAnswer, got xmGot, r xmReq, shadow bool) []string {
	var errs []string
	num := func(m map[string]any, k string) int64 {
		n, _ := m[k].(json.Number)
		v, err := n.Int64()
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s %q is no integer", k, n))
		}
		return v
	}
	want := func(what string, got, want int64) {
		if got != want {
			errs = append(errs, fmt.Sprintf("%s %d, want %d", what, got, want))
		}
	}
	retryMS := func(d time.Duration) int64 { return xmCeil(d, time.Millisecond) }
	if !r.check {
		if got.status != http.StatusTooManyRequests {
			return nil
		}
		want("body limit", num(got.body, "limit"), a.shown.limit)
		want("body remaining", num(got.body, "remaining"), a.shown.remaining)
		want("body retry_after_ms", num(got.body, "retry_after_ms"), retryMS(a.retry))
		var violated []string
		for _, v := range a.rules {
			if !v.allowed {
				violated = append(violated, v.name)
			}
		}
		gotV := fmt.Sprint(got.body["violated-policies"])
		if w := fmt.Sprint(xmAny(violated)); gotV != w {
			errs = append(errs, fmt.Sprintf("violated-policies %s, want %s", gotV, w))
		}
		return errs
	}
	want("limit", num(got.body, "limit"), a.shown.limit)
	want("remaining", num(got.body, "remaining"), a.shown.remaining)
	want("reset_after_ms", num(got.body, "reset_after_ms"), retryMS(a.shown.reset))
	if !a.admitted && !shadow {
		want("retry_after_ms", num(got.body, "retry_after_ms"), retryMS(a.retry))
	} else {
		want("retry_after_ms", num(got.body, "retry_after_ms"), 0)
	}
	if p, _ := got.body["policy"].(string); p != a.shown.name {
		errs = append(errs, fmt.Sprintf("policy %q, want %q", p, a.shown.name))
	}
	rules, _ := got.body["rules"].([]any)
	if len(rules) != len(a.rules) {
		return append(errs, fmt.Sprintf("%d rules, want %d", len(rules), len(a.rules)))
	}
	for i, v := range a.rules {
		gr, _ := rules[i].(map[string]any)
		if n, _ := gr["name"].(string); n != v.name {
			errs = append(errs, fmt.Sprintf("rules[%d] %q, want %q", i, n, v.name))
		}
		if al, _ := gr["allowed"].(bool); al != v.allowed {
			errs = append(errs, fmt.Sprintf("rules[%d] allowed %t, want %t", i, al, v.allowed))
		}
		want(fmt.Sprintf("rules[%d] window_s", i), num(gr, "window_s"), int64(v.period/time.Second))
		want(fmt.Sprintf("rules[%d] remaining", i), num(gr, "remaining"), v.remaining)
		want(fmt.Sprintf("rules[%d] reset_after_ms", i), num(gr, "reset_after_ms"), retryMS(v.reset))
		want(fmt.Sprintf("rules[%d] retry_after_ms", i), num(gr, "retry_after_ms"), retryMS(v.retry))
	}
	return errs
}

func xmAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// xmStep moves the clock: not at all (a second request at the same
// instant, which must meet the Remaining the first was told), a little,
// to a boundary of one of the rules (exactly, a nanosecond either side, a
// millisecond after), back (by up to 3 s, or within a millisecond: the
// limiter holds the newest time), or far ahead. (xmRun also sends a refused
// request again at the moments its answer named.)
func xmStep(rng *rand.Rand, c *xmConfig, at time.Time) time.Time {
	switch k := rng.IntN(20); {
	case k < 3:
		return at
	case k < 9:
		return at.Add(time.Duration(rng.Int64N(int64(2 * time.Second))))
	case k < 10:
		return at.Add(-time.Duration(rng.Int64N(int64([]time.Duration{3 * time.Second, time.Millisecond}[rng.IntN(2)]))))
	case k < 14:
		var ps []time.Duration
		for _, rs := range [][]xmRule{c.ip, c.plans["free"], c.plans["pro"]} {
			for _, r := range rs {
				ps = append(ps, r.period)
			}
		}
		p := ps[rng.IntN(len(ps))]
		i, _ := xmBucket(at, p)
		next := time.Unix(0, (i+1)*int64(p))
		if p > 24*time.Hour && rng.IntN(4) != 0 { // a week's end may be far
			return at.Add(time.Duration(rng.Int64N(int64(time.Minute))))
		}
		return next.Add([]time.Duration{0, -1, 1, time.Millisecond}[rng.IntN(4)])
	default:
		return at.Add(time.Duration(rng.Int64N(int64(3 * time.Hour))))
	}
}

// xmGenReq draws a request: from one of two IPs, anonymous, with the pro
// key or an unlisted one; a GET of cost 1, the POST route, or a check API
// call naming a plan or not, of a cost from 0 to one past the smallest
// limit of any plan.
func xmGenReq(rng *rand.Rand, c *xmConfig) xmReq {
	r := xmReq{ipN: 1 + rng.IntN(2)}
	switch rng.IntN(3) {
	case 1:
		r.key = proKey
	case 2:
		r.key = "unlisted-0"
	}
	if rng.IntN(6) == 0 {
		if r.key == "" {
			r.key = proKey
		}
		r.check = true
		if rng.IntN(2) == 0 {
			r.plan = []string{"free", "pro"}[rng.IntN(2)]
		}
		smallest := int64(1 << 62)
		for _, rs := range c.plans {
			for _, l := range rs {
				smallest = min(smallest, l.limit)
			}
		}
		r.cost = rng.Int64N(smallest + 2) // 0, and one past the limit at times
		return r
	}
	r.post = rng.IntN(3) == 0
	return r
}

// TestExactnessModel: for random configurations (ip_limits and plans of one
// to three limits each, windows from 1s to 366 days, shared and local
// scopes, a plan that reuses a name of the other's, count_denied, shadow,
// unlisted keys on the IP) and random traffic (two IPs, anonymous, keyed
// and unlisted clients, routes of cost 1 and more, check API calls with
// costs 0 to past the plan's smallest limit and a plan named or not; the
// clock at rest, moving a little, at and around window boundaries, back by
// up to 3 s, at the moments a refusal named, or far ahead), every answer of a
// Handler on a fixed clock is what the exactness model says: the status,
// RateLimit's r and t for every rule, X-RateLimit-Limit, -Remaining and
// -Reset, Retry-After, and the 429's and check API's JSON numbers. Each of
// accStores is driven (the memory store, a conditional-only store, a
// load-and-add store, a Handler per request).
func TestExactnessModel(t *testing.T) {
	seeds, steps := 25, 150
	for _, st := range accStores {
		t.Run(st.name, func(t *testing.T) {
			denied := 0
			for seed := range uint64(seeds) {
				rng := rand.New(rand.NewPCG(seed, 0x5eed))
				c := xmGenConfig(rng)
				denied += xmRun(t, st, c, rng, steps, seed)
				if t.Failed() {
					return
				}
			}
			t.Logf("%d refusals in %d runs", denied, seeds)
			if denied < seeds*5 {
				t.Errorf("only %d refusals in %d runs: the traffic is too light", denied, seeds)
			}
		})
	}
}

// xmRun drives one configuration and reports how many answers refused.
func xmRun(t *testing.T, st accStore, c *xmConfig, rng *rand.Rand, steps int, seed uint64) int {
	t.Helper()
	run := newAccRun(t, c.config(t), st)
	m := &xmModel{c: c, counts: map[xmKey]int64{}}
	at := t0.Add(time.Duration(rng.Int64N(int64(24 * time.Hour))))
	// back holds the moments the last refusal named (a millisecond before
	// retry_after_ms, retry_after_ms, Retry-After; the earliest first) for its
	// request, refused, which then often comes again at one of them.
	var back []time.Time
	var refused, last xmReq
	var log []string
	denied := 0
	for i := range steps {
		var r xmReq
		r, at, back = xmNext(rng, c, at, back, refused, last, i > 0, xmStep)
		last = r
		run.clock.t = at
		w := run.do(r.http())
		got := xmRead(w, r)
		ip, plan, cost, ok := m.groups(r)
		log = append(log, fmt.Sprintf("#%d +%s %s: %d %s", i, at.Sub(t0), r, w.Code, got.items))
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("seed %d (%s)\n%s\n%s", seed, c, strings.Join(log, "\n"), fmt.Sprintf(format, args...))
		}
		if !ok {
			if w.Code != http.StatusBadRequest {
				fail("cost %d above the plan's smallest limit: %d %s, want 400", cost, w.Code, w.Body)
			}
			continue
		}
		decided := m.clock(at)
		a := m.decide(decided, ip, plan, cost)
		a.since(decided.Sub(at))
		want := a.want(at, r, c.shadow)
		errs := append(xmCompareDecision(got, want), xmCompareNumbers(a, got, want, r, c.shadow)...)
		if len(errs) > 0 {
			fail("%s\n%s", strings.Join(errs, "\n"), w.Body)
		}
		if !a.admitted {
			denied++
			refused = r
			back = xmBack(back, at, a.retry)
		}
	}
	return denied
}

// xmCompareDecision compares the status and the decision of an answer.
func xmCompareDecision(got, want xmGot) []string {
	var errs []string
	if got.status != want.status {
		errs = append(errs, fmt.Sprintf("status %d, want %d", got.status, want.status))
	}
	if got.admitted != want.admitted {
		errs = append(errs, fmt.Sprintf("admitted %t, want %t", got.admitted, want.admitted))
	}
	return errs
}

// xmCompareNumbers compares every number an answer gives: the fields and
// the JSON body.
func xmCompareNumbers(a xmAnswer, got, want xmGot, r xmReq, shadow bool) []string {
	var errs []string
	cmp := func(what, got, want string) {
		if got != want {
			errs = append(errs, fmt.Sprintf("%s %q, want %q", what, got, want))
		}
	}
	cmp("RateLimit", got.items, want.items)
	cmp("X-RateLimit-Limit", got.limit, want.limit)
	cmp("X-RateLimit-Remaining", got.remaining, want.remaining)
	cmp("X-RateLimit-Reset", got.reset, want.reset)
	cmp("Retry-After", got.retry, want.retry)
	return append(errs, xmCompareBody(a, got, r, shadow)...)
}

// xmBack returns, in back's array, the moments a refusal at at with the
// wait retry named: a millisecond before retry_after_ms, retry_after_ms and
// Retry-After, the earliest first.
func xmBack(back []time.Time, at time.Time, retry time.Duration) []time.Time {
	return append(back[:0], at.Add(time.Duration(xmCeil(retry, time.Millisecond)-1)*time.Millisecond),
		at.Add(time.Duration(xmCeil(retry, time.Millisecond))*time.Millisecond),
		at.Add(time.Duration(max(xmCeil(retry, time.Second), 1))*time.Second))
}

// xmNext draws the next request and its time: often the refused one again
// at one of the moments in back (then emptied), or the last one again, or a
// new one, each a step of the clock on.
func xmNext(rng *rand.Rand, c *xmConfig, at time.Time, back []time.Time, refused, last xmReq, again bool,
	step func(*rand.Rand, *xmConfig, time.Time) time.Time) (xmReq, time.Time, []time.Time) {
	switch k := rng.IntN(10); {
	case k < 3 && len(back) > 0 && !back[0].Before(at):
		return refused, back[rng.IntN(len(back))], nil
	case k < 5 && again:
		return last, step(rng, c, at), back
	}
	return xmGenReq(rng, c), step(rng, c, at), back
}
