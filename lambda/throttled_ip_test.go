package main

import (
	"bytes"
	"context"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slidegate/slidegate/internal/dynalite"
	"github.com/slidegate/slidegate/internal/testenv"
)

// TestThrottledIPItemLeavesKeyDenied: a client whose key has used its
// plan floods from one address, whose item (ip_limits, shared) DynamoDB
// throttles, while the key's item answers. Under on_store_error allow the
// plan still decides: its denial, from the key's counts and then from the
// deny cache, is a 429. The plan was not asked once the ip rule's write
// failed, and every throttled request of the used-up key reached the
// origin, uncounted: throttling the address's item, which the client can
// do itself, undid the key's limit (docs/lambda.md says an instance that
// has seen a client reach its limit refuses it from memory, "throttled or
// not").
func TestThrottledIPItemLeavesKeyDenied(t *testing.T) {
	db := dynalite.Run(t)
	target, err := url.Parse(db.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	var keyWrites atomic.Int64
	px := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.Header.Get("X-Amz-Target"), ".UpdateItem") {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			if bytes.Contains(body, []byte(`"ip:`)) {
				const throttled = `{"__type":"com.amazonaws.dynamodb.v20120810#ThrottlingException","message":"Rate of requests exceeds the allowed throughput."}`
				w.Header().Set("Content-Type", "application/x-amz-json-1.0")
				w.Header().Set("X-Amz-Crc32", strconv.FormatUint(uint64(crc32.ChecksumIEEE([]byte(throttled))), 10))
				w.WriteHeader(http.StatusBadRequest)
				_, _ = io.WriteString(w, throttled)
				return
			}
			keyWrites.Add(1)
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(px.Close)
	var served atomic.Int64
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		_, _ = io.WriteString(w, "origin\n")
	}))
	t.Cleanup(origin.Close)
	awsEnv(t, "")
	t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", px.URL)
	table := "slidegate-lambda-throttled-ip"
	newClient(t, db.Endpoint, table)
	cfg := fmt.Sprintf(`{"plans": {"free": {"limits": [{"name": "day", "limit": 3, "window": %q}]}},
		"ip_limits": [{"name": "ip-day", "limit": 1000, "window": %[1]q}],
		"store_timeout": "10s", "on_store_error": "allow"}`, testenv.FarWindow(time.Now()))
	env := map[string]string{EnvTable: table, EnvConfig: cfg, EnvOrigin: origin.URL}
	var logs testenv.Buffer
	h, err := setup(context.Background(), func(k string) string { return env[k] }, &logs)
	if err != nil {
		t.Fatal(err)
	}
	ev := event(t, "functionurl-get.json")
	ev.Headers["x-api-key"] = "used-up-key"
	var codes []int
	for range 6 {
		res, err := Adapt(h)(context.Background(), ev)
		if err != nil {
			t.Fatal(err)
		}
		codes = append(codes, res.StatusCode)
	}
	if want := []int{200, 200, 200, 429, 429, 429}; !slices.Equal(codes, want) {
		t.Errorf("statuses %v, want %v (the key's day of 3)", codes, want)
	}
	if n := served.Load(); n != 3 {
		t.Errorf("the origin served %d requests, want 3", n)
	}
	if n := keyWrites.Load(); n > 4 {
		t.Errorf("%d writes of the key's item, want at most 4 (3 admitted, 1 refused; then the deny cache)", n)
	}
}
