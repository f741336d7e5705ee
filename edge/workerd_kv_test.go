//go:build !(js && wasm)

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slidegate/slidegate/config"
	"github.com/slidegate/slidegate/edge/internal/workerd"
	"github.com/slidegate/slidegate/httpapi"
	"github.com/slidegate/slidegate/kvstore"
	"github.com/slidegate/slidegate/kvstore/workerskv"
	"github.com/slidegate/slidegate/window"
)

// faultTimeout is the fault Worker's store_timeout.
const faultTimeout = time.Second

// longName is a limit name of the most characters config allows (64).
var longName = strings.Repeat("y", 64)

// faultConfig is the fault Worker's configuration, on_store_error and
// store_timeout as given. Its "long" plan has the longest window (366 days)
// under the longest name, and the shortest one (1 s), whose keys test KV's
// limits; "two" adds a second rule to "free"'s.
func faultConfig(onError string, timeout time.Duration) string {
	return fmt.Sprintf(`{
  "plans": {
    "free": {"limits": [{"name": "day", "limit": 5, "window": %[1]q}]},
    "two": {"limits": [{"name": "day", "limit": 5, "window": %[1]q}, {"name": "day-b", "limit": 1000, "window": %[1]q}]},
    "long": {"limits": [{"name": %[2]q, "limit": 1000, "window": "8784h"}, {"name": "sec", "limit": 1000, "window": "1s"}]}
  },
  "default_plan": "free",
  "on_store_error": %[3]q,
  "store_timeout": %[4]q
}`, testWindow.String(), longName, onError, timeout.String())
}

// fault is the Worker behind edge/testdata/faultkv. It runs only while
// the tests that ask for it run: slidegateWorker stops it (see
// stopFaultWorker), and faultWorker starts it again when a later test asks.
var fault struct {
	mu     sync.Mutex
	dir    string // its wrangler.toml, fault.mjs and build/, written once
	worker *workerd.Worker
}

// faultWorker starts, when it is not running, slidegate's Worker behind
// edge/testdata/faultkv, whose KV binding fails, stalls or lists forged
// keys as the test asks, and records every put. It runs in a workerd of its
// own on the local KV of slidegateWorker's: two isolates that see each
// other's writes. The next test that asks for slidegateWorker alone, or
// TestMain, stops it.
func faultWorker(t *testing.T) *workerd.Worker {
	t.Helper()
	main := suiteWorker(t) // builds build/
	fault.mu.Lock()
	defer fault.mu.Unlock()
	if fault.worker == nil {
		w, err := startFault(t, main)
		if err != nil {
			t.Fatal(err)
		}
		fault.worker = w
	}
	logOnFailure(t, "the fault Worker's wrangler dev", fault.worker)
	return fault.worker
}

// startFault writes the fault Worker's directory the first time and starts
// it on main's KV state.
func startFault(t *testing.T, main *workerd.Worker) (*workerd.Worker, error) {
	if fault.dir == "" {
		dir, err := os.MkdirTemp("", "slidegate-fault-")
		if err != nil {
			return nil, err
		}
		fault.dir = dir
		src, err := os.ReadFile(filepath.Join(suite.root, "edge", "testdata", "faultkv", "fault.mjs"))
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(dir, "fault.mjs"), src, 0o644); err != nil {
			return nil, err
		}
		if err := os.Symlink(filepath.Join(suite.dir, "build"), filepath.Join(dir, "build")); err != nil {
			return nil, err
		}
		cfg := workerd.Config{Name: "slidegate-fault", Main: "fault.mjs", KV: true, Vars: map[string]string{
			varConfig: faultConfig("deny", faultTimeout), varConfig + "_ALLOW": faultConfig("allow", faultTimeout),
			varConfig + "_PATIENT": faultConfig("deny", config.MaxStoreTimeout), varOrigin: suite.origin.URL,
			varConfig + "_BOUNDARY": boundaryConfig,
		}}
		if err := cfg.Write(dir); err != nil {
			fault.dir = "" // write it again next time
			return nil, err
		}
	}
	// A second wrangler dev on one KV state exited at start once in
	// about 40 runs: start it again once.
	var w *workerd.Worker
	var err error
	for range 2 {
		if w, err = workerd.StartSharing(suite.wrangler, fault.dir, "/healthz", main.Persist); !errors.Is(err, workerd.ErrNotReady) {
			break
		}
		t.Logf("fault Worker, first start: %v", err)
	}
	return w, err
}

// stopFaultWorker stops the fault Worker, if it runs, before a test that
// does not use it. While it runs, its workerd has the suite Worker's KV
// SQLite database open too, and it goes on writing to it after its test
// has ended (its counts written behind: puts 1 and 2.3 s after
// TestWorkerdWaitAcrossBoundary, longer on a loaded machine), while the
// next tests write through the suite Worker. A KV operation that finds
// the other process holding the database's lock fails with SQLITE_BUSY
// ("database is locked"), which the Worker answers as a store error (a
// 503 seen in TestWorkerdWebSocketCounted, which runs soon after): a
// conflict of the local simulator's shared file, which no two Cloudflare
// locations share, failing a test that never asked for two isolates.
func stopFaultWorker() {
	fault.mu.Lock()
	defer fault.mu.Unlock()
	if fault.worker != nil {
		fault.worker.Stop()
		fault.worker = nil
	}
}

// recordedPut is a put the fault Worker recorded.
type recordedPut struct {
	Key string `json:"key"`
	TTL int64  `json:"ttl"` // expirationTtl, seconds
	N   int64  `json:"n"`   // metadata n
	At  int64  `json:"at"`  // Unix ms
	OK  bool   `json:"ok"`
	Err string `json:"err"`
}

// faultState is the fault Worker's record.
type faultState struct {
	Puts []recordedPut `json:"puts"`
	Held int           `json:"held"` // lists held (list mode "hold")
}

// setFault sets the fault Worker's KV modes (see fault.mjs), when modes is
// not nil, and returns its record.
func setFault(t *testing.T, w *workerd.Worker, modes map[string]any) faultState {
	t.Helper()
	var body io.Reader
	method := "GET"
	if modes != nil {
		b, _ := json.Marshal(modes)
		body, method = bytes.NewReader(b), "POST"
	}
	req, _ := http.NewRequest(method, w.URL+"/__fault", body)
	res, b := send(t, http.DefaultClient, req)
	var st faultState
	if err := json.Unmarshal(b, &st); res.StatusCode != 200 || err != nil {
		t.Fatalf("fault control: %d %s: %v", res.StatusCode, b, err)
	}
	return st
}

// passThrough is the fault Worker's KV without faults.
var passThrough = map[string]any{"list": "ok", "listMatch": "", "put": "ok", "match": "", "inject": nil, "now": nil, "release": true}

// checkAnswer is what the tests read of a check API answer.
type checkAnswer struct {
	status     int
	store      string // Slidegate-Store
	Allowed    bool   `json:"allowed"`
	Remaining  int64  `json:"remaining"`
	StoreError bool   `json:"store_error"`
}

// checkKey asks the check API about key, with plan when not empty, under
// on_store_error deny or, with allow, allow.
func checkKey(t *testing.T, w *workerd.Worker, key, plan string, allow bool) checkAnswer {
	t.Helper()
	body := fmt.Sprintf(`{"key":%q}`, key)
	if plan != "" {
		body = fmt.Sprintf(`{"key":%q,"plan":%q}`, key, plan)
	}
	cfg := ""
	if allow {
		cfg = "allow"
	}
	return checkBody(t, w, body, cfg)
}

// checkBody sends a check API request with body, served with the fault
// Worker's configuration cfg ("": the default).
func checkBody(t *testing.T, w *workerd.Worker, body, cfg string) checkAnswer {
	t.Helper()
	req, _ := http.NewRequest("POST", w.URL+httpapi.CheckPath, strings.NewReader(body))
	if cfg != "" {
		req.Header.Set("X-Fault-Config", cfg)
	}
	res, b := send(t, &http.Client{Timeout: time.Minute}, req)
	a := checkAnswer{status: res.StatusCode, store: res.Header.Get(httpapi.StoreHeader)}
	if res.StatusCode == http.StatusOK {
		if err := json.Unmarshal(b, &a); err != nil {
			t.Fatalf("check answer %s: %v", b, err)
		}
	}
	return a
}

// keyOf returns the KV key prefix of the check API key's counter of rule
// (its name and window) in the current bucket.
func keyOf(key, rule string, period time.Duration) string {
	sl := kvstore.Slot{Name: rule, Bucket: window.Index(time.Now(), period), Length: period}
	return workerskv.SlotPrefix("k:"+sha256Hex(key), sl)
}

// TestWorkerdKVFaults drives the Worker's KV binding through a KV that
// fails, stalls and lists forged values: a client's first request, which
// lists KV before deciding, is answered per on_store_error within
// store_timeout; a failed write is written again; listed counts that are
// not numbers count as nothing, and counts past int64 deny; keys of the
// longest name and window and of a 1 s window are within KV's limits and
// accepted; no key is written twice within a second.
func TestWorkerdKVFaults(t *testing.T) {
	w := faultWorker(t)
	bucket := fmt.Sprint(window.Index(time.Now(), testWindow))
	steps := []struct {
		name  string
		modes map[string]any
		run   func(t *testing.T)
	}{
		{"list rejects, deny", map[string]any{"list": "reject"}, func(t *testing.T) {
			if a := checkKey(t, w, randomKey(t), "", false); a.status != http.StatusServiceUnavailable || a.store != httpapi.StoreErrorDenied {
				t.Errorf("check: %d, %s %q; want 503, %q", a.status, httpapi.StoreHeader, a.store, httpapi.StoreErrorDenied)
			}
			if res, body := get(t, http.DefaultClient, w.URL+"/v1/items", randomKey(t)); res.StatusCode != http.StatusServiceUnavailable || strings.HasPrefix(body, "origin:") || res.Header.Get("Retry-After") != "1" {
				t.Errorf("pre-filter: %d %q, Retry-After %q; want 503 without the origin, Retry-After 1", res.StatusCode, body, res.Header.Get("Retry-After"))
			}
		}},
		{"list throws, allow", map[string]any{"list": "throw"}, func(t *testing.T) {
			if a := checkKey(t, w, randomKey(t), "", true); a.status != http.StatusOK || !a.Allowed || !a.StoreError || a.store != httpapi.StoreErrorAllowed {
				t.Errorf("check: %d allowed %t store_error %t, %s %q; want 200, allowed, store_error, %q",
					a.status, a.Allowed, a.StoreError, httpapi.StoreHeader, a.store, httpapi.StoreErrorAllowed)
			}
		}},
		{"list slower than store_timeout", map[string]any{"list": "slow", "delay": 20000}, func(t *testing.T) {
			start := time.Now()
			a := checkKey(t, w, randomKey(t), "", false)
			took := time.Since(start)
			if a.status != http.StatusServiceUnavailable || a.store != httpapi.StoreErrorDenied {
				t.Errorf("check: %d, %s %q; want 503, %q", a.status, httpapi.StoreHeader, a.store, httpapi.StoreErrorDenied)
			}
			// store_timeout is 1 s; the list takes 20 s. The margin is
			// for a loaded machine.
			if took > 10*time.Second {
				t.Errorf("answered after %s, want about store_timeout (%s)", took, faultTimeout)
			}
		}},
		{"forged metadata counts as nothing", map[string]any{"inject": map[string]any{"bucket": bucket, "keys": []any{
			"none", nil, "7", map[string]any{}, map[string]any{"n": "9"}, "nan", map[string]any{"n": -5}, map[string]any{"n": true}, map[string]any{"n": 2.5},
		}}}, func(t *testing.T) {
			// Of all those, only 2.5 counts, as 2: the request leaves 5-2-1.
			if a := checkKey(t, w, randomKey(t), "", false); a.status != http.StatusOK || !a.Allowed || a.Remaining != 2 {
				t.Errorf("check: %d allowed %t remaining %d; want 200, allowed, 2", a.status, a.Allowed, a.Remaining)
			}
		}},
		{"counts past int64 deny", map[string]any{"inject": map[string]any{"bucket": bucket, "keys": []any{
			map[string]any{"n": 1e300}, map[string]any{"n": 1e300},
		}}}, func(t *testing.T) {
			if a := checkKey(t, w, randomKey(t), "", false); a.status != http.StatusOK || a.Allowed {
				t.Errorf("check: %d allowed %t; want 200, denied", a.status, a.Allowed)
			}
			if res, body := get(t, http.DefaultClient, w.URL+"/v1/items", randomKey(t)); res.StatusCode != http.StatusTooManyRequests {
				t.Errorf("pre-filter: %d %q, want 429", res.StatusCode, body)
			}
		}},
		{"a rejected write is written again", nil, func(t *testing.T) {
			key := randomKey(t)
			prefix := keyOf(key, "day", testWindow)
			setFault(t, w, map[string]any{"put": "reject-once", "match": prefix})
			for i := range 3 {
				if a := checkKey(t, w, key, "", false); a.status != http.StatusOK || !a.Allowed || a.Remaining != int64(4-i) {
					t.Fatalf("check %d: %d allowed %t remaining %d; want 200, allowed, %d", i+1, a.status, a.Allowed, a.Remaining, 4-i)
				}
			}
			puts := waitForPuts(t, w, func(p recordedPut) bool { return strings.HasPrefix(p.Key, prefix) && p.OK && p.N == 3 })
			if p := firstOf(puts, prefix); p.OK || p.Err == "" {
				t.Errorf("the key's first put %+v, want the rejected one", p)
			}
		}},
		{"keys of the longest and shortest windows", nil, func(t *testing.T) {
			key := randomKey(t)
			if a := checkKey(t, w, key, "long", false); a.status != http.StatusOK || !a.Allowed {
				t.Fatalf("check: %d allowed %t; want 200, allowed", a.status, a.Allowed)
			}
			year := keyOf(key, longName, 8784*time.Hour)
			// The 1 s window's key in any bucket: its bucket may have ended
			// before the check.
			sec := strings.TrimSuffix(keyOf(key, "sec", time.Second), fmt.Sprint(window.Index(time.Now(), time.Second), ":"))
			ours := func(p recordedPut) bool { return strings.HasPrefix(p.Key, year) || strings.HasPrefix(p.Key, sec) }
			settled := func(prefix string) func(recordedPut) bool {
				return func(p recordedPut) bool { return strings.HasPrefix(p.Key, prefix) && (p.OK || p.Err != "") }
			}
			waitForPuts(t, w, settled(year))
			puts := waitForPuts(t, w, settled(sec))
			for _, p := range puts {
				if !ours(p) {
					continue
				}
				if len(p.Key) > 512 {
					t.Errorf("key of %d bytes, over KV's 512: %s", len(p.Key), p.Key)
				}
				switch {
				case !p.OK:
					t.Errorf("put %s (expirationTtl %d) failed: %s", p.Key, p.TTL, p.Err)
				case strings.HasPrefix(p.Key, year) && p.TTL < int64((8784*time.Hour).Seconds()):
					t.Errorf("366-day window: expirationTtl %d s, want the rest of the bucket and the next (over 366 days)", p.TTL)
				case !strings.HasPrefix(p.Key, year) && p.TTL != int64(workerskv.MinTTL.Seconds()):
					t.Errorf("1 s window: expirationTtl %d s, want KV's least, %s", p.TTL, workerskv.MinTTL)
				}
			}
		}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			modes := maps.Clone(passThrough)
			for k, v := range st.modes {
				modes[k] = v
			}
			setFault(t, w, modes)
			defer setFault(t, w, passThrough)
			st.run(t)
		})
	}
	perKey := map[string][]int64{}
	for _, p := range setFault(t, w, nil).Puts {
		perKey[p.Key] = append(perKey[p.Key], p.At)
	}
	for key, ats := range perKey {
		for i := 1; i < len(ats); i++ {
			if gap := ats[i] - ats[i-1]; gap < 1000 {
				t.Errorf("%s written twice %d ms apart (writes at %v)", key, gap, ats)
			}
		}
	}
}

// waitForPuts polls the fault Worker's record until a put satisfies ok
// (background writes land within about a second) and returns the record.
func waitForPuts(t *testing.T, w *workerd.Worker, ok func(recordedPut) bool) []recordedPut {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		puts := setFault(t, w, nil).Puts
		for _, p := range puts {
			if ok(p) {
				return puts
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no such put within 20 s; puts: %+v", puts)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// firstOf returns the first recorded put of a key under prefix.
func firstOf(puts []recordedPut, prefix string) recordedPut {
	for _, p := range puts {
		if strings.HasPrefix(p.Key, prefix) {
			return p
		}
	}
	return recordedPut{}
}

// TestWorkerdTwoIsolates: the suite's Worker and the fault Worker (its KV
// passing through) run in two workerd processes on one local KV, two
// isolates that see each other's writes as soon as they land, as two
// locations do once KV has propagated. Both limit the check API's keys to 5
// a day ("free"). A client that moves from one isolate to the other is held
// to 5 in all; a burst at both at once gets at most 5 from each (each counts
// its own exactly) and at least 5 in all, KV holds every admitted count, and
// then both isolates deny.
func TestWorkerdTwoIsolates(t *testing.T) {
	a, b := suiteWorker(t), faultWorker(t)
	setFault(t, b, passThrough)
	const limit = 5
	check := func(w *workerd.Worker, key string, cost int) checkAnswer {
		t.Helper()
		ans := checkBody(t, w, fmt.Sprintf(`{"key":%q,"cost":%d}`, key, cost), "")
		if ans.status != http.StatusOK {
			t.Fatalf("check: %d, want 200", ans.status)
		}
		return ans
	}
	// settled waits until w, reading without counting, finds no room left:
	// it has listed the other isolate's writes.
	settled := func(w *workerd.Worker, key string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for check(w, key, 0).Remaining != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%s still finds room after 20 s", w.URL)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	t.Run("one client moves", func(t *testing.T) {
		key := randomKey(t)
		for i := range 3 {
			if ans := check(a, key, 1); !ans.Allowed || ans.Remaining != int64(limit-1-i) {
				t.Fatalf("first isolate, request %d: allowed %t remaining %d, want %d", i+1, ans.Allowed, ans.Remaining, limit-1-i)
			}
		}
		kvHolds(t, a, keyOf(key, "day", testWindow), 3)
		// The second isolate's first request for the client lists KV.
		for i := range 2 {
			if ans := check(b, key, 1); !ans.Allowed || ans.Remaining != int64(1-i) {
				t.Errorf("second isolate, request %d: allowed %t remaining %d, want %d", i+1, ans.Allowed, ans.Remaining, 1-i)
			}
		}
		if ans := check(b, key, 1); ans.Allowed {
			t.Errorf("second isolate, request 3: admitted, the sixth in all")
		}
		settled(a, key)
		if ans := check(a, key, 1); ans.Allowed {
			t.Errorf("first isolate after the second's writes: admitted, the sixth in all")
		}
	})
	t.Run("burst at both", func(t *testing.T) {
		key := randomKey(t)
		const each = 8
		var mu sync.Mutex
		admitted := map[*workerd.Worker]int{}
		var wg sync.WaitGroup
		for _, w := range []*workerd.Worker{a, b} {
			for range each {
				wg.Go(func() {
					ans := checkBody(t, w, fmt.Sprintf(`{"key":%q}`, key), "")
					mu.Lock()
					defer mu.Unlock()
					if ans.status == http.StatusOK && ans.Allowed {
						admitted[w]++
					}
				})
			}
		}
		wg.Wait()
		total := admitted[a] + admitted[b]
		t.Logf("admitted %d and %d of %d each", admitted[a], admitted[b], each)
		if admitted[a] > limit || admitted[b] > limit || total < limit {
			t.Errorf("admitted %d and %d: want at most %d from each, at least %d in all", admitted[a], admitted[b], limit, limit)
		}
		kvHolds(t, a, keyOf(key, "day", testWindow), int64(total))
		settled(a, key)
		settled(b, key)
	})
}

// kvHolds waits until KV's keys under prefix (every isolate's) sum to want,
// listed through w's binding: the writes behind land within about a second.
func kvHolds(t *testing.T, w *workerd.Worker, prefix string, want int64) {
	t.Helper()
	var got int64
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		got = 0
		for _, k := range debugState(t, w, prefix).Keys {
			got += k.N
		}
		if got == want {
			return
		}
	}
	t.Fatalf("KV holds %d under %s, want %d", got, prefix, want)
}

// TestWorkerdWaitingRequestIsExact: a request that waits for a KV list (its
// client's first with a rule the isolate has not listed yet) is decided on
// the counts as they are after the wait. The requests of the client that
// arrive meanwhile, on a rule the isolate has listed, are decided and
// counted at once; the waiting one read that rule's count before its wait
// and, admitted on it, made 6 against a limit of 5 in one isolate.
func TestWorkerdWaitingRequestIsExact(t *testing.T) {
	w := faultWorker(t)
	setFault(t, w, passThrough)
	defer setFault(t, w, passThrough)
	const patient = "patient" // store_timeout 30 s, the most: the held list is no store error
	key := randomKey(t)
	check := func(plan string) checkAnswer {
		t.Helper()
		return checkBody(t, w, fmt.Sprintf(`{"key":%q,"plan":%q}`, key, plan), patient)
	}
	if a := check("free"); a.status != http.StatusOK || !a.Allowed || a.Remaining != 4 {
		t.Fatalf("first request: %d allowed %t remaining %d; want 200, allowed, 4", a.status, a.Allowed, a.Remaining)
	}
	// The client's "day-b" counters have never been listed: hold their lists.
	dayB := strings.TrimSuffix(keyOf(key, "day-b", testWindow), bucketOf(testWindow)+":")
	setFault(t, w, map[string]any{"list": "hold", "listMatch": dayB})
	waiting := make(chan checkAnswer, 1)
	go func() { waiting <- check("two") }()
	for deadline := time.Now().Add(20 * time.Second); setFault(t, w, nil).Held == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the request on plan two never listed")
		}
	}
	for i := range 4 {
		if a := check("free"); a.status != http.StatusOK || !a.Allowed || a.Remaining != int64(3-i) {
			t.Fatalf("request %d while one waits: %d allowed %t remaining %d; want 200, allowed, %d", i+2, a.status, a.Allowed, a.Remaining, 3-i)
		}
	}
	setFault(t, w, passThrough) // releases the held lists
	if a := <-waiting; a.status != http.StatusOK || a.Allowed {
		t.Errorf("the waiting request, decided after the limit was used up: %d allowed %t; want 200, denied", a.status, a.Allowed)
	}
	// The suite's Worker lists the same local KV (the fault Worker has no
	// debug route).
	kvHolds(t, suiteWorker(t), keyOf(key, "day", testWindow), 5)
}

// boundaryConfig is the fault Worker's "boundary" configuration: 2
// requests a second, and a minute rule whose buckets are old enough for a
// client's first request to await their list (a 1 s window's never are),
// under the longest store_timeout, so that a held list is no store error.
const boundaryConfig = `{"plans": {"free": {"limits": [{"name": "second", "limit": 2, "window": "1s"}, {"name": "minute", "limit": 1000, "window": "1m"}]}},
  "store_timeout": "30s"}`

// TestWorkerdWaitAcrossBoundary: a client's first request to an isolate
// awaits the KV list of its minute counters, 50 ms before a second's
// boundary; meanwhile two more of the client's requests, 50 ms after it,
// are decided at once (the lists are in flight) and admitted in the new
// second. The first was then admitted and counted in the second the others
// had left: 3 requests within one second under a limit of 2. It is now
// checked again at the isolate's newest time, as the local server's
// limiter checks a request another overtook, and refused. The isolate's
// clock is the fault Worker's, set by the test.
func TestWorkerdWaitAcrossBoundary(t *testing.T) {
	w := faultWorker(t)
	setFault(t, w, passThrough)
	defer setFault(t, w, passThrough)
	key := randomKey(t)
	check := func() checkAnswer {
		t.Helper()
		return checkBody(t, w, fmt.Sprintf(`{"key":%q}`, key), "boundary")
	}
	// A boundary a second or two ahead of the real clock: the isolate
	// keeps the newest time it saw, which other tests' requests then read
	// for no more than that.
	boundary := time.Now().Truncate(time.Second).Add(2 * time.Second)
	minute := strings.TrimSuffix(keyOf(key, "minute", time.Minute), bucketOf(time.Minute)+":")
	setFault(t, w, map[string]any{"list": "hold", "listMatch": minute, "now": boundary.Add(-50 * time.Millisecond).UnixMilli()})
	waiting := make(chan checkAnswer, 1)
	go func() { waiting <- check() }()
	for deadline := time.Now().Add(20 * time.Second); setFault(t, w, nil).Held == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first request never listed its minute counters")
		}
	}
	setFault(t, w, map[string]any{"now": boundary.Add(50 * time.Millisecond).UnixMilli()})
	for i := range 2 {
		if a := check(); a.status != http.StatusOK || !a.Allowed || a.Remaining != int64(1-i) {
			t.Fatalf("request %d, 50 ms past the boundary: %d allowed %t remaining %d; want 200, allowed, %d", i+2, a.status, a.Allowed, a.Remaining, 1-i)
		}
	}
	setFault(t, w, passThrough) // releases the held lists
	if a := <-waiting; a.status != http.StatusOK || a.Allowed {
		t.Errorf("the first request, 50 ms before the boundary, decided after two past it (limit 2 a second): %d allowed %t; want 200, denied", a.status, a.Allowed)
	}
}

// bucketOf returns the current bucket of a window, as keys spell it.
func bucketOf(d time.Duration) string { return fmt.Sprint(window.Index(time.Now(), d)) }

// TestWorkerdCheckAPISharesCounters: the check API and the pre-filter count
// a key on the same counters in Workers KV: requests through either use up
// one quota (the free plan's 5), and a check with cost 0 reads it without
// counting.
func TestWorkerdCheckAPISharesCounters(t *testing.T) {
	w := slidegateWorker(t)
	client := &http.Client{Timeout: 30 * time.Second}
	key := randomKey(t)
	for i := range 2 {
		if res, body := get(t, client, w.URL+"/v1/items", key); res.StatusCode != http.StatusOK {
			t.Fatalf("pre-filter request %d: %d %s", i+1, res.StatusCode, body)
		}
	}
	for _, tc := range []struct {
		cost      int
		allowed   bool
		remaining int64
	}{{0, true, 3}, {1, true, 2}, {0, true, 2}, {1, true, 1}} {
		a := checkBody(t, w, fmt.Sprintf(`{"key":%q,"cost":%d}`, key, tc.cost), "")
		if a.status != http.StatusOK || a.Allowed != tc.allowed || a.Remaining != tc.remaining {
			t.Fatalf("check of cost %d: %d allowed %t remaining %d; want 200, %t, %d", tc.cost, a.status, a.Allowed, a.Remaining, tc.allowed, tc.remaining)
		}
	}
	if res, body := get(t, client, w.URL+"/v1/items", key); res.StatusCode != http.StatusOK || res.Header.Get("X-RateLimit-Remaining") != "0" {
		t.Fatalf("fifth request through the pre-filter: %d, remaining %q, %s; want 200, 0", res.StatusCode, res.Header.Get("X-RateLimit-Remaining"), body)
	}
	if a := checkBody(t, w, fmt.Sprintf(`{"key":%q}`, key), ""); a.status != http.StatusOK || a.Allowed {
		t.Errorf("check after 5: %d allowed %t; want 200, denied", a.status, a.Allowed)
	}
	if res, _ := get(t, client, w.URL+"/v1/items", key); res.StatusCode != http.StatusTooManyRequests {
		t.Errorf("pre-filter after 5: %d, want 429", res.StatusCode)
	}
	kvHolds(t, w, keyOf(key, "day", testWindow), 5)
}
