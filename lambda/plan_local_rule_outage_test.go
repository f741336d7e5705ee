package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
)

// TestPlanLocalRuleCountsThroughOutage: a plan with a local flood guard
// ("burst", 2 a minute, scope local) beside a shared limit. While DynamoDB
// fails every write, on_store_error allow lets requests through; the local
// rule, counted in the instance's memory, must still hold the client to 2
// (found by the store-failure review: the local count was taken back and
// the local denial answered as a store error, so every request passed),
// also when ip_limits has a shared rule, whose write fails first.
func TestPlanLocalRuleCountsThroughOutage(t *testing.T) {
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, `{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"down"}`)
	}))
	t.Cleanup(down.Close)
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "origin\n") }))
	t.Cleanup(origin.Close)
	awsEnv(t, down.URL)
	const plans = `"plans": {"free": {"limits": [{"name": "burst", "limit": 2, "window": "1m", "scope": "local"}, {"name": "day", "limit": 1000, "window": "24h"}]}}, "on_store_error": "allow"`
	for _, tc := range []struct{ name, cfg string }{
		{"plan alone", `{` + plans + `}`},
		// The ip rule's write fails first; the plan was not asked, and
		// every request passed.
		{"behind a shared ip rule", `{"ip_limits": [{"name": "ip-min", "limit": 100, "window": "1m"}], ` + plans + `}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{EnvTable: "t", EnvConfig: tc.cfg, EnvOrigin: origin.URL}
			h, err := setup(context.Background(), func(k string) string { return env[k] }, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			var codes []int
			for range 5 {
				res, err := Adapt(h)(context.Background(), event(t, "functionurl-get.json"))
				if err != nil {
					t.Fatal(err)
				}
				codes = append(codes, res.StatusCode)
			}
			if want := []int{200, 200, 429, 429, 429}; !slices.Equal(codes, want) {
				t.Errorf("statuses %v, want %v: the local burst rule holds in the outage", codes, want)
			}
		})
	}
}
