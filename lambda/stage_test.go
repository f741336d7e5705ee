package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate/config"
)

// TestNamedStagePath: a stage other than $default is the first segment of
// rawPath and requestContext.http.path, through the HTTP API's own
// endpoint (the client asked for /prod/hello) and through a custom domain
// mapped to the stage (the client asked for /hello, or /orders/hello under
// the mapping key orders); the handler, and so the costs, the check API
// and the origin, get the path without it (/hello). A path whose first
// segment is not the stage's name is the client's.
func TestNamedStagePath(t *testing.T) {
	tests := []struct {
		name, domain, stage, path string
		want                      string // RequestURI without the query
	}{
		{"named stage", httpAPIDomain, "prod", "/prod/hello", "/hello"},
		{"named stage, its root", httpAPIDomain, "prod", "/prod", "/"},
		{"named stage, its root with a slash", httpAPIDomain, "prod", "/prod/", "/"},
		{"named stage, decoded path", httpAPIDomain, "prod", "/prod/files/a%2Fb", "/files/a%252Fb"},
		{"named stage, domain name in capitals with a dot", "ABCDEF1234.execute-api.eu-west-1.amazonaws.com.", "prod", "/prod/hello", "/hello"},
		{"named stage, China", "abcdef1234.execute-api.cn-north-1.amazonaws.com.cn", "prod", "/prod/hello", "/hello"},
		{"a segment that only begins with the stage's name", httpAPIDomain, "prod", "/production/x", "/production/x"},
		{"the stage's name further on", httpAPIDomain, "prod", "/a/prod/x", "/a/prod/x"},
		{"$default stage", httpAPIDomain, "$default", "/prod/hello", "/prod/hello"},
		{"custom domain mapped to the stage", "api.example.com", "prod", "/prod/hello", "/hello"},
		{"custom domain, its root", "api.example.com", "prod", "/prod", "/"},
		{"custom domain, the stage's name in the client's path", "api.example.com", "prod", "/prod/prod/hello", "/prod/hello"},
		{"custom domain, a segment that only begins with the stage's name", "api.example.com", "prod", "/products/1", "/products/1"},
		{"custom domain, no stage in the path", "api.example.com", "prod", "/hello", "/hello"},
		{"Function URL", fnURLDomain, "prod", "/prod/hello", "/prod/hello"},
	}
	for _, tt := range tests {
		// Each path as rawPath, then as requestContext.http.path alone.
		for _, raw := range []bool{true, false} {
			ev := event(t, "httpapi-get.json")
			ev.RequestContext.DomainName, ev.RequestContext.Stage = tt.domain, tt.stage
			ev.RawPath, ev.RequestContext.HTTP.Path, ev.RawQueryString = "", tt.path, "q=1"
			if raw {
				ev.RawPath = tt.path
			}
			r, err := request(context.Background(), &ev)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := r.RequestURI, tt.want+"?q=1"; got != want {
				t.Errorf("%s (rawPath %v): RequestURI %q, want %q", tt.name, raw, got, want)
			}
		}
	}
}

// TestNamedStageCheckAPI: the check API of a function behind a named stage
// answers at /<stage>/v1/check through the API's own endpoint, and at
// /v1/check through a custom domain mapped to the stage, whose rawPath
// holds the stage all the same.
func TestNamedStageCheckAPI(t *testing.T) {
	cfg, err := config.Parse([]byte(testConfig))
	if err != nil {
		t.Fatal(err)
	}
	for _, domain := range []string{httpAPIDomain, "api.example.com"} {
		handle := proxiedAt(t, cfg, time.Date(2026, 11, 22, 12, 0, 13, 0, time.UTC), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			t.Errorf("%s: the origin got %s %s", domain, r.Method, r.RequestURI)
		}))
		ev := event(t, "httpapi-named-stage.json")
		ev.RequestContext.DomainName, ev.Headers["host"] = domain, domain
		res, err := handle(context.Background(), ev)
		if err != nil || res.StatusCode != http.StatusOK || !strings.Contains(res.Body, `"allowed":true`) {
			t.Errorf("%s: check API under the stage prod: %d %s, %v; want 200 allowed", domain, res.StatusCode, res.Body, err)
		}
	}
}
