package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/slidegate/slidegate/internal/dynalite"
	"github.com/slidegate/slidegate/internal/testenv"
	"github.com/slidegate/slidegate/kvstore/dynamostore"
)

// TestBootstrapNearDeadline: the built bootstrap, given an invocation
// whose deadline is near (2 s, as a function Timeout of 2 s) in front of an
// origin that does not answer, returns the pre-filter's 504 with the
// rate-limit fields as its response, before the deadline, through the
// Runtime API (not an invocation error, not a timeout of the instance);
// the request stays counted in DynamoDB, and the same process serves the
// next invocation, which sees that count.
func TestBootstrapNearDeadline(t *testing.T) {
	db := dynalite.Run(t)
	const table = "slidegate-e2e-deadline"
	client := newClient(t, db.Endpoint, table)
	bin := buildBootstrap(t)
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // answers nobody in time
	}))
	t.Cleanup(origin.Close)
	rt := newRuntimeAPI(t)
	cfg := fmt.Sprintf(`{"plans": {"free": {"limits": [{"name": "day", "limit": 3, "window": %q}]}}, "store_timeout": "1s"}`, testenv.FarWindow(time.Now()))
	exited := startBootstrap(t, bin, rt, db.Endpoint, EnvTable+"="+table, EnvConfig+"="+cfg, EnvOrigin+"="+origin.URL)
	event, err := os.ReadFile(filepath.Join("testdata", "functionurl-get.json"))
	if err != nil {
		t.Fatal(err)
	}

	const left = 2 * time.Second
	for i, want := range []string{"r=2", "r=1"} {
		// Timed from when the function took the invocation, as Lambda
		// times it: the wait for the process's init is not the request's.
		res, early := rt.invokeWithin(t, event, exited, left)
		if early <= 0 {
			t.Errorf("invocation %d posted %s past its deadline (%s after it was taken)", i, -early, left)
		}
		if res.StatusCode != http.StatusGatewayTimeout || !strings.Contains(res.Headers["Ratelimit"], want) || res.Headers["X-Ratelimit-Remaining"] == "" {
			t.Errorf("invocation %d: %d %v; want the 504 with RateLimit %s", i, res.StatusCode, res.Headers, want)
		}
	}
	counted := ""
	for _, item := range scan(t, client, table) {
		for k, v := range item {
			if n, ok := v.(*types.AttributeValueMemberN); ok && strings.HasPrefix(k, "day#") {
				counted = item[dynamostore.KeyAttribute].(*types.AttributeValueMemberS).Value + " " + n.Value
			}
		}
	}
	if want := "ip:203.0.113.7 2"; counted != want {
		t.Errorf("counted %q, want %q: both requests cut at the origin stay counted", counted, want)
	}
}
