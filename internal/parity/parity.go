package parity

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slidegate/slidegate/config"
	"github.com/slidegate/slidegate/httpapi"
	"github.com/slidegate/slidegate/kvstore/memstore"
)

// Host is the name clients address the front end by (the Host header of
// the local server's requests and of the Worker's URL).
const Host = "api.example.test"

// OriginHost stands for an origin's own host and port in Seen.Host.
const OriginHost = "(origin)"

// UserAgent is every request's User-Agent. A client that sends none gets
// whatever the front end's HTTP client adds on the way to the origin
// (Go's transport adds its own unless told not to; fetch may add another),
// which says nothing about slidegate.
const UserAgent = "parity-test/1"

// Field is one header line as the client sends it.
type Field struct{ Name, Value string }

// Request is one client request, as it goes on the wire.
type Request struct {
	Method string
	// Target is the request-target: an escaped path and, after "?", the
	// query, as the client sends them.
	Target string
	// Header holds the client's lines in order; a name may repeat. Host,
	// User-Agent and the body's framing are added when it is sent.
	Header []Field
	Body   []byte
	// Chunked sends the body with Transfer-Encoding: chunked (even an
	// empty one), else with a Content-Length when it has one.
	Chunked bool
	// Client is the address the request comes from: a loopback address,
	// so that the local server sees it as its socket peer.
	Client netip.Addr
	// Step moves the clock before the request is sent.
	Step time.Duration
}

// Path and Query split Target at its first "?".
func (r *Request) Path() string  { p, _, _ := strings.Cut(r.Target, "?"); return p }
func (r *Request) Query() string { _, q, _ := strings.Cut(r.Target, "?"); return q }

// Values returns the values of the client's lines named name, in order.
func (r *Request) Values(name string) []string {
	var vs []string
	for _, f := range r.Header {
		if strings.EqualFold(f.Name, name) {
			vs = append(vs, f.Value)
		}
	}
	return vs
}

// Wire is the request as the local server receives it.
func (r *Request) Wire() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: %s\r\n", r.Method, r.Target, Host, UserAgent)
	for _, f := range r.Header {
		fmt.Fprintf(&b, "%s: %s\r\n", f.Name, f.Value)
	}
	switch {
	case r.Chunked:
		b.WriteString("Transfer-Encoding: chunked\r\n\r\n")
		if len(r.Body) > 0 {
			fmt.Fprintf(&b, "%x\r\n%s\r\n", len(r.Body), r.Body)
		}
		b.WriteString("0\r\n\r\n")
	case len(r.Body) > 0:
		fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n", len(r.Body))
		b.Write(r.Body)
	default:
		b.WriteString("\r\n")
	}
	return b.Bytes()
}

// String shows the request as a reproduction: the client, the clock step
// and the bytes sent.
func (r *Request) String() string {
	return fmt.Sprintf("from %s after a step of %s:\n%s", r.Client, r.Step, r.Wire())
}

// Clock is the one clock every platform of a run reads. It is safe for
// concurrent use: handlers read it on their own goroutines.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock standing at t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock by d (backwards when d < 0).
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// Response is what the client got.
type Response struct {
	Status int
	Header http.Header // canonical names
	Body   []byte
}

// Seen is what the origin received of one request.
type Seen struct {
	Method string
	// Path and Query are the request-target's as they came on the wire.
	Path, Query string
	Host        string // OriginHost: the origin's own host and port
	Header      http.Header
	Body        []byte
}

// Outcome is one request's result on one platform.
type Outcome struct {
	Response
	Seen *Seen // nil: nothing reached the origin
}

// Origin is a recording origin on a loopback port. Its answer depends on
// the path (see ServeHTTP), never on the platform in front of it.
type Origin struct {
	URL *url.URL
	mu  sync.Mutex
	got []Seen
}

// NewOrigin starts an origin, closed when t ends.
func NewOrigin(t testing.TB) *Origin {
	o := &Origin{}
	srv := httptest.NewServer(o)
	t.Cleanup(srv.Close)
	o.URL, _ = url.Parse(srv.URL)
	return o
}

// Take returns what reached the origin since the last Take: nil when
// nothing did, an error when more than one request did.
func (o *Origin) Take() (*Seen, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	got := o.got
	o.got = nil
	switch len(got) {
	case 0:
		return nil, nil
	case 1:
		return &got[0], nil
	}
	return nil, fmt.Errorf("parity: %d requests reached the origin for one request", len(got))
}

// ServeHTTP records r and answers by r's path:
//
//	/origin/limits  an origin that limits too: its own X-RateLimit trio
//	                (1 remaining: fewer than slidegate's, so it is kept)
//	                and RateLimit items
//	/origin/cors    Access-Control-Allow-Origin: *
//	/origin/cookie  two Set-Cookie, one with a comma in its Expires
//	/origin/204     204 No Content
//	/origin/429     the origin's own 429 with Retry-After
//	anything else   200 text/plain
func (o *Origin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	path, query, _ := strings.Cut(r.RequestURI, "?")
	o.mu.Lock()
	host := r.Host
	if host == o.URL.Host {
		host = OriginHost // each side has an origin, on a port of its own
	}
	o.got = append(o.got, Seen{Method: r.Method, Path: path, Query: query, Host: host, Header: r.Header.Clone(), Body: body})
	o.mu.Unlock()
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Origin", "yes")
	status := http.StatusOK
	switch p := r.URL.Path; {
	case strings.HasPrefix(p, "/origin/limits"):
		h.Set("X-RateLimit-Limit", "1000")
		h.Set("X-RateLimit-Remaining", "1")
		h.Set("X-RateLimit-Reset", "1795340999")
		h.Add("RateLimit", `"origin-hour";r=1;t=600`)
		h.Add("RateLimit-Policy", `"origin-hour";q=1000;w=3600`)
	case strings.HasPrefix(p, "/origin/cors"):
		h.Set("Access-Control-Allow-Origin", "*")
	case strings.HasPrefix(p, "/origin/cookie"):
		h.Add("Set-Cookie", "session=abc123; Path=/; Expires=Wed, 21 Oct 2037 07:28:00 GMT; HttpOnly")
		h.Add("Set-Cookie", "theme=dark")
	case strings.HasPrefix(p, "/origin/204"):
		status = http.StatusNoContent
	case strings.HasPrefix(p, "/origin/429"):
		h.Set("Retry-After", "7")
		status = http.StatusTooManyRequests
	}
	w.WriteHeader(status)
	if status != http.StatusNoContent {
		_, _ = io.WriteString(w, "hello from the origin\n")
	}
}

// Side is one platform under test.
type Side struct {
	Name string
	// Do sends a request through the platform and returns its outcome,
	// what reached the platform's origin included.
	Do func(*Request) (Outcome, error)
}

// Normaliser removes from the outcomes of one request what a platform
// documents as its own (a front end's header, a URL parser's rewrite),
// before they are compared: ref is the reference side's, got the other's.
type Normaliser func(r *Request, ref, got *Outcome)

// Local builds the local server's stack as `slidegate serve --store
// memory --origin URL` does (cmd/slidegate/run.go's serve, with the
// clock injected): httpapi in front of httpapi.NewProxy, the proxy made
// full duplex, served by net/http on a loopback port, with its own
// recording origin. The configuration text is what --config would hold.
func Local(t testing.TB, cfgText string, clock *Clock) Side {
	t.Helper()
	return LocalOf(t, Config{Text: cfgText}, clock)
}

// LocalOf is Local for the configuration c, on its Store.
func LocalOf(t testing.TB, c Config, clock *Clock) Side {
	t.Helper()
	cfg, err := config.Parse([]byte(c.Text))
	if err != nil {
		t.Fatalf("parity: %v", err)
	}
	origin := NewOrigin(t)
	log := slog.New(slog.DiscardHandler)
	proxy := httpapi.NewProxy(origin.URL, log, cfg.Identity.Prefixes())
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).EnableFullDuplex()
		proxy.ServeHTTP(w, r)
	})
	const maxIdentities = 1_000_000 // serve's default
	h, err := httpapi.New(httpapi.Options{
		Config: cfg, Store: c.Store(memstore.NewLimited(maxIdentities), clock), Local: memstore.NewLimited(maxIdentities),
		Next: next, Now: clock.Now, Logger: log,
	})
	if err != nil {
		t.Fatalf("parity: %v", err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Config.MaxHeaderBytes = 64 << 10
	srv.Start()
	t.Cleanup(srv.Close)
	addr := srv.Listener.Addr().String()
	return Side{Name: "local", Do: func(r *Request) (Outcome, error) {
		res, err := sendWire(addr, r)
		if err != nil {
			return Outcome{}, err
		}
		seen, err := origin.Take()
		return Outcome{Response: res, Seen: seen}, err
	}}
}

// sendWire sends r over a connection of its own from r.Client and reads
// the answer.
func sendWire(addr string, r *Request) (Response, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: r.Client.AsSlice()}, Timeout: 10 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return Response{}, fmt.Errorf("parity: dial from %s: %w", r.Client, err)
	}
	defer c.Close()
	// A bound on a stuck exchange, not a timed assertion.
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(r.Wire()); err != nil {
		return Response{}, fmt.Errorf("parity: write: %w", err)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: r.Method})
	if err != nil {
		return Response{}, fmt.Errorf("parity: read answer: %w", err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return Response{}, fmt.Errorf("parity: read body: %w", err)
	}
	return Response{Status: res.StatusCode, Header: res.Header, Body: body}, nil
}

// Stats counts what a run exercised, so that a test can insist that its
// sequences reached the interesting states (denials, the origin, the
// check API), not only that the platforms agreed.
type Stats struct {
	Requests  int
	Status    map[int]int // by status code, on the reference side
	Proxied   int         // requests that reached the origin
	Preflight int         // preflights decided on ip_limits or passed undecided
	Checks    int         // check API answers of 200
	Denied    int         // 429s of the pre-filter (not the origin's)
	Shadowed  int         // answers marked Slidegate-Shadow: denied
	// StoreErrors counts answers marked Slidegate-Store (error-allowed
	// or error-denied).
	StoreErrors int
}

// Run sends reqs in order to a and b, advancing clock by each request's
// Step first, and fails t at the first request on which they disagree
// once normalised by norm (nil: no more than Diff's own normalisations);
// the rest of the sequence would run on diverged counters. It returns
// what the reference side, a, went through.
func Run(t testing.TB, clock *Clock, reqs []Request, a, b Side, norm Normaliser) Stats {
	t.Helper()
	st := Stats{Status: map[int]int{}}
	for i := range reqs {
		r := &reqs[i]
		clock.Advance(r.Step)
		oa, err := a.Do(r)
		if err != nil {
			t.Fatalf("request %d on %s: %v\n%s", i, a.Name, err, r)
		}
		ob, err := b.Do(r)
		if err != nil {
			t.Fatalf("request %d on %s: %v\n%s", i, b.Name, err, r)
		}
		if norm != nil {
			norm(r, &oa, &ob)
		}
		if diffs := Diff(r, oa, ob); len(diffs) > 0 {
			t.Errorf("request %d (clock %s): %s and %s disagree:\n\t%s\nrequest %s",
				i, clock.Now().Format(time.RFC3339Nano), a.Name, b.Name, strings.Join(diffs, "\n\t"), r)
			return st
		}
		st.count(r, oa)
	}
	return st
}

func (st *Stats) count(r *Request, o Outcome) {
	st.Requests++
	st.Status[o.Status]++
	if o.Seen != nil {
		st.Proxied++
	}
	if o.Header.Get(httpapi.ShadowHeader) != "" {
		st.Shadowed++
	}
	if o.Header.Get(httpapi.StoreHeader) != "" {
		st.StoreErrors++
	}
	switch {
	case r.Path() == httpapi.CheckPath && o.Status == http.StatusOK:
		st.Checks++
	case o.Status == http.StatusTooManyRequests && o.Seen == nil:
		st.Denied++
	case r.Method == http.MethodOptions && len(r.Values("Access-Control-Request-Method")) > 0 && o.Seen != nil:
		st.Preflight++
	}
}

// Add adds o's counts to st's.
func (st *Stats) Add(o Stats) {
	if st.Status == nil {
		st.Status = map[int]int{}
	}
	for k, n := range o.Status {
		st.Status[k] += n
	}
	st.Requests += o.Requests
	st.Proxied += o.Proxied
	st.Preflight += o.Preflight
	st.Checks += o.Checks
	st.Denied += o.Denied
	st.Shadowed += o.Shadowed
	st.StoreErrors += o.StoreErrors
}

// CheckCoverage fails t when a run of the configuration named cfg (see
// Configs) never reached the states the comparison is about: the origin,
// the check API's answers and refusals, preflights, and the configuration's
// own denials (429s, or shadow mode's marks and the check token's 401s).
func CheckCoverage(t testing.TB, cfg string, st Stats) {
	t.Helper()
	for what, n := range map[string]int{
		"requests at the origin": st.Proxied, "check answers": st.Checks, "preflights": st.Preflight,
		"400s": st.Status[http.StatusBadRequest], "405s": st.Status[http.StatusMethodNotAllowed],
	} {
		if n == 0 {
			t.Errorf("no %s in %d requests", what, st.Requests)
		}
	}
	switch cfg {
	case "limits":
		if st.Denied == 0 {
			t.Errorf("no denial in %d requests", st.Requests)
		}
	case "shadow":
		if st.Shadowed == 0 || st.Status[http.StatusUnauthorized] == 0 {
			t.Errorf("%d shadow denials, %d 401s in %d requests; want some of each", st.Shadowed, st.Status[http.StatusUnauthorized], st.Requests)
		}
	case "counted":
		if st.Denied == 0 || st.Status[http.StatusServiceUnavailable] == 0 {
			t.Errorf("%d denials, %d 503s in %d requests; want some of each", st.Denied, st.Status[http.StatusServiceUnavailable], st.Requests)
		}
	case "outage":
		if st.Denied == 0 || st.StoreErrors == 0 {
			t.Errorf("%d denials, %d answers allowed on a store error in %d requests; want some of each", st.Denied, st.StoreErrors, st.Requests)
		}
	default:
		t.Errorf("parity: no configuration %q", cfg)
	}
}

// Sequences and Length are how many sequences of how many requests RunAll
// sends for each configuration.
const (
	Sequences = 4
	Length    = 100
)

// RunAll runs, for each of Configs and each seed, a generated sequence
// (Generate with o, and the configuration's check token) against the local
// server and the side build returns for the same configuration and clock,
// each in a subtest, and checks that each configuration's sequences
// covered what CheckCoverage asks for. build must run its side's shared
// store as c.Store returns it.
func RunAll(t *testing.T, o Options, build func(t *testing.T, c Config, clock *Clock) Side, norm Normaliser) {
	for _, c := range Configs() {
		t.Run(c.Name, func(t *testing.T) {
			var total Stats
			for seed := range uint64(Sequences) {
				t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
					clock := NewClock(T0)
					o := o
					o.CheckToken = c.CheckToken
					reqs := Generate(seed, Length, o)
					total.Add(Run(t, clock, reqs, LocalOf(t, c, clock), build(t, c, clock), norm))
				})
			}
			CheckCoverage(t, c.Name, total)
		})
	}
}
