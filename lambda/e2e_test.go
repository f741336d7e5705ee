package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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

// runtimeAPI plays the Lambda Runtime API (2018-06-01) for one bootstrap
// process: it hands out events on GET .../invocation/next and collects what
// the function posts back.
type runtimeAPI struct {
	srv  *httptest.Server
	next chan invocation

	mu      sync.Mutex
	seq     int
	pending map[string]chan outcome
	due     map[string]time.Time // each invocation's deadline, as handed out
	initErr chan string
	ready   time.Time // when the function first asked for an invocation: init done
}

type invocation struct {
	id    string
	event []byte
	left  time.Duration // until the invocation's deadline
}

// outcome is what the function posted for one invocation.
type outcome struct {
	body    []byte
	invokeE bool // posted to .../error: an invocation error
	// early is how long before the invocation's deadline the function
	// posted it (negative: after it, when Lambda would have dropped it).
	early time.Duration
}

func newRuntimeAPI(t *testing.T) *runtimeAPI {
	rt := &runtimeAPI{next: make(chan invocation), pending: map[string]chan outcome{}, due: map[string]time.Time{}, initErr: make(chan string, 1)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /2018-06-01/runtime/invocation/next", func(w http.ResponseWriter, r *http.Request) {
		rt.mu.Lock()
		if rt.ready.IsZero() {
			rt.ready = time.Now()
		}
		rt.mu.Unlock()
		select {
		case inv := <-rt.next:
			due := time.UnixMilli(time.Now().Add(inv.left).UnixMilli())
			rt.mu.Lock()
			rt.due[inv.id] = due
			rt.mu.Unlock()
			h := w.Header()
			h.Set("Lambda-Runtime-Aws-Request-Id", inv.id)
			h.Set("Lambda-Runtime-Deadline-Ms", strconv.FormatInt(due.UnixMilli(), 10))
			h.Set("Lambda-Runtime-Invoked-Function-Arn", "arn:aws:lambda:eu-west-1:123456789012:function:slidegate")
			h.Set("Lambda-Runtime-Trace-Id", "Root=1-67a0c0de-0123456789abcdef01234567;Sampled=0")
			h.Set("Content-Type", "application/json")
			_, _ = w.Write(inv.event)
		case <-r.Context().Done():
		}
	})
	post := func(isErr bool) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			rt.mu.Lock()
			ch := rt.pending[r.PathValue("id")]
			early := time.Until(rt.due[r.PathValue("id")])
			delete(rt.pending, r.PathValue("id"))
			rt.mu.Unlock()
			if ch == nil {
				http.Error(w, "unknown request id", http.StatusBadRequest)
				return
			}
			ch <- outcome{body: body, invokeE: isErr, early: early}
			w.WriteHeader(http.StatusAccepted)
		}
	}
	mux.HandleFunc("POST /2018-06-01/runtime/invocation/{id}/response", post(false))
	mux.HandleFunc("POST /2018-06-01/runtime/invocation/{id}/error", post(true))
	mux.HandleFunc("POST /2018-06-01/runtime/init/error", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		select {
		case rt.initErr <- string(body):
		default:
		}
		w.WriteHeader(http.StatusAccepted)
	})
	rt.srv = httptest.NewServer(mux)
	t.Cleanup(rt.srv.Close)
	return rt
}

// invoke sends one event and returns the function's response. An
// invocation error, an init error, an exited process or 20 s of silence
// fail the test.
func (rt *runtimeAPI) invoke(t *testing.T, event []byte, exited <-chan struct{}) events.LambdaFunctionURLResponse {
	t.Helper()
	res, _ := rt.invokeWithin(t, event, exited, 30*time.Second)
	return res
}

// invokeWithin is invoke for an invocation whose deadline is left from
// the moment the function takes it; it also returns how long before that
// deadline the function posted its response (negative: after it).
func (rt *runtimeAPI) invokeWithin(t *testing.T, event []byte, exited <-chan struct{}, left time.Duration) (events.LambdaFunctionURLResponse, time.Duration) {
	t.Helper()
	rt.mu.Lock()
	rt.seq++
	id := fmt.Sprintf("req-%04d", rt.seq)
	ch := make(chan outcome, 1)
	rt.pending[id] = ch
	rt.mu.Unlock()
	timeout := time.After(20 * time.Second)
	select {
	case rt.next <- invocation{id: id, event: event, left: left}:
	case msg := <-rt.initErr:
		t.Fatalf("init error: %s", msg)
	case <-exited:
		t.Fatal("bootstrap exited")
	case <-timeout:
		t.Fatal("bootstrap did not ask for an invocation within 20 s")
	}
	select {
	case out := <-ch:
		if out.invokeE {
			t.Fatalf("invocation error (every HTTP outcome must be a response): %s", out.body)
		}
		var res events.LambdaFunctionURLResponse
		if err := json.Unmarshal(out.body, &res); err != nil {
			t.Fatalf("response %s: %v", out.body, err)
		}
		return res, out.early
	case <-exited:
		t.Fatal("bootstrap exited during an invocation")
	case <-timeout:
		t.Fatal("no response within 20 s")
	}
	panic("unreachable")
}

// buildBootstrap builds ./lambda for the host the way make build-lambda
// builds it for Lambda (-tags lambda.norpc, CGO_ENABLED=0).
func buildBootstrap(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go toolchain: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "bootstrap")
	cmd := exec.Command(goBin, "build", "-tags", "lambda.norpc", "-trimpath", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if fi, err := os.Stat(bin); err == nil {
		t.Logf("bootstrap for the host: %.1f MB", float64(fi.Size())/1e6)
	}
	return bin
}

// startBootstrap runs bin as Lambda runs it, against rt, with DynamoDB at
// endpoint and env (NAME=value) added to its environment; it returns a
// channel closed when the process has exited. The test's end kills it and
// shows its output if the test failed.
func startBootstrap(t *testing.T, bin string, rt *runtimeAPI, endpoint string, env ...string) <-chan struct{} {
	t.Helper()
	cmd := exec.Command(bin)
	cmd.Env = append([]string{
		"HOME=" + t.TempDir(),
		"AWS_LAMBDA_RUNTIME_API=" + strings.TrimPrefix(rt.srv.URL, "http://"),
		"AWS_LAMBDA_FUNCTION_NAME=slidegate",
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE=128",
		"AWS_REGION=eu-west-1",
		"AWS_ACCESS_KEY_ID=local",
		"AWS_SECRET_ACCESS_KEY=local",
		"AWS_EC2_METADATA_DISABLED=true",
		"AWS_ENDPOINT_URL_DYNAMODB=" + endpoint,
	}, env...)
	var out testenv.Buffer
	cmd.Stderr = &out
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("bootstrap output:\n%s", out.String())
		}
	})
	return exited
}

// withSourceIP returns a fixture whose requestContext.http.sourceIp is ip.
func withSourceIP(t *testing.T, fixture []byte, ip string) []byte {
	t.Helper()
	var ev map[string]any
	if err := json.Unmarshal(fixture, &ev); err != nil {
		t.Fatal(err)
	}
	ev["requestContext"].(map[string]any)["http"].(map[string]any)["sourceIp"] = ip
	out, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestBootstrapEndToEnd builds bootstrap, runs it against a Runtime API
// played by the test with dynalite behind it, and sends the fixtures:
// 200s from the origin, then a 429 with its headers and problem+json body;
// 400s are responses too. With dynalite stopped, requests are answered per
// on_store_error (allow) within store_timeout plus a margin; after a
// restart the function recovers by itself.
func TestBootstrapEndToEnd(t *testing.T) {
	db := dynalite.Run(t)
	ctx := context.Background()
	client, err := dynamostore.NewClient(ctx, db.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	const table = "slidegate-e2e"
	if err := dynamostore.CreateTable(ctx, client, table); err != nil {
		t.Fatal(err)
	}
	bin := buildBootstrap(t)
	zipped := testenv.Gzip("hello from the origin\n")
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "text/plain")
		h.Set("X-Seen", r.RequestURI+"|"+r.Header.Get("Cookie")+"|"+r.Header.Get("Accept-Encoding"))
		if strings.HasPrefix(r.URL.Path, "/files/") {
			h.Add("Set-Cookie", "a=1; Path=/; HttpOnly")
			h.Add("Set-Cookie", "b=2; Expires=Wed, 21 Oct 2026 07:28:00 GMT")
			h.Set("Content-Encoding", "gzip")
			h.Set("Content-Length", strconv.Itoa(len(zipped)))
			_, _ = w.Write(zipped)
			return
		}
		_, _ = io.WriteString(w, "hello from the origin\n")
	}))
	t.Cleanup(origin.Close)
	rt := newRuntimeAPI(t)

	// Generous, so that the first writes to a cold dynalite on a loaded
	// machine (go test -race ./... runs packages in parallel) are decided
	// by the store; a stopped store still answers at once (refused).
	const storeTimeout = time.Second
	// bootstrap reads the real clock: a window whose bucket outlasts the run.
	cfg := fmt.Sprintf(`{"plans": {"free": {"limits": [{"name": "day", "limit": 3, "window": %q}]}}, "store_timeout": "1s", "on_store_error": "allow"}`, testenv.FarWindow(time.Now()))
	start := time.Now()
	exited := startBootstrap(t, bin, rt, db.Endpoint, EnvTable+"="+table, EnvConfig+"="+cfg, EnvOrigin+"="+origin.URL)

	fixture := func(name string) []byte {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	for i, name := range []string{"functionurl-get.json", "httpapi-get.json", "functionurl-get.json"} {
		res := rt.invoke(t, fixture(name), exited)
		if i == 0 {
			rt.mu.Lock()
			initDone := rt.ready.Sub(start)
			rt.mu.Unlock()
			t.Logf("cold start: process start to first response %s (init %s)", time.Since(start).Round(time.Millisecond), initDone.Round(time.Millisecond))
		}
		if res.StatusCode != http.StatusOK || res.Body != "hello from the origin\n" {
			t.Fatalf("request %d (%s): %d %q; want 200 from the origin", i, name, res.StatusCode, res.Body)
		}
		if res.Headers[httpapi.StoreHeader] != "" {
			t.Fatalf("request %d decided without the store: %v", i, res.Headers)
		}
	}
	warmStart := time.Now()
	check429(t, rt.invoke(t, fixture("httpapi-get.json"), exited))
	t.Logf("warm invocation (429): %s", time.Since(warmStart).Round(time.Microsecond))

	// Through the runtime's JSON: the request as the client sent it, the
	// origin's cookies and its gzip body (base64) as it sent them.
	res := rt.invoke(t, fixture("functionurl-cookies-gzip.json"), exited)
	if res.StatusCode != http.StatusOK || !res.IsBase64Encoded || res.Headers["Content-Encoding"] != "gzip" {
		t.Fatalf("cookies and gzip: %d base64=%v %v; want 200, base64, Content-Encoding: gzip", res.StatusCode, res.IsBase64Encoded, res.Headers)
	}
	if got, want := res.Headers["X-Seen"], "/files/a%2Fb?tag=x&tag=y&q=a%2Bb%20c|session=abc; theme=dark|gzip, deflate, br"; got != want {
		t.Errorf("origin saw %q, want %q", got, want)
	}
	if got, want := strings.Join(res.Cookies, "|"), "a=1; Path=/; HttpOnly|b=2; Expires=Wed, 21 Oct 2026 07:28:00 GMT"; got != want {
		t.Errorf("cookies %q, want %q", got, want)
	}
	raw, err := base64.StdEncoding.DecodeString(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := res.Headers["Content-Length"], strconv.Itoa(len(raw)); got != want {
		t.Errorf("Content-Length %s, body %d bytes", got, len(raw))
	}
	if got := string(testenv.Gunzip(t, raw)); got != "hello from the origin\n" || res.Headers["Ratelimit"] == "" {
		t.Errorf("body %q, RateLimit %q; want the origin's page and the header", got, res.Headers["Ratelimit"])
	}
	// An HTTP API's decoded path: the client's %3F is not a query.
	res = rt.invoke(t, withSourceIP(t, fixture("httpapi-decoded-path.json"), "198.51.100.21"), exited)
	if got, want := res.Headers["X-Seen"], "/files/what%3F.txt?v=2||"; res.StatusCode != http.StatusOK || got != want {
		t.Errorf("decoded path: %d, origin saw %q; want 200, %q", res.StatusCode, got, want)
	}
	// Its '%' is a client's %25, never an escape, behind a custom domain too.
	res = rt.invoke(t, fixture("httpapi-custom-domain-percent.json"), exited)
	if got, want := res.Headers["X-Seen"], "/notes/100%25/%2541?v=2||"; res.StatusCode != http.StatusOK || got != want {
		t.Errorf("decoded path with %%: %d, origin saw %q; want 200, %q", res.StatusCode, got, want)
	}
	// A Function URL's query with a "+" the event gives as a space: the
	// origin gets the "+" back, not a request line split at the space.
	res = rt.invoke(t, fixture("functionurl-plus-query.json"), exited)
	if got, want := res.Headers["X-Seen"], "/search?q=rate+limit&scope=openid+profile&tag=a%2Bb||"; res.StatusCode != http.StatusOK || got != want {
		t.Errorf("+ in the query: %d %q, origin saw %q; want 200, %q", res.StatusCode, res.Body, got, want)
	}

	if res := rt.invoke(t, fixture("functionurl-check-base64.json"), exited); res.StatusCode != http.StatusOK || !strings.Contains(res.Body, `"allowed":true`) {
		t.Errorf("check API: %d %s; want 200 allowed", res.StatusCode, res.Body)
	}
	for _, name := range []string{"httpapi-check-invalid.json", "httpapi-bad-base64.json"} {
		if res := rt.invoke(t, fixture(name), exited); res.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: %d %s; want a 400 response", name, res.StatusCode, res.Body)
		}
	}

	// The three admitted requests were counted in DynamoDB.
	out, err := client.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, item := range out.Items {
		for k, v := range item {
			if n, ok := v.(*types.AttributeValueMemberN); ok && strings.HasPrefix(k, "day#") && n.Value == "3" {
				found = true
			}
		}
	}
	if !found {
		t.Errorf("no item counts 3 for the day rule: %v", out.Items)
	}

	// Outage: answered per on_store_error within the budget.
	if err := db.Stop(); err != nil {
		t.Fatal(err)
	}
	const margin = 2 * time.Second // the played Runtime API and a loaded CI machine
	for i := range 3 {
		begin := time.Now()
		res := rt.invoke(t, withSourceIP(t, fixture("functionurl-get.json"), fmt.Sprintf("198.51.100.%d", 10+i)), exited)
		took := time.Since(begin)
		if res.StatusCode != http.StatusOK || res.Headers[httpapi.StoreHeader] != httpapi.StoreErrorAllowed {
			t.Errorf("outage request %d: %d %v; want 200 with %s: %s", i, res.StatusCode, res.Headers, httpapi.StoreHeader, httpapi.StoreErrorAllowed)
		}
		if took > storeTimeout+margin {
			t.Errorf("outage request %d answered after %s, want within %s + %s", i, took, storeTimeout, margin)
		}
		t.Logf("outage request %d answered in %s", i, took.Round(time.Millisecond))
	}
	if err := db.Restart(); err != nil {
		t.Fatal(err)
	}
	for i := 1; ; i++ {
		res := rt.invoke(t, withSourceIP(t, fixture("functionurl-get.json"), "198.51.100.99"), exited)
		if res.StatusCode == http.StatusOK && res.Headers[httpapi.StoreHeader] == "" {
			t.Logf("after restart: decided by the store again at request %d", i)
			break
		}
		if i == 10 {
			t.Fatalf("after restart: still %d %v", res.StatusCode, res.Headers)
		}
	}
}
