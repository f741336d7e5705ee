package main

import (
	"bufio"
	"context"
	"errors"
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
	"github.com/slidegate/slidegate/internal/dynalite"
	"github.com/slidegate/slidegate/internal/parity"
	"github.com/slidegate/slidegate/internal/testenv"
	"github.com/slidegate/slidegate/kvstore"
	"github.com/slidegate/slidegate/kvstore/dynamostore"
	"github.com/slidegate/slidegate/kvstore/memstore"
)

// diffOrigin is an origin whose answers exercise what payload format 2.0
// carries otherwise than HTTP/1.1 (parity.Origin's always have a type):
// no Content-Type, binary and compressed bodies, repeated fields and
// Set-Cookie, a connection it breaks. It records what reached it.
type diffOrigin struct {
	url *url.URL
	mu  sync.Mutex
	got []parity.Seen
}

func newDiffOrigin(t *testing.T) *diffOrigin {
	t.Helper()
	o := &diffOrigin{}
	srv := httptest.NewServer(o)
	t.Cleanup(srv.Close)
	o.url, _ = url.Parse(srv.URL)
	return o
}

// take returns what reached the origin since the last take (nil:
// nothing). Go's transport sends an idempotent request again when the
// origin closed a reused connection without answering (/fail): the last
// is returned, with the number of arrivals in its X-Diff-Arrivals field,
// compared as the others are.
func (o *diffOrigin) take() (*parity.Seen, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	got := o.got
	o.got = nil
	if len(got) == 0 {
		return nil, nil
	}
	last := &got[len(got)-1]
	last.Header.Set("X-Diff-Arrivals", fmt.Sprint(len(got)))
	return last, nil
}

func (o *diffOrigin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	path, query, _ := strings.Cut(r.RequestURI, "?")
	o.mu.Lock()
	o.got = append(o.got, parity.Seen{Method: r.Method, Path: path, Query: query, Host: parity.OriginHost, Header: r.Header.Clone(), Body: body})
	o.mu.Unlock()
	h := w.Header()
	switch r.URL.Path {
	case "/untyped/html": // no Content-Type, as origins outside Go may send
		h["Content-Type"] = nil // else the origin's own server sniffs one
		_, _ = io.WriteString(w, "<!DOCTYPE html><html><body>hello</body></html>")
	case "/untyped/png":
		h["Content-Type"] = nil
		_, _ = io.WriteString(w, "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01")
	case "/untyped/gzip":
		h["Content-Type"] = nil
		h.Set("Content-Encoding", "gzip")
		_, _ = w.Write(testenv.Gzip("hello"))
	case "/untyped/204":
		h["Content-Type"] = nil
		w.WriteHeader(http.StatusNoContent)
	case "/bin":
		h.Set("Content-Type", "application/octet-stream")
		b := make([]byte, 256)
		for i := range b {
			b[i] = byte(i)
		}
		_, _ = w.Write(b)
	case "/multi":
		h.Add("Set-Cookie", "a=1; Path=/; Expires=Wed, 21 Oct 2037 07:28:00 GMT")
		h.Add("Set-Cookie", "b=2; HttpOnly")
		h.Add("Vary", "Accept")
		h.Add("Vary", "Accept-Encoding")
		h.Add("Cache-Control", "private")
		h.Add("Cache-Control", "max-age=60")
		h.Add("Link", "</a.css>; rel=preload")
		h.Add("Link", "</b.js>; rel=preload")
		h.Set("Expires", "Wed, 21 Oct 2037 07:28:00 GMT")
		h.Set("Access-Control-Allow-Origin", "*")
		h.Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "multi\n")
	case "/fail":
		if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
			_ = c.Close()
		}
	case "/redirect":
		h.Set("Location", "/elsewhere?x=1")
		w.WriteHeader(http.StatusFound)
	default:
		h.Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "hello\n")
	}
}

// downStore is a shared store that is down: every call fails.
type downStore struct{}

var errDown = errors.New("diffstore: down")

func (downStore) Load(context.Context, string, []kvstore.Slot, []int64) error { return errDown }
func (downStore) Add(context.Context, string, []kvstore.Slot, []int64) error  { return errDown }

// diffSides builds, for one configuration and clock, the local server (net/http
// on a loopback port, as parity.Local) and the Lambda (Adapt over the same
// handler, requests as the events of a Function URL, or of an HTTP API),
// each with its own diffOrigin. down gives both a shared store that fails.
func diffSides(t *testing.T, cfgText string, clock *parity.Clock, httpAPI, down bool) (local, lambda parity.Side) {
	t.Helper()
	cfg, err := config.Parse([]byte(cfgText))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	build := func(o *diffOrigin, peer func(*http.Request) (netip.Addr, bool)) http.Handler {
		var st kvstore.Store = memstore.New()
		if down {
			st = downStore{}
		}
		h, err := httpapi.New(httpapi.Options{Config: cfg, Store: st, Local: memstore.New(),
			Next: httpapi.NewProxy(o.url, log, cfg.Identity.Prefixes()), PeerIP: peer, Now: clock.Now, Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	lo := newDiffOrigin(t)
	srv := httptest.NewServer(build(lo, nil))
	t.Cleanup(srv.Close)
	local = parity.Side{Name: "local", Do: func(r *parity.Request) (parity.Outcome, error) {
		res, err := diffWire(srv.Listener.Addr().String(), r)
		if err != nil {
			return parity.Outcome{}, err
		}
		seen, err := lo.take()
		return parity.Outcome{Response: res, Seen: seen}, err
	}}
	lam := newDiffOrigin(t)
	lambda = eventSide(build(lam, sourceIP), httpAPI, lam.take)
	return local, lambda
}

// diffWire sends r over a connection of its own from r.Client and reads
// the answer.
func diffWire(addr string, r *parity.Request) (parity.Response, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: r.Client.AsSlice()}, Timeout: 10 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return parity.Response{}, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second)) // a stuck exchange, not a timed assertion
	if _, err := c.Write(r.Wire()); err != nil {
		return parity.Response{}, err
	}
	res, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: r.Method})
	if err != nil {
		return parity.Response{}, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	return parity.Response{Status: res.StatusCode, Header: res.Header, Body: body}, err
}

// diffConfig is the configuration of TestDiffWithLocal: route costs, a
// local ip limit, a plan small enough to deny, a listed CORS origin.
const diffConfig = `{
  "plans": {"free": {"limits": [{"name": "minute", "limit": 8, "window": "1m"}], "upgrade_url": "https://example.com/upgrade"}},
  "ip_limits": [{"name": "ip", "limit": 100, "window": "1s", "scope": "local"}],
  "costs": [{"method": "POST", "path_prefix": "/v1/search", "cost": 2}, {"path_prefix": "/v1/items/", "cost": 3}],
  "cors_origins": ["https://app.example.com"]%s
}`

// TestDiffWithLocal: the same requests, in the same order and at the same
// instants, get the same answers from the Lambda (Function URL and HTTP
// API events) as from the local server (status, rate-limit fields,
// problem+json and check bodies, the origin's answer and fields), and the
// origin gets the same request, for what parity.Generate does not send:
// origins that send no Content-Type, binary and repeated answer fields, an
// origin that breaks its connection, a store that is down, shadow mode,
// the check API's token and bodies, /healthz by every method. Fields on
// several lines are compared as lists (payload format 2.0 joins them with
// ",", docs/lambda.md), Set-Cookie line by line.
func TestDiffWithLocal(t *testing.T) {
	get := func(target string, h ...parity.Field) parity.Request {
		return parity.Request{Method: http.MethodGet, Target: target, Header: h}
	}
	check := func(body string, h ...parity.Field) parity.Request {
		return parity.Request{Method: http.MethodPost, Target: httpapi.CheckPath, Body: []byte(body), Header: h}
	}
	app := parity.Field{Name: "Origin", Value: "https://app.example.com"}
	token := parity.Field{Name: "Authorization", Value: "Bearer tok-0123456789abc"}
	tests := []struct {
		name  string
		extra string // more configuration fields
		down  bool   // the shared store fails
		reqs  []parity.Request
	}{
		{name: "answers", reqs: []parity.Request{
			get("/untyped/html"), get("/untyped/png"), get("/untyped/gzip"), get("/untyped/204"),
			{Method: http.MethodHead, Target: "/untyped/html"},
			get("/bin"), get("/multi", app), {Method: http.MethodHead, Target: "/multi"},
			get("/redirect"), get("/fail"),
			{Method: http.MethodPost, Target: "/v1/search", Body: []byte{0, 1, 2, 0xff}},
			get("/v1/items%2F1?x=1&x=2&y=%2F", parity.Field{Name: "Cookie", Value: "a=1"}, parity.Field{Name: "Cookie", Value: "b=2"}),
			{Method: http.MethodOptions, Target: "/v1/items/1", Header: []parity.Field{app, {Name: "Access-Control-Request-Method", Value: "POST"}}},
			get(httpapi.HealthPath), {Method: http.MethodHead, Target: httpapi.HealthPath}, {Method: http.MethodOptions, Target: httpapi.HealthPath},
			get("/v1/items/2"), get("/v1/items/3", app), // denied: 3 + 3 + 3 > 8
		}},
		{name: "store down, allow", down: true, reqs: []parity.Request{
			get("/v1/x"), check(`{"key": "a"}`), get("/untyped/html"), get("/fail"), get("/multi", app),
		}},
		{name: "store down, deny", extra: `, "on_store_error": "deny"`, down: true, reqs: []parity.Request{
			get("/v1/x", app), check(`{"key": "a"}`),
		}},
		{name: "shadow", extra: `, "shadow": true`, reqs: []parity.Request{
			get("/v1/items/1"), get("/v1/items/1"), get("/v1/items/1"), get("/untyped/html"),
			check(`{"key": "a", "cost": 8}`), check(`{"key": "a", "cost": 8}`),
		}},
		{name: "check API", extra: `, "check_token": "tok-0123456789abc"`, reqs: []parity.Request{
			check(`{"key": "a"}`, token), check(`{"key": "a"}`, parity.Field{Name: "Authorization", Value: "bearer   tok"}),
			check(`{"key": "a"}`), check(`{"key": "a"}`, token, token),
			check(`{"key": "`+strings.Repeat("a", 5000)+`"}`, token), check("\xff\xfe{}", token), check(``, token),
			check(`{"key": "a", "cost": 9}`, token),
			{Method: http.MethodGet, Target: httpapi.CheckPath, Header: []parity.Field{token}},
			{Method: http.MethodPost, Target: "/v1/%63heck?x=1", Body: []byte(`{"key": "b"}`), Header: []parity.Field{token}},
		}},
	}
	for _, tt := range tests {
		for _, httpAPI := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/httpAPI=%v", tt.name, httpAPI), func(t *testing.T) {
				clock := parity.NewClock(parity.T0)
				local, lambda := diffSides(t, fmt.Sprintf(diffConfig, tt.extra), clock, httpAPI, tt.down)
				for i := range tt.reqs {
					r := tt.reqs[i]
					r.Client = parity.Clients[0]
					r.Step = 10 * time.Millisecond
					parity.Run(t, clock, []parity.Request{r}, local, lambda, lambdaNormaliser(httpAPI))
				}
			})
		}
	}
}

// TestParityDynamoDB is TestParityWithLocal with the Lambda's own shared
// store, DynamoDB (dynalite, with its caches and its conditional writes),
// in place of the memory store, and the clock stepping back by up to 50 s
// (held: decided at the newest time seen) besides parity.Generate's steps.
// A configuration's Outage fails both sides' stores alike (parity.Failing
// over the memory store and over DynamoDB).
func TestParityDynamoDB(t *testing.T) {
	db := dynalite.Run(t)
	awsEnv(t, "")
	tables := 0
	for _, httpAPI := range []bool{false, true} {
		build := func(t *testing.T, c parity.Config, clock *parity.Clock) parity.Side {
			tables++
			table := fmt.Sprintf("slidegate-parity-%d", tables)
			client := newClient(t, db.Endpoint, table)
			// A loaded machine's dynalite, not the store, would be timed.
			cfg, err := config.Parse([]byte(strings.Replace(c.Text, "{", `{"store_timeout": "5s",`, 1)))
			if err != nil {
				t.Fatal(err)
			}
			st, err := dynamostore.New(client, table, dynamostore.MaxPeriod(cfg.LongestWindow()))
			if err != nil {
				t.Fatal(err)
			}
			return lambdaSideOn(t, cfg, c.Store(st, clock), clock, httpAPI)
		}
		for _, c := range parity.Configs() {
			for seed := range uint64(parity.Sequences) {
				t.Run(fmt.Sprintf("httpAPI=%v/%s/seed=%d", httpAPI, c.Name, seed), func(t *testing.T) {
					clock := parity.NewClock(parity.T0)
					reqs := parity.Generate(seed, 2*parity.Length, parity.Options{SplitKeys: true, PlanOverrides: true, StepsBack: true, CheckToken: c.CheckToken})
					for i := range reqs {
						switch i % 37 {
						case 5, 17:
							reqs[i].Step = -25 * time.Second
						case 9, 21:
							reqs[i].Step = 25 * time.Second
						}
					}
					parity.Run(t, clock, reqs, parity.LocalOf(t, c, clock), build(t, c, clock), lambdaNormaliser(httpAPI))
				})
			}
		}
	}
}
