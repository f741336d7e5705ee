package main

import (
	"bufio"
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
	"os"
	"path/filepath"
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
	// drop forwards the write, then closes the connection unanswered.
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
// to every UpdateItem and counts them.
func writeFaultProxy(t *testing.T, endpoint string, f writeFault) (string, func() int) {
	t.Helper()
	target, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	var mu sync.Mutex
	writes := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.Header.Get("X-Amz-Target"), ".UpdateItem") {
			rp.ServeHTTP(w, r)
			return
		}
		mu.Lock()
		writes++
		mu.Unlock()
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
		case drop:
			c, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				_ = c.Close()
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
	return srv.URL, func() int { mu.Lock(); defer mu.Unlock(); return writes }
}

// TestStoreFaultsThroughLambda runs the function's handler (setup, Adapt)
// against dynalite behind a proxy that breaks every conditional write: the
// request is answered per on_store_error within store_timeout plus a
// margin, marked with the Slidegate-Store header, logged as a store error,
// never taken for a decision of the store; a write the server applied is
// counted once (not lost, not retried), a throttled one is retried within
// the budget, and neither the table nor the log
// holds the raw API key.
func TestStoreFaultsThroughLambda(t *testing.T) {
	db := dynalite.Run(t)
	const storeTimeout = 150 * time.Millisecond
	const margin = 2 * time.Second // a loaded machine, not retries
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "origin\n")
	}))
	t.Cleanup(origin.Close)
	fixture, err := os.ReadFile(filepath.Join("testdata", "functionurl-get.json"))
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	for k, v := range map[string]string{
		"HOME": home, "AWS_CONFIG_FILE": filepath.Join(home, "config"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(home, "credentials"),
		"AWS_REGION": "eu-west-1", "AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local", "AWS_SESSION_TOKEN": "",
		"AWS_EC2_METADATA_DISABLED": "true", "AWS_MAX_ATTEMPTS": "", "AWS_RETRY_MODE": "",
	} {
		t.Setenv(k, v)
	}
	seq := 0
	for _, f := range []writeFault{hold, drop, emptyOK, throttle} {
		for _, policy := range []string{"allow", "deny"} {
			t.Run(f.String()+"/"+policy, func(t *testing.T) {
				proxy, writes := writeFaultProxy(t, db.Endpoint, f)
				t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", proxy)
				seq++
				table := fmt.Sprintf("slidegate-lambda-fault-%d", seq)
				client := newClient(t, db.Endpoint, table)
				cfg := fmt.Sprintf(`{"plans": {"free": {"limits": [{"name": "day", "limit": 100, "window": %q}]}}, "store_timeout": %q, "on_store_error": %q}`,
					testenv.FarWindow(time.Now()), storeTimeout, policy)
				env := map[string]string{EnvTable: table, EnvConfig: cfg, EnvOrigin: origin.URL}
				var logs testenv.Buffer
				h, err := setup(context.Background(), func(k string) string { return env[k] }, &logs)
				if err != nil {
					t.Fatal(err)
				}
				const rawKey = "sk_live_Raw-Key-1234567890"
				ev := withHeader(t, fixture, "x-api-key", rawKey)

				begin := time.Now()
				res, err := Adapt(h)(context.Background(), ev)
				took := time.Since(begin)
				if err != nil {
					t.Fatal(err)
				}
				want, mark := http.StatusOK, httpapi.StoreErrorAllowed
				if policy == "deny" {
					want, mark = http.StatusServiceUnavailable, httpapi.StoreErrorDenied
				}
				if res.StatusCode != want || res.Headers[httpapi.StoreHeader] != mark {
					t.Errorf("answer %d, %s: %q; want %d, %q", res.StatusCode, httpapi.StoreHeader, res.Headers[httpapi.StoreHeader], want, mark)
				}
				if took > storeTimeout+margin {
					t.Errorf("answered after %s, want within %s + %s", took, storeTimeout, margin)
				}
				t.Logf("answered in %s", took.Round(time.Millisecond))
				if n := writes(); n != f.attempts() {
					t.Errorf("%d UpdateItem requests, want %d (only a throttled write is retried)", n, f.attempts())
				}

				line := storeErrorLine(t, logs.String())
				if line == nil {
					t.Fatalf("no store error logged:\n%s", logs.String())
				}
				if line["action"] != policy || line["timeout"] != (f == hold) {
					t.Errorf("log line action %v, timeout %v; want %s, %v: %v", line["action"], line["timeout"], policy, f == hold, line)
				}

				sum := sha256.Sum256([]byte(rawKey))
				id := "k:" + hex.EncodeToString(sum[:])
				items := scan(t, client, table)
				var count string
				for _, item := range items {
					for k, v := range item {
						s := fmt.Sprint(k, v)
						if n, ok := v.(*types.AttributeValueMemberS); ok {
							s += n.Value
						}
						if strings.Contains(s, rawKey) {
							t.Errorf("table holds the raw key: %q", s)
						}
					}
					if item[dynamostore.KeyAttribute].(*types.AttributeValueMemberS).Value != id {
						continue
					}
					for k, v := range item {
						if strings.HasPrefix(k, "day#") {
							count = v.(*types.AttributeValueMemberN).Value
						}
					}
				}
				if wantCount := map[bool]string{true: "1", false: ""}[f.applied()]; count != wantCount {
					t.Errorf("%s's day count %q, want %q", id[:14], count, wantCount)
				}
				if strings.Contains(logs.String(), rawKey) || strings.Contains(logs.String(), id) {
					t.Errorf("logs hold the key or its full hash:\n%s", logs.String())
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

// withHeader returns the event of fixture with one more header.
func withHeader(t *testing.T, fixture []byte, name, value string) events.APIGatewayV2HTTPRequest {
	t.Helper()
	var ev events.APIGatewayV2HTTPRequest
	if err := json.Unmarshal(fixture, &ev); err != nil {
		t.Fatal(err)
	}
	ev.Headers[name] = value
	return ev
}

// storeErrorLine returns the first "store error" line of a JSON log.
func storeErrorLine(t *testing.T, logs string) map[string]any {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(logs))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		if m["msg"] == "store error" {
			return m
		}
	}
	return nil
}
