package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/slidegate/slidegate/internal/jsonv"
)

func TestPeriod(t *testing.T) {
	for d, want := range map[time.Duration]string{time.Second: "1s", 90 * time.Second: "1m30s", time.Minute: "1m", 24 * time.Hour: "24h", 90 * time.Minute: "1h30m"} {
		if got := period(d); got != want {
			t.Errorf("period(%v) = %q, want %q", d, got, want)
		}
	}
}

// TestBodiesLikeEncodingJSON holds the hand-written body writers to what
// json.Marshal makes of the same structs, tags and omitempty included.
func TestBodiesLikeEncodingJSON(t *testing.T) {
	bodies := []encoder{
		&problem{Type: "about:blank", Title: "Bad Request", Status: 400, Detail: `cost: "x" <&>`},
		&problem{Type: "about:blank", Title: "Bad Request", Status: 400, Detail: "d", InvalidParams: []invalidParam{{Name: "key", Reason: "is required"}, {Name: "cost", Reason: "-1: must not be negative"}}},
		&tooMany{Type: RateLimitedType, Title: "Too Many Requests", Status: 429, Detail: "Limit \"minute\" (60 per 1m) is used up; retry in 3 s.", ViolatedPolicies: []string{"minute", "day"}, Limit: 60, Remaining: 0, RetryAfterMS: 2500, Plan: "free"},
		&tooMany{Type: RateLimitedType, Title: "Too Many Requests", Status: 429, ViolatedPolicies: []string{"ip-second"}, Limit: 50, RetryAfterMS: -1, Plan: "pro", UpgradeURL: "https://example.com/upgrade?from=pro&x=é"},
		&checkResponse{Allowed: true, Plan: "free", Rules: []checkRule{}, StoreError: true},
		&checkResponse{Allowed: false, Limit: 60, Remaining: 0, ResetAfterMS: 60000, RetryAfterMS: 1001, Policy: "minute", Plan: "free", ShadowDenied: true, Rules: []checkRule{
			{Name: "minute", Allowed: false, Limit: 60, WindowS: 60, ResetAfterMS: 60000, RetryAfterMS: 1001},
			{Name: "day", Allowed: true, Limit: 10000, WindowS: 86400, Remaining: 9000, ResetAfterMS: 86400000},
		}},
	}
	for _, b := range bodies {
		want, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		var e jsonv.Encoder
		b.encode(&e)
		if got := e.Bytes(); !bytes.Equal(got, want) {
			t.Errorf("%T:\n got %s\nwant %s", b, got, want)
		}
	}
}

func TestWriteProblem(t *testing.T) {
	w := httptest.NewRecorder()
	WriteProblem(w, http.StatusBadGateway, "origin unreachable", `the "origin" did not answer`)
	if w.Code != http.StatusBadGateway || w.Header().Get("Content-Type") != "application/problem+json" || w.Header().Get("Cache-Control") != "no-store" {
		t.Errorf("%d %v", w.Code, w.Header())
	}
	var p problem
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
		t.Fatalf("body %q: %v", w.Body, err)
	}
	if want := (problem{Type: "about:blank", Title: "origin unreachable", Status: 502, Detail: `the "origin" did not answer`}); !reflect.DeepEqual(p, want) {
		t.Errorf("problem = %+v, want %+v", p, want)
	}
}
