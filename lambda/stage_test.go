package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate/config"
)

// TestNamedStagePath: through an HTTP API's own endpoint, a stage other
// than $default is the first segment of rawPath and requestContext.http.path
// (the client asked for /prod/hello); the handler, and so the costs, the
// check API and the origin, get the path without it (/hello), as through a
// custom domain mapped to that stage. On any other domain name the path is
// the client's, whatever it begins with.
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
		{"custom domain: no stage in the path", "api.example.com", "prod", "/prod/hello", "/prod/hello"},
		{"another API's endpoint", "zzzzzz9999.execute-api.eu-west-1.amazonaws.com", "prod", "/prod/hello", "/prod/hello"},
		{"a name made like an endpoint", "abcdef1234.execute-api.eu-west-1.amazonaws.com.example.com", "prod", "/prod/hello", "/prod/hello"},
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
// is at /<stage>/v1/check, and answers there.
func TestNamedStageCheckAPI(t *testing.T) {
	cfg, err := config.Parse([]byte(testConfig))
	if err != nil {
		t.Fatal(err)
	}
	handle := proxiedAt(t, cfg, time.Date(2026, 11, 22, 12, 0, 13, 0, time.UTC), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the origin got %s %s", r.Method, r.RequestURI)
	}))
	res, err := handle(context.Background(), event(t, "httpapi-named-stage.json"))
	if err != nil || res.StatusCode != http.StatusOK || !strings.Contains(res.Body, `"allowed":true`) {
		t.Errorf("check API under the stage prod: %d %s, %v; want 200 allowed", res.StatusCode, res.Body, err)
	}
}
