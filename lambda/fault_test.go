package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/slidegate/slidegate/httpapi"
	"github.com/slidegate/slidegate/internal/dynalite"
	"github.com/slidegate/slidegate/internal/testenv"
	"github.com/slidegate/slidegate/kvstore/dynamostore"
)

// writeFault is what the proxy in front of dynalite does to every
// UpdateItem; other requests pass.
type writeFault int

const (
	// hold forwards the write (dynalite applies it) and answers only when
	// the client has gone: an answer later than store_timeout.
	hold writeFault = iota
	// drop closes the connection unanswered, then forwards the write: the
	// client's error does not wait on dynalite's pace.
	drop
	// emptyOK answers 200 with an empty JSON object and forwards nothing:
	// an endpoint (or something in front of it) that does not do the write.
	emptyOK
	// throttle answers 400 ThrottlingException and forwards nothing.
	throttle
)

func (f writeFault) String() string {
	return [...]string{"answer after the timeout", "connection closed", "200 {}", "throttled"}[f]
}

// applied reports whether dynalite receives the write.
func (f writeFault) applied() bool { return f == hold || f == drop }

// attempts is how many times the store sends the write: a throttled one
// was not applied and is retried.
func (f writeFault) attempts() int {
	if f == throttle {
		return dynamostore.MaxAttempts
	}
	return 1
}

// writeFaultProxy is a reverse proxy on 127.0.0.1 to endpoint that does f
// to every UpdateItem. It returns its URL and a function that waits until
// every request it received has been handled (a held write has reached
// dynalite) and returns how many UpdateItem requests there were.
func writeFaultProxy(t *testing.T, endpoint string, f writeFault) (string, func() int) {
	t.Helper()
	target, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	var mu sync.Mutex
	idle := sync.NewCond(&mu) // a WaitGroup's Add would race with Wait
	writes, busy := 0, 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		busy++
		mu.Unlock()
		defer func() {
			mu.Lock()
			if busy--; busy == 0 {
				idle.Broadcast()
			}
			mu.Unlock()
		}()
		if !strings.HasSuffix(r.Header.Get("X-Amz-Target"), ".UpdateItem") {
			rp.ServeHTTP(w, r)
			return
		}
		mu.Lock()
		writes++
		mu.Unlock()
		if f == drop {
			body, err := io.ReadAll(r.Body) // a hijacked request's body cannot be read
			if err != nil {
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			if c, _, err := w.(http.Hijacker).Hijack(); err == nil {
				_ = c.Close()
			}
		}
		if f.applied() {
			// The server applies the write whatever the client does next.
			rp.ServeHTTP(httptest.NewRecorder(), r.WithContext(context.WithoutCancel(r.Context())))
		}
		switch f {
		case hold:
			select {
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
		case emptyOK:
			w.Header().Set("Content-Type", "application/x-amz-json-1.0")
			_, _ = io.WriteString(w, "{}")
		case throttle:
			w.Header().Set("Content-Type", "application/x-amz-json-1.0")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"__type":"com.amazonaws.dynamodb.v20120810#ThrottlingException","message":"Rate of requests exceeds the allowed throughput."}`)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() int {
		mu.Lock()
		defer mu.Unlock()
		for busy > 0 {
			idle.Wait()
		}
		return writes
	}
}

// TestStoreFaultsThroughLambda runs the function's handler (setup, Adapt)
// against dynalite behind a proxy that breaks every conditional write, for
// a request to the origin and for the check API: each is answered per
// on_store_error within store_timeout plus a margin, marked with the
// Slidegate-Store header (the check API's body says store_error), logged as
// a store error, never taken for a decision of the store; a write the
// server applied is counted once (not lost, not retried), a throttled one
// is retried within the budget, and neither the table nor the log holds a
// raw API key or its full hash.
func TestStoreFaultsThroughLambda(t *testing.T) {
	db := dynalite.Run(t)
	const storeTimeout = 150 * time.Millisecond
	const margin = 2 * time.Second // a loaded machine, not retries
	// Only a held write is ended by store_timeout. Every other fault ends
	// the write itself, at once: its store_timeout is one that no round
	// trip of a loaded machine reaches, so that the fault, not the
	// deadline, is what the answer and the log report, and a throttled
	// write has room for all its retries. With 150 ms for all, a closed
	// connection or a 200 {} was logged as a timeout, and a throttled
	// write was sent fewer than MaxAttempts times, when the machine was
	// busy (-race and a busy CPU: 16 of 28 runs). The answer must still
	// come within storeTimeout + margin.
	const roomy = 10 * time.Second
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "origin\n")
	}))
	t.Cleanup(origin.Close)
	awsEnv(t, "")
	const headerKey, bodyKey = "sk_live_Raw-Key-1234567890", "sk_live_Body-Key-0987654321"
	toOrigin := event(t, "functionurl-get.json")
	toOrigin.Headers["x-api-key"] = headerKey
	check := event(t, "functionurl-check-base64.json")
	check.Body, check.IsBase64Encoded = `{"key":"`+bodyKey+`","cost":1}`, false
	requests := []struct {
		name string
		key  string
		ev   events.APIGatewayV2HTTPRequest
	}{{"origin", headerKey, toOrigin}, {"check API", bodyKey, check}}
	seq := 0
	for _, f := range []writeFault{hold, drop, emptyOK, throttle} {
		for _, policy := range []string{"allow", "deny"} {
			t.Run(f.String()+"/"+policy, func(t *testing.T) {
				proxy, writes := writeFaultProxy(t, db.Endpoint, f)
				t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", proxy)
				seq++
				table := fmt.Sprintf("slidegate-lambda-fault-%d", seq)
				client := newClient(t, db.Endpoint, table)
				budget := roomy
				if f == hold {
					budget = storeTimeout
				}
				cfg := fmt.Sprintf(`{"plans": {"free": {"limits": [{"name": "day", "limit": 100, "window": %q}]}}, "store_timeout": %q, "on_store_error": %q}`,
					testenv.FarWindow(time.Now()), budget, policy)
				env := map[string]string{EnvTable: table, EnvConfig: cfg, EnvOrigin: origin.URL}
				var logs testenv.Buffer
				h, err := setup(context.Background(), func(k string) string { return env[k] }, &logs)
				if err != nil {
					t.Fatal(err)
				}
				want, mark := http.StatusOK, httpapi.StoreErrorAllowed
				if policy == "deny" {
					want, mark = http.StatusServiceUnavailable, httpapi.StoreErrorDenied
				}
				for i, rq := range requests {
					begin := time.Now()
					res, err := Adapt(h)(context.Background(), rq.ev)
					took := time.Since(begin)
					if err != nil {
						t.Fatal(err)
					}
					if res.StatusCode != want || res.Headers[httpapi.StoreHeader] != mark {
						t.Errorf("%s: answer %d, %s: %q; want %d, %q", rq.name, res.StatusCode, httpapi.StoreHeader, res.Headers[httpapi.StoreHeader], want, mark)
					}
					if ra := res.Headers["Retry-After"]; (ra == "1") != (policy == "deny") {
						t.Errorf("%s: Retry-After %q; want 1 on the 503 of deny, none otherwise", rq.name, ra)
					}
					if rq.name == "check API" && policy == "allow" && !strings.Contains(res.Body, `"store_error":true`) {
						t.Errorf("check API answered %s, want store_error true", res.Body)
					}
					if took > storeTimeout+margin {
						t.Errorf("%s: answered after %s, want within %s + %s", rq.name, took, storeTimeout, margin)
					}
					t.Logf("%s: answered in %s", rq.name, took.Round(time.Millisecond))
					if n, want := writes(), (i+1)*f.attempts(); n != want {
						t.Errorf("%s: %d UpdateItem requests in all, want %d (only a throttled write is retried)", rq.name, n, want)
					}
				}

				lines := storeErrorLines(t, logs.String())
				if len(lines) != len(requests) {
					t.Fatalf("%d store errors logged, want %d:\n%s", len(lines), len(requests), logs.String())
				}
				for _, line := range lines {
					if line["action"] != policy || line["timeout"] != (f == hold) {
						t.Errorf("log line action %v, timeout %v; want %s, %v: %v", line["action"], line["timeout"], policy, f == hold, line)
					}
				}

				counts := map[string]string{}
				for _, item := range scan(t, client, table) {
					id := item[dynamostore.KeyAttribute].(*types.AttributeValueMemberS).Value
					for k, v := range item {
						s := k + id
						if n, ok := v.(*types.AttributeValueMemberN); ok {
							s += n.Value
							if strings.HasPrefix(k, "day#") {
								counts[id] = n.Value
							}
						}
						for _, rq := range requests {
							if strings.Contains(s, rq.key) {
								t.Errorf("table holds the raw key: %q", s)
							}
						}
					}
				}
				for _, rq := range requests {
					sum := sha256.Sum256([]byte(rq.key))
					id := "k:" + hex.EncodeToString(sum[:])
					if want := map[bool]string{true: "1", false: ""}[f.applied()]; counts[id] != want {
						t.Errorf("%s: %s's day count %q, want %q (stored: %v)", rq.name, id[:14], counts[id], want, counts)
					}
					if strings.Contains(logs.String(), rq.key) || strings.Contains(logs.String(), id) {
						t.Errorf("%s: logs hold the key or its full hash:\n%s", rq.name, logs.String())
					}
				}
			})
		}
	}
}

// newClient creates table on endpoint and returns a client of it.
func newClient(t *testing.T, endpoint, table string) *dynamodb.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client, err := dynamostore.NewClient(ctx, endpoint)
	if err != nil {
		t.Fatal(err)
	}
	if err := dynamostore.CreateTable(ctx, client, table); err != nil {
		t.Fatal(err)
	}
	return client
}

func scan(t *testing.T, client *dynamodb.Client, table string) []map[string]types.AttributeValue {
	t.Helper()
	out, err := client.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	return out.Items
}

// storeErrorLines returns the "store error" lines of a JSON log.
func storeErrorLines(t *testing.T, logs string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(logs))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		if m["msg"] == "store error" {
			out = append(out, m)
		}
	}
	return out
}
