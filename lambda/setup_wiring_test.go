package main

import (
	"context"
	"encoding/json"
	"hash/crc32"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slidegate/slidegate/httpapi"
)

// fakeDynamo is a DynamoDB endpoint that answers GetItem with no item and
// UpdateItem with the item the update's ADD clauses would make of nothing,
// and records the TTL each UpdateItem sets.
type fakeDynamo struct {
	mu   sync.Mutex
	ttls []int64
}

func (f *fakeDynamo) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var in struct {
		ExpressionAttributeNames  map[string]string
		ExpressionAttributeValues map[string]map[string]string
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if !strings.HasSuffix(r.Header.Get("X-Amz-Target"), ".UpdateItem") {
		answer(w, map[string]any{})
		return
	}
	attrs := map[string]map[string]string{}
	for p, name := range in.ExpressionAttributeNames {
		if v, ok := in.ExpressionAttributeValues[":a"+strings.TrimPrefix(p, "#c")]; ok && strings.HasPrefix(p, "#c") {
			attrs[name] = v
		}
	}
	ttl := in.ExpressionAttributeValues[":t"]
	attrs["ttl"] = ttl
	n, _ := strconv.ParseInt(ttl["N"], 10, 64)
	f.mu.Lock()
	f.ttls = append(f.ttls, n)
	f.mu.Unlock()
	answer(w, map[string]any{"Attributes": attrs})
}

// answer writes v as DynamoDB answers, with the checksum the SDK verifies.
func answer(w http.ResponseWriter, v any) {
	body, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("X-Amz-Crc32", strconv.FormatUint(uint64(crc32.ChecksumIEEE(body)), 10))
	_, _ = w.Write(body)
}

// fakeDynamoEnv points the AWS SDK at a fakeDynamo, with placeholder
// credentials and no shared configuration.
func fakeDynamoEnv(t *testing.T) *fakeDynamo {
	t.Helper()
	f := &fakeDynamo{}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	awsEnv(t, srv.URL)
	return f
}

// awsEnv gives the AWS SDK placeholder credentials, a region, no shared
// configuration and no retry settings from the machine, and endpoint as
// DynamoDB's endpoint when it is not empty.
func awsEnv(t *testing.T, endpoint string) {
	t.Helper()
	home := t.TempDir()
	for k, v := range map[string]string{
		"HOME": home, "AWS_CONFIG_FILE": filepath.Join(home, "config"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(home, "credentials"),
		"AWS_REGION": "eu-west-1", "AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local", "AWS_SESSION_TOKEN": "",
		"AWS_EC2_METADATA_DISABLED": "true", "AWS_MAX_ATTEMPTS": "", "AWS_RETRY_MODE": "", "AWS_ENDPOINT_URL_DYNAMODB": endpoint,
	} {
		t.Setenv(k, v)
	}
}

// TestSetupWiresConfig: the handler setup builds from the environment
// applies the configuration beyond the plans: identity.trusted_proxies
// reach the proxy (a Lambda behind CloudFront passes the client's chain
// to the origin, not CloudFront's address alone), and the table's TTL
// covers the longest window of any plan (a write of a minute rule keeps
// the item for a day rule another plan's writer still reads).
func TestSetupWiresConfig(t *testing.T) {
	db := fakeDynamoEnv(t)
	var xff []string
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		xff = r.Header.Values("X-Forwarded-For")
	}))
	t.Cleanup(origin.Close)
	env := map[string]string{EnvTable: "t", EnvOrigin: origin.URL, EnvConfig: `{
		"plans": {"free": {"limits": [{"name": "minute", "limit": 100, "window": "1m"}]},
		          "pro": {"limits": [{"name": "day", "limit": 1000, "window": "24h"}]}},
		"default_plan": "free", "api_keys": {},
		"identity": {"trusted_proxies": ["203.0.113.0/24"]}}`}
	h, err := setup(context.Background(), func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	res, err := Adapt(h)(context.Background(), event(t, "httpapi-get.json")) // sourceIp 203.0.113.7
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("answer %d %v: %s", res.StatusCode, err, res.Body)
	}
	if mark := res.Headers[httpapi.StoreHeader]; mark != "" {
		t.Fatalf("store error %q: the fake DynamoDB did not answer as the store expects", mark)
	}
	if got, want := strings.Join(xff, "|"), "198.51.100.99, 203.0.113.7"; got != want {
		t.Errorf("the origin got X-Forwarded-For %q, want %q", got, want)
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	if len(db.ttls) != 1 {
		t.Fatalf("%d writes, want 1", len(db.ttls))
	}
	if least := before.Add(48 * time.Hour).Unix(); db.ttls[0] < least {
		t.Errorf("TTL %s, want at least %s (two of the longest window, 24h)", time.Unix(db.ttls[0], 0).UTC(), time.Unix(least, 0).UTC())
	}
}
