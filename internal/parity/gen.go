package parity

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/slidegate/slidegate/httpapi"
	"github.com/slidegate/slidegate/kvstore"
)

// Keys the configurations list, and the check API's token.
const (
	ProKey      = "pro-key"          // X-API-Key of plan pro
	ProBearer   = "Bearer pro-token" // Authorization of plan pro
	SplitKey    = "k1,k2"            // plan pro; what X-API-Key: k1 and X-API-Key: k2 on two lines make
	CheckToken  = "check-secret-0123456789"
	AppOrigin   = "https://app.example.com" // in cors_origins
	OtherOrigin = "https://other.example"
)

// T0 is where runs start: not on any window's boundary.
var T0 = time.Date(2026, 11, 22, 9, 47, 30, 250_000_000, time.UTC)

// Config is a configuration runs use: its name, its JSON text, its
// check_token ("" when the check API is open), and whether every side's
// shared store fails as Failing says.
type Config struct {
	Name, Text, CheckToken string
	Outage                 bool
}

// Store returns the shared store a side of c runs on: st, failing as
// Failing says (by clock) when c has an Outage.
func (c Config) Store(st kvstore.Store, clock *Clock) kvstore.Store {
	if c.Outage {
		return Failing(st, clock)
	}
	return st
}

// Configs are the configurations runs use.
//
// limits: ip_limits of both scopes, two plans, route costs, listed keys of
// both headers, listed cors_origins, an upgrade_url; small limits so that
// a sequence of a few dozen requests is denied by each of them.
//
// shadow: shadow mode, count_denied, a check_token, unlisted keys counted
// on the IP, Authorization before X-API-Key, a local plan limit, no
// ip_limits (preflights pass undecided), cors_origins "*".
//
// counted: enforced count_denied and on_store_error "deny", with a shared
// store in an Outage; ip_limits and plans of both scopes, so that a refused
// request's counts are kept where the store answers and the local rules
// hold while it does not.
//
// outage: limits of both scopes on a shared store in an Outage, under
// on_store_error "allow": the local rules still deny, the shared ones let
// requests through marked error-allowed. Both configurations with an
// Outage count denied requests, which turns the deny cache off: with it,
// the local server and the Lambda answer an identity they know is blocked
// from memory, as a Worker isolate answers from the counts it holds,
// which a store failing every call, as Failing's does, cannot model.
func Configs() []Config {
	keys := fmt.Sprintf(`{%q: "pro", %q: "pro", %q: "pro"}`,
		httpapi.HashKey(ProKey), httpapi.HashKey(ProBearer), httpapi.HashKey(SplitKey))
	return []Config{{
		Name: "limits", Text: `{
  "plans": {
    "free": {"limits": [{"name": "minute", "limit": 6, "window": "1m"}, {"name": "hour", "limit": 20, "window": "1h"}],
             "upgrade_url": "https://example.com/upgrade"},
    "pro":  {"limits": [{"name": "minute", "limit": 12, "window": "1m"}]}
  },
  "default_plan": "free",
  "api_keys": ` + keys + `,
  "ip_limits": [{"name": "ip-burst", "limit": 4, "window": "2s", "scope": "local"},
                {"name": "ip-minute", "limit": 30, "window": "1m"}],
  "costs": [{"method": "POST", "path_prefix": "/v1/search", "cost": 3},
            {"method": "GET", "path_prefix": "/v1/items/", "cost": 2}],
  "cors_origins": ["` + AppOrigin + `"]
}`,
	}, {
		Name: "shadow", CheckToken: CheckToken, Text: `{
  "plans": {
    "free": {"limits": [{"name": "burst", "limit": 3, "window": "1s", "scope": "local"}, {"name": "minute", "limit": 5, "window": "1m"}]},
    "pro":  {"limits": [{"name": "minute", "limit": 10, "window": "1m"}]}
  },
  "default_plan": "free",
  "api_keys": ` + keys + `,
  "identity": {"headers": ["Authorization", "X-API-Key"], "unlisted_keys": "ip"},
  "costs": [{"method": "DELETE", "path_prefix": "/", "cost": 2}],
  "count_denied": true,
  "shadow": true,
  "check_token": "` + CheckToken + `",
  "cors_origins": ["*"]
}`,
	}, {
		Name: "counted", Outage: true, Text: `{
  "plans": {
    "free": {"limits": [{"name": "burst", "limit": 3, "window": "1s", "scope": "local"}, {"name": "minute", "limit": 6, "window": "1m"}],
             "upgrade_url": "https://example.com/upgrade"},
    "pro":  {"limits": [{"name": "minute", "limit": 12, "window": "1m"}, {"name": "hour", "limit": 40, "window": "1h"}]}
  },
  "default_plan": "free",
  "api_keys": ` + keys + `,
  "ip_limits": [{"name": "ip-burst", "limit": 5, "window": "2s", "scope": "local"},
                {"name": "ip-minute", "limit": 30, "window": "1m"}],
  "costs": [{"method": "POST", "path_prefix": "/v1/search", "cost": 3}],
  "count_denied": true,
  "on_store_error": "deny",
  "cors_origins": ["` + AppOrigin + `"]
}`,
	}, {
		Name: "outage", Outage: true, Text: `{
  "plans": {
    "free": {"limits": [{"name": "minute", "limit": 6, "window": "1m"}, {"name": "second", "limit": 2, "window": "1s", "scope": "local"}]},
    "pro":  {"limits": [{"name": "minute", "limit": 12, "window": "1m"}]}
  },
  "default_plan": "free",
  "api_keys": ` + keys + `,
  "ip_limits": [{"name": "ip-burst", "limit": 4, "window": "2s", "scope": "local"},
                {"name": "ip-minute", "limit": 30, "window": "1m"}],
  "costs": [{"method": "GET", "path_prefix": "/v1/items/", "cost": 2}],
  "count_denied": true,
  "cors_origins": ["` + AppOrigin + `"]
}`,
	}}
}

// Options shape what Generate draws.
type Options struct {
	// SplitKeys sends keys on several header lines (X-API-Key: k1 and
	// X-API-Key: k2), which the README says are the key "k1,k2".
	SplitKeys bool
	// StepsBack moves the clock back now and then, as an NTP correction
	// does: 400 ms, across a boundary of the short windows at times.
	StepsBack bool
	// PlanOverrides sends check requests that name a plan other than the
	// key's own in api_keys: the key is then judged under two rule sets
	// that share a limit's name and window.
	PlanOverrides bool
	// CheckToken is sent, in the forms the check API takes and some it
	// refuses, with check requests.
	CheckToken string
	// UnicodeSpace sends keys with what an origin may take for white
	// space around them (spaceKeys, spaceChecks): Unicode's, U+FEFF, a
	// lone byte 0xA0 or 0x85. A Worker's origin gets such a key header as
	// it came, the others' trimmed, and a Worker counts a lone byte as
	// U+FFFD: its tests must normalise the one and model the other.
	UnicodeSpace bool
}

// overrides are check bodies that name a plan other than the key's own.
var overrides = []string{
	`{"key": "` + ProKey + `", "plan": "free", "cost": 3}`, `{"key": "` + ProKey + `", "plan": "free", "cost": 0}`,
}

// Clients are the addresses requests come from.
var Clients = []netip.Addr{
	netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.3"), netip.MustParseAddr("127.0.0.4"),
}

var (
	// paths of proxied requests: cost routes in several spellings (empty
	// and dot segments, which the pre-filter cleans before pricing),
	// escapes that must reach the origin as sent, and the origin's
	// special answers.
	paths = []string{
		"/v1/items", "/v1/items/42", "/v1/items/", "/v1//items/.", "/v1/search", "//v1/search",
		"/v1/x/../search", "/v1/search%2Fsub", "/files/a%2Fb", "/files/%41%42", "/notes/100%25",
		"/caf%C3%A9", "/a;b=c/d:e@f", "/%7Euser/", "/", "/origin/limits", "/origin/cors",
		"/origin/cookie", "/origin/204", "/origin/429",
	}
	queries = []string{
		"", "", "", "a=1&b=2", "q=a%20b&q=c", "p=a+b", "flag&empty=", "x=1;y=2", "bad=%zz&ok=1", "ids=1,2,3",
	}
	// steps are mostly short, so that limits fill; jumps cross windows of
	// every length configured.
	steps = []time.Duration{
		0, 0, 0, 0, 0, time.Millisecond, 10 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond,
		300 * time.Millisecond, 300 * time.Millisecond, 900 * time.Millisecond, time.Second, 2500 * time.Millisecond,
	}
	jumps       = []time.Duration{7 * time.Second, 20 * time.Second, 61 * time.Second, time.Hour}
	checkBodies = []string{
		`{"key": "` + ProKey + `"}`, `{"key": "u1", "cost": 2}`, `{"key": "u1", "cost": 0}`,
		`{"key": "x", "plan": "nope"}`,
		`{"key": 1}`, `{"key": "a", "key": "b"}`, `{"key": "u2", "cost": -1}`, `{"key": "u2", "cost": 1.5}`,
		`{"key": "u2", "extra": true}`, `{`, ``, "\ufeff" + `{"key": "u2"}`, `[]`,
		`{"key": "` + strings.Repeat("z", 5000) + `"}`,
		"{\"key\": \"\xff\"}", `{"key": "u2", "cost": 99999999999999999999}`, `{"key": "u2", "cost": 4}`,
		`{"key": "u2", "plan": null, "cost": null}`, `{"key": "u2", "cost": 2.0}`, `{"key": "\u0000"}`,
		`{"key": "\ud800"}`, `{"key": "u3", "cost": 1}` + "\n\n", `{"key": {"a": 1, "a": 2}}`,
	}
)

// Generate draws n requests from seed: proxied requests of every method
// with and without keys, preflights and OPTIONS that are not, check API
// calls, health checks.
func Generate(seed uint64, n int, o Options) []Request {
	g := gen{rand.New(rand.NewPCG(seed, 0x5eed)), o}
	reqs := make([]Request, n)
	for i := range reqs {
		r := &reqs[i]
		r.Client = Clients[g.r.IntN(len(Clients))]
		r.Step = steps[g.r.IntN(len(steps))]
		switch k := g.r.IntN(60); {
		case k < 2:
			r.Step = jumps[g.r.IntN(len(jumps))]
		case k == 2 && g.o.StepsBack:
			r.Step = -400 * time.Millisecond
		}
		switch k := g.r.IntN(20); {
		case k < 12:
			g.proxied(r)
		case k < 14:
			g.preflight(r)
		case k < 19:
			g.check(r)
		default:
			r.Method = []string{http.MethodGet, http.MethodHead, http.MethodPost}[g.r.IntN(3)]
			r.Target = httpapi.HealthPath
		}
	}
	return reqs
}

type gen struct {
	r *rand.Rand
	o Options
}

func (g *gen) one(xs []string) string { return xs[g.r.IntN(len(xs))] }

func (g *gen) proxied(r *Request) {
	r.Method = g.one([]string{"GET", "GET", "GET", "GET", "HEAD", "POST", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"})
	r.Target = g.one(paths)
	if q := g.one(queries); q != "" {
		r.Target += "?" + q
	}
	g.key(r)
	if g.r.IntN(4) == 0 {
		r.Header = append(r.Header, Field{"Origin", g.one([]string{AppOrigin, OtherOrigin})})
	}
	if g.r.IntN(4) == 0 {
		r.Header = append(r.Header, Field{"Cookie", "a=1; b=2"})
	}
	if g.r.IntN(4) == 0 {
		r.Header = append(r.Header, Field{"X-List", "x, y"}, Field{"X-List", "z"})
	}
	if g.r.IntN(6) == 0 {
		// Forged: the peer is no trusted proxy.
		r.Header = append(r.Header, Field{"X-Forwarded-For", "198.51.100.9"}, Field{"X-Real-IP", "198.51.100.9"})
	}
	if r.Method == "POST" || r.Method == "PUT" || r.Method == "PATCH" {
		r.Header = append(r.Header, Field{"Content-Type", "application/json"})
		r.Body = []byte(`{"q":"sliding windows","n":3}`)
		r.Chunked = g.r.IntN(3) == 0
	}
}

// keys are the key headers a request may carry: one or two of the
// configured headers, listed and unlisted keys, and headers that are no
// key. Nil entries send none.
var keys = [][]Field{
	{{"X-API-Key", ProKey}},
	{{"X-API-Key", ProKey}},
	{{"X-API-Key", "u1"}},
	{{"X-Api-Key", "u2"}},
	{{"Authorization", ProBearer}},
	// Another key: the whole value is hashed, scheme and case included.
	{{"Authorization", "bearer pro-token"}},
	{{"X-API-Key", "K,a"}},
	// Not a key header; an origin reading headers CGI-style would take it
	// for one, so it must not reach the origin.
	{{"X_API_KEY", ProKey}},
	{{"X-API-Key", ""}, {"Authorization", ProBearer}},
	{{"X-API-Key", "u1"}, {"Authorization", ProBearer}},
	nil, nil, nil,
}

// spaceKeys are key headers with white space around the key that is not
// HTTP's (README, "How a request is decided"): every platform counts the
// key within (spelled with a Unicode space after its scheme, "Bearer
// pro-token"), and a value of nothing else is no key. A Worker keeps a lone
// byte 0xA0 or 0x85 as U+FFFD, which is part of its key: those keys are
// sent in one spelling each and are used nowhere else, so that the
// Worker's client "lone\ufffd" gets the requests the others' "lone" gets,
// and their counts stay comparable.
var spaceKeys = [][]Field{
	{{"X-API-Key", ProKey + "\u00a0"}},
	{{"X-API-Key", "\u3000" + ProKey}},
	{{"X-API-Key", ProKey + "\ufeff"}},
	{{"X-API-Key", "\ufeffu2"}},
	{{"Authorization", "\u2028" + ProBearer + "\u00a0"}},
	{{"Authorization", "Bearer\u3000pro-token"}},
	{{"X-API-Key", "lone\xa0"}},
	{{"X-API-Key", "\x85nel"}},
	{{"X-API-Key", "\u00a0\u3000"}, {"Authorization", ProBearer}},
}

// spaceChecks are check bodies whose key has Unicode white space around
// it (counted as the key within), or nothing else (a 400 naming key).
var spaceChecks = []string{
	`{"key": "\u00a0` + OutageKey + `\u3000", "cost": 2}`, `{"key": "` + ProKey + `\ufeff"}`, `{"key": "\u2028"}`,
}

// splitKey is SplitKey sent on two lines.
var splitKey = []Field{{"X-API-Key", "k1"}, {"X-API-Key", "k2"}}

// key adds a key header, or none, or one that is not a key.
func (g *gen) key(r *Request) {
	ks := keys[g.r.IntN(len(keys))]
	if ks == nil && g.o.SplitKeys && g.r.IntN(3) == 0 {
		ks = splitKey
	}
	if g.o.UnicodeSpace && g.r.IntN(4) == 0 {
		ks = spaceKeys[g.r.IntN(len(spaceKeys))]
	}
	r.Header = append(r.Header, ks...)
}

// preflight draws an OPTIONS shaped like a browser's preflight, or like
// one but with a key or a body (counted like any request).
func (g *gen) preflight(r *Request) {
	r.Method = http.MethodOptions
	r.Target = g.one([]string{"/v1/items", "/v1/search", "/origin/cors"})
	r.Header = append(r.Header,
		Field{"Origin", g.one([]string{AppOrigin, OtherOrigin})},
		Field{"Access-Control-Request-Method", g.one([]string{"POST", "DELETE"})},
		Field{"Access-Control-Request-Headers", "x-api-key, content-type"})
	switch g.r.IntN(5) {
	case 0:
		r.Header = append(r.Header, Field{"X-API-Key", ProKey})
	case 1:
		r.Body = []byte("upload")
		r.Chunked = g.r.IntN(2) == 0
	}
}

func (g *gen) check(r *Request) {
	r.Method = http.MethodPost
	if g.r.IntN(10) == 0 {
		r.Method = g.one([]string{"GET", "PUT"})
	}
	r.Target = httpapi.CheckPath
	r.Body = []byte(g.one(checkBodies))
	if g.o.PlanOverrides && g.r.IntN(4) == 0 {
		r.Body = []byte(g.one(overrides))
	}
	if g.o.UnicodeSpace && g.r.IntN(5) == 0 {
		r.Body = []byte(g.one(spaceChecks))
	}
	r.Chunked = g.r.IntN(5) == 0
	if r.Chunked || len(r.Body) > 0 {
		r.Header = append(r.Header, Field{"Content-Type", "application/json"})
	}
	if t := g.o.CheckToken; t != "" {
		switch g.r.IntN(7) {
		case 0, 1, 2:
			r.Header = append(r.Header, Field{"Authorization", "Bearer " + t})
		case 3:
			r.Header = append(r.Header, Field{"Authorization", "bEaReR   " + t})
		case 4:
			r.Header = append(r.Header, Field{"Authorization", "Bearer wrong"})
		case 5:
			// Refused everywhere: the Lambda and the Worker get the lines
			// joined, which is no token.
			r.Header = append(r.Header, Field{"Authorization", "Bearer " + t}, Field{"Authorization", "Bearer " + t})
		}
	}
}
