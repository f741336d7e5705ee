package main

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/slidegate/slidegate/httpapi"
	"github.com/slidegate/slidegate/internal/testenv"
	"github.com/slidegate/slidegate/kvstore/memstore"
)

// reloadDoc is a configuration whose window outlasts the run (serve reads
// the real clock): the default plan free allows freeLimit a window, pro
// 100; keys are the raw API keys api_keys gives pro, and extra is added to
// the top-level object.
func reloadDoc(w time.Duration, freeLimit int, extra string, keys ...string) string {
	var entries []string
	for _, k := range keys {
		entries = append(entries, fmt.Sprintf("%q: \"pro\"", httpapi.HashKey(k)))
	}
	return fmt.Sprintf(`{"plans": {
		"free": {"limits": [{"name": "day", "limit": %d, "window": %q}]},
		"pro": {"limits": [{"name": "day", "limit": 100, "window": %[2]q}]}},
		"api_keys": {%s}%s}`, freeLimit, w, strings.Join(entries, ", "), extra)
}

// writeFile writes doc to path, failing the test if it cannot.
func writeFile(t *testing.T, path, doc string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
}

// reloadServer is an in-process serve whose configuration file the test
// rewrites and reloads.
type reloadServer struct {
	t      *testing.T
	base   string
	path   string
	logs   *testenv.Buffer
	reload chan struct{}
}

// startReloadServer writes doc and serves it in process, in front of the
// demo origin or args' origin.
func startReloadServer(t *testing.T, doc string, args ...string) *reloadServer {
	t.Helper()
	s := &reloadServer{t: t, path: filepath.Join(t.TempDir(), "config.json"), logs: &testenv.Buffer{}, reload: make(chan struct{})}
	writeFile(t, s.path, doc)
	if len(args) == 0 {
		args = []string{"--demo-origin"}
	}
	base, _, stop := startReloading(t, s.logs, s.reload, append([]string{"--config", s.path}, args...)...)
	t.Cleanup(stop)
	s.base = base
	return s
}

// reloadWith writes doc and reloads, returning once serve has logged the
// outcome (a line holding msg).
func (s *reloadServer) reloadWith(doc, msg string) map[string]any {
	s.t.Helper()
	writeFile(s.t, s.path, doc)
	return triggerReload(s.t, s.reload, s.logs, msg)
}

// triggerReload asks serve for a reload and waits (bounded) until its log
// has one more line whose msg is msg; it returns that line.
func triggerReload(t *testing.T, reload chan<- struct{}, logs *testenv.Buffer, msg string) map[string]any {
	t.Helper()
	before := len(logLines(t, logs, msg))
	select {
	case reload <- struct{}{}:
	case <-time.After(10 * time.Second):
		t.Fatal("serve took no reload")
	}
	return awaitLogLine(t, logs, msg, before)
}

// awaitLogLine waits (bounded) until logs holds more than before lines
// whose msg is msg, and returns the last.
func awaitLogLine(t *testing.T, logs *testenv.Buffer, msg string, before int) map[string]any {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; {
		if lines := logLines(t, logs, msg); len(lines) > before {
			return lines[len(lines)-1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log line %q after the reload:\n%s", msg, logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// logLines returns the JSON log lines whose msg is msg.
func logLines(t *testing.T, logs *testenv.Buffer, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(logs.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}

const (
	msgReloaded    = "configuration reloaded"
	msgNotReloaded = "configuration not reloaded: the one in force stays"
	msgNoConfig    = "configuration not reloaded: serve runs on the built-in defaults (no --config), nothing to reload"
)

var remaining = regexp.MustCompile(`"day";r=(\d+)`)

// limited is one request's answer: its status, what is left of the day
// rule, and its policy.
type limited struct {
	status int
	left   int // -1: no RateLimit header
	policy string
}

// get sends GET path with key (none if empty) to base.
func get(t *testing.T, base, path, key string) limited {
	t.Helper()
	return getFrom(t, base, path, key, "")
}

// getFrom is get from client address addr, given in X-Forwarded-For (""
// for none): serve reads it when 127.0.0.1 is a trusted proxy.
func getFrom(t *testing.T, base, path, key, addr string) limited {
	t.Helper()
	req, err := http.NewRequest("GET", base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("X-API-Key", key)
	}
	if addr != "" {
		req.Header.Set("X-Forwarded-For", addr)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	l := limited{status: res.StatusCode, left: -1, policy: res.Header.Get("RateLimit-Policy")}
	if m := remaining.FindStringSubmatch(res.Header.Get("RateLimit")); m != nil {
		l.left, _ = strconv.Atoi(m[1])
	}
	return l
}

// TestServeReloadKeepsCounts: a reload that adds an API key serves the
// new key with its plan and keeps every count: a client that used 3 of
// its 5 has 2 left, then is limited. Before, the configuration was read
// once at start; only a restart applied a new key, and with the memory
// store it started every count afresh.
func TestServeReloadKeepsCounts(t *testing.T) {
	w := testenv.FarWindow(time.Now())
	s := startReloadServer(t, reloadDoc(w, 5, ""))
	for i := range 3 {
		if got := get(t, s.base, "/x", "client"); got.status != 200 || got.left != 4-i {
			t.Fatalf("request %d: %+v, want 200 with %d left", i+1, got, 4-i)
		}
	}
	if got := get(t, s.base, "/x", "newcomer"); !strings.Contains(got.policy, "q=5;") {
		t.Fatalf("newcomer before the reload: policy %q, want the free plan's (q=5)", got.policy)
	}

	rec := s.reloadWith(reloadDoc(w, 5, "", "newcomer"), msgReloaded)
	if rec["level"] != "INFO" || rec["config"] != s.path || rec["plans"] != 2.0 || rec["api_keys"] != 1.0 {
		t.Errorf("reload line %v, want INFO naming the file, 2 plans and 1 key", rec)
	}
	if strings.Contains(s.logs.String(), httpapi.HashKey("newcomer")) {
		t.Error("the log holds an api_keys hash")
	}

	if got := get(t, s.base, "/x", "newcomer"); got.status != 200 || !strings.Contains(got.policy, "q=100;") || got.left != 98 {
		t.Errorf("newcomer after the reload: %+v, want pro's policy (q=100) and its count kept (98 left)", got)
	}
	for i, want := range []limited{{200, 1, ""}, {200, 0, ""}, {429, 0, ""}} {
		got := get(t, s.base, "/x", "client")
		if got.status != want.status || got.left != want.left {
			t.Errorf("client after the reload, request %d: %d with %d left, want %d with %d left", i+1, got.status, got.left, want.status, want.left)
		}
	}
}

// TestServeReloadLimitChange: a limit changed under the same rule name and
// window applies to what is counted already; a rule given another window
// starts from zero.
func TestServeReloadLimitChange(t *testing.T) {
	w := testenv.FarWindow(time.Now())
	s := startReloadServer(t, reloadDoc(w, 5, ""))
	for range 3 {
		get(t, s.base, "/x", "client")
	}
	s.reloadWith(reloadDoc(w, 4, ""), msgReloaded)
	if got := get(t, s.base, "/x", "client"); got.status != 200 || got.left != 0 {
		t.Errorf("limit 5 → 4 after 3: %+v, want 200 with 0 left", got)
	}
	if got := get(t, s.base, "/x", "client"); got.status != 429 {
		t.Errorf("limit 4, fifth request: %+v, want 429", got)
	}
	// Another window: other buckets, another counter.
	s.reloadWith(reloadDoc(w+time.Hour, 4, ""), msgReloaded)
	if got := get(t, s.base, "/x", "client"); got.status != 200 || got.left != 3 {
		t.Errorf("after the window changed: %+v, want 200 with 3 left (from zero)", got)
	}
}

// TestServeReloadKeepsLocalCounts: the counts of local-scope limits
// (ip_limits of "scope": "local", in serve's own memory whatever the
// store) are kept across a reload as the shared ones are: they live in
// the memory store serve made at start, not in the handler a reload
// replaces.
func TestServeReloadKeepsLocalCounts(t *testing.T) {
	w := testenv.FarWindow(time.Now())
	burst := fmt.Sprintf(`, "ip_limits": [{"name": "burst", "limit": 3, "window": %q, "scope": "local"}]`, w)
	s := startReloadServer(t, reloadDoc(w, 100, burst))
	left := regexp.MustCompile(`"burst";r=(\d+)`)
	send := func() (int, string) {
		t.Helper()
		res, err := http.Get(s.base + "/x")
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		m := left.FindStringSubmatch(res.Header.Get("RateLimit"))
		if m == nil {
			return res.StatusCode, ""
		}
		return res.StatusCode, m[1]
	}
	for range 2 {
		send()
	}
	s.reloadWith(reloadDoc(w, 100, burst, "newcomer"), msgReloaded)
	if code, r := send(); code != 200 || r != "0" {
		t.Errorf("third request, after the reload: %d with burst r=%s, want 200 with 0 left (2 counted before)", code, r)
	}
	if code, _ := send(); code != 429 {
		t.Errorf("fourth request: %d, want 429", code)
	}
}

// TestServeReloadInvalid: a configuration that cannot be used (invalid,
// unreadable, emptied) is logged as an ERROR with the message
// check-config gives, naming the field, and the configuration in force
// stays: the counts, the plans, the keys.
func TestServeReloadInvalid(t *testing.T) {
	w := testenv.FarWindow(time.Now())
	good := reloadDoc(w, 10, "", "listed")
	s := startReloadServer(t, good)
	get(t, s.base, "/x", "client")
	tests := []struct {
		name string
		doc  string // "-": the file removed
		want string
	}{
		{"zero window", `{"plans": {"free": {"limits": [{"name": "day", "limit": 5, "window": "0s"}]}}}`, `config: plans.free.limits[0].window: "0s": must be at least 1s`},
		{"syntax", `{"plans": `, "config: (document): invalid JSON"},
		{"unknown plan", reloadDoc(w, 5, `, "default_plan": "gold"`), `default_plan: "gold"`},
		{"empty", "", "empty file"},
		// Parse takes white space and a byte order mark alone for the
		// empty document, the defaults, as it takes "": a file holding
		// only a newline (`echo > config.json`) replaced every plan.
		{"white space", " \n\t\r\n", "empty file"},
		{"byte order mark", "\ufeff\n", "empty file"},
		{"missing", "-", "no such file"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.doc == "-" {
				if err := os.Remove(s.path); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { writeFile(t, s.path, good) })
			}
			if tt.doc != "-" {
				writeFile(t, s.path, tt.doc)
			}
			// t, not s.t: a failure ends this subtest, not its parent.
			rec := triggerReload(t, s.reload, s.logs, msgNotReloaded)
			msg, _ := rec["error"].(string)
			if rec["level"] != "ERROR" || rec["config"] != s.path || !strings.Contains(msg, tt.want) || !strings.Contains(msg, s.path) {
				t.Errorf("log line %v, want an ERROR naming the file and %q", rec, tt.want)
			}
			if tt.doc != "-" {
				err := run(context.Background(), []string{"check-config", s.path}, io.Discard, io.Discard)
				if err == nil || err.Error() != msg {
					t.Errorf("logged %q, check-config says %v", msg, err)
				}
			}
			// Still the configuration in force: the client's count (one
			// per earlier subtest), the listed key's plan.
			if got := get(t, s.base, "/x", "client"); got.status != 200 || got.left != 8-i {
				t.Errorf("client: %+v, want 200 with %d left", got, 8-i)
			}
			if got := get(t, s.base, "/x", "listed"); !strings.Contains(got.policy, "q=100;") {
				t.Errorf("listed key: policy %q, want pro's (q=100)", got.policy)
			}
		})
	}
	if n := len(logLines(t, s.logs, msgReloaded)); n != 0 {
		t.Errorf("%d reloads logged, want none", n)
	}
}

// TestServeReloadNoConfig: serve on the built-in defaults has no file to
// read again; a reload says so and it goes on serving.
func TestServeReloadNoConfig(t *testing.T) {
	logs := &testenv.Buffer{}
	reload := make(chan struct{})
	base, _, stop := startReloading(t, logs, reload, "--demo-origin")
	t.Cleanup(stop)
	rec := triggerReload(t, reload, logs, msgNoConfig)
	if rec["level"] != "WARN" {
		t.Errorf("log line %v, want a WARN", rec)
	}
	if got := status(t, base+"/x"); got != 200 {
		t.Errorf("after the reload: %d, want 200", got)
	}
}

// TestServeReloadInFlight: a request in flight at the origin when the
// configuration is reloaded completes on the configuration it came
// under; the next one is decided by the new one, and proxied by a proxy
// built from it (its trusted proxies).
func TestServeReloadInFlight(t *testing.T) {
	w := testenv.FarWindow(time.Now())
	origin, arrived, release := holdingOriginSaying(t, func(r *http.Request) string { return " for " + r.Header.Get("X-Forwarded-Host") })
	s := startReloadServer(t, reloadDoc(w, 5, ""), "--origin", origin.URL)
	addr := strings.TrimPrefix(s.base, "http://")
	const forwarded = "X-Forwarded-Host: app.test\r\nX-API-Key: newcomer\r\n"
	if _, body := dial(t, addr).get("/fast", forwarded); body != "answer of /fast for front.test" {
		t.Fatalf("before the reload: %q, want the client's X-Forwarded-Host replaced (127.0.0.1 is no trusted proxy)", body)
	}
	busy := dial(t, addr)
	busy.send("GET /slow HTTP/1.1\r\nHost: front.test\r\nX-API-Key: newcomer\r\n\r\n")
	awaitArrival(t, arrived)

	s.reloadWith(reloadDoc(w, 5, `, "identity": {"trusted_proxies": ["127.0.0.1"]}`, "newcomer"), msgReloaded)
	close(release)
	res, body := busy.response("GET")
	if res.StatusCode != 200 || body != "answer of /slow for front.test" || !strings.Contains(res.Header.Get("RateLimit-Policy"), "q=5;") {
		t.Errorf("in-flight request: %d %q, policy %q; want 200 from the origin under the old plan (q=5)", res.StatusCode, body, res.Header.Get("RateLimit-Policy"))
	}
	res, body = dial(t, addr).get("/fast", forwarded)
	if res.StatusCode != 200 || !strings.Contains(res.Header.Get("RateLimit-Policy"), "q=100;") || body != "answer of /fast for app.test" {
		t.Errorf("after the reload: %d %q, policy %q; want 200 under pro (q=100), X-Forwarded-Host kept from a trusted proxy",
			res.StatusCode, body, res.Header.Get("RateLimit-Policy"))
	}
}

// TestServeReloadConcurrent: requests go on while the configuration is
// reloaded again and again (run it with -race); none fails, and every
// admitted request is counted once: the rules are the same in each
// configuration, so the count goes on across all the reloads.
func TestServeReloadConcurrent(t *testing.T) {
	w := testenv.FarWindow(time.Now())
	docs := []string{reloadDoc(w, 5, "", "client"), reloadDoc(w, 5, "", "client", "other")}
	s := startReloadServer(t, docs[0])
	const clients, each = 4, 15
	var wg sync.WaitGroup
	errs := make(chan string, clients*each)
	for range clients {
		wg.Go(func() {
			for range each {
				req, _ := http.NewRequest("GET", s.base+"/x", nil)
				req.Header.Set("X-API-Key", "client")
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					errs <- err.Error()
					continue
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != 200 {
					errs <- res.Status
				}
			}
		})
	}
	for i := range 10 {
		s.reloadWith(docs[i%2], msgReloaded)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Errorf("request during the reloads: %s", e)
	}
	if got := get(t, s.base, "/x", "client"); got.left != 100-clients*each-1 {
		t.Errorf("after %d requests: %d left, want %d", clients*each, got.left, 100-clients*each-1)
	}
}

// TestServeSIGHUPReloads: the binary takes SIGHUP as a reload, as daemons
// do: it keeps running, applies the new file and keeps the counts. SIGHUP
// ended it at once (Go's default), cutting the requests in flight.
func TestServeSIGHUPReloads(t *testing.T) {
	w := testenv.FarWindow(time.Now())
	path := filepath.Join(t.TempDir(), "config.json")
	writeFile(t, path, reloadDoc(w, 5, ""))
	c := startBinary(t, "--config", path, "--demo-origin")
	for range 3 {
		get(t, c.base, "/x", "client")
	}
	writeFile(t, path, reloadDoc(w, 5, "", "newcomer"))
	c.signal(t, syscall.SIGHUP)
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(c.stderr.String(), `"msg":"`+msgReloaded+`"`); {
		select {
		case <-c.done:
			t.Fatalf("slidegate ended on SIGHUP: %v; log %s", c.err, c.stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no reload logged: %s", c.stderr.String())
		}
	}
	if got := get(t, c.base, "/x", "client"); got.status != 200 || got.left != 1 {
		t.Errorf("client after SIGHUP: %+v, want 200 with 1 left (its count kept)", got)
	}
	if got := get(t, c.base, "/x", "newcomer"); !strings.Contains(got.policy, "q=100;") {
		t.Errorf("newcomer after SIGHUP: policy %q, want pro's (q=100)", got.policy)
	}
	c.signal(t, syscall.SIGTERM)
	if err := c.wait(t); err != nil {
		t.Errorf("exit after SIGTERM: %v, want 0", err)
	}
}

// TestServeReloadLongerWindowDynamoDB: with --store dynamodb, a reload
// that brings a longer window (another plan's) raises the store's TTL
// floor (MaxPeriod) as a start with that configuration would: an item
// written with a short rule only lives at least two of the longest
// windows past its bucket, so that the write does not expire early the
// counters a longer rule of the identity may hold (the identity's key
// moved to that plan, another writer of the table). The floor stayed at
// the first configuration's longest window.
func TestServeReloadLongerWindowDynamoDB(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "") // loopback: NewClient's local credentials
	var mu sync.Mutex
	var ttls []int64 // of the writes of key identities
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Key                       map[string]struct{ S string }
			ExpressionAttributeValues map[string]struct{ N string }
		}
		_ = json.NewDecoder(r.Body).Decode(&in)
		if v, ok := in.ExpressionAttributeValues[":t"]; ok && strings.HasPrefix(in.Key["id"].S, "k:") {
			n, _ := strconv.ParseInt(v.N, 10, 64)
			mu.Lock()
			ttls = append(ttls, n)
			mu.Unlock()
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.Header().Set("X-Amz-Crc32", strconv.FormatUint(uint64(crc32.ChecksumIEEE([]byte("{}"))), 10))
		_, _ = io.WriteString(w, "{}") // no counters: a store error, after the write was sent
	}))
	t.Cleanup(fake.Close)
	lastTTL := func() time.Time {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		if len(ttls) == 0 {
			t.Fatal("no UpdateItem of the key sent")
		}
		return time.Unix(ttls[len(ttls)-1], 0)
	}
	w := testenv.FarWindow(time.Now())
	doc := func(proWindow time.Duration) string {
		return fmt.Sprintf(`{"plans": {
			"free": {"limits": [{"name": "day", "limit": 5, "window": %q}]},
			"pro": {"limits": [{"name": "long", "limit": 100, "window": %q}]}}}`, w, proWindow)
	}
	s := startReloadServer(t, doc(w), "--demo-origin", "--store", "dynamodb", "--table", "t", "--endpoint", fake.URL)
	get(t, s.base, "/x", "client")
	before := lastTTL()
	const month = 720 * time.Hour
	s.reloadWith(doc(month), msgReloaded)
	get(t, s.base, "/x", "client") // free: the day rule only
	if got, want := lastTTL(), before.Add(2*(month-w)); got.Before(want) {
		t.Errorf("TTL of the key's item after the reload: %s, want at least %s (two months past its bucket)", got, want)
	}
}

// TestReloadKeepsNewestTime: the handler of a reloaded configuration
// starts from the newest time the one before it had seen, so that a clock
// stepping back just after a reload does not reopen a bucket already
// counted past (limiter.Limiter.Seen); a fresh handler knew no time.
func TestReloadKeepsNewestTime(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 12, 0, 59, 0, time.UTC)
	path := filepath.Join(t.TempDir(), "config.json")
	writeFile(t, path, reloadDoc(time.Minute, 5, ""))
	cfg, err := loadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	b := &builder{log: log, store: memstore.New(), local: memstore.New()}
	first, err := b.build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	first.api.Seen(t0)
	var cur current
	cur.p.Store(first)
	reloadConfig(context.Background(), log, path, b, &cur)
	if cur.p.Load() == first {
		t.Fatal("not reloaded")
	}
	if got := cur.p.Load().api.Latest(); !got.Equal(t0) {
		t.Errorf("newest time after the reload: %v, want %v", got, t0)
	}
}
