package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestMeasureSmall runs a tiny bounded load: both front ends answer every
// request 200 and the report has both rows and the ratios. (Numbers are
// not asserted: they belong to BENCHMARKS.md, not to a test.)
func TestMeasureSmall(t *testing.T) {
	o := options{conc: 4, rounds: 2, phase: 200 * time.Millisecond, maxReq: 300, keys: 10}
	rep, err := measure(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if rep.bare.requests == 0 || rep.filtered.requests == 0 {
		t.Fatalf("no requests: bare %d filtered %d", rep.bare.requests, rep.filtered.requests)
	}
	if rep.bare.requests > 2*300 || rep.filtered.requests > 2*300 {
		t.Errorf("more requests than the bound: %d %d", rep.bare.requests, rep.filtered.requests)
	}
	if rep.limited != 0 {
		t.Errorf("%d requests were rate limited", rep.limited)
	}
	var out bytes.Buffer
	rep.write(&out)
	if len(rep.rpsRatio) != 2 || len(rep.p50Ratio) != 2 {
		t.Errorf("per-round ratios %v %v, want 2 each", rep.rpsRatio, rep.p50Ratio)
	}
	for _, want := range []string{"bare httputil.ReverseProxy", "slidegate + same proxy", "p50 overhead", "throughput ratio"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

// TestVariants: each cost-splitting variant serves every request 200.
func TestVariants(t *testing.T) {
	for _, v := range []string{"headers", "decision"} {
		o := options{conc: 2, rounds: 1, phase: 100 * time.Millisecond, maxReq: 50, keys: 5, variant: v}
		if _, err := measure(context.Background(), o); err != nil {
			t.Errorf("variant %s: %v", v, err)
		}
	}
	if _, err := measure(context.Background(), options{conc: 1, rounds: 1, phase: time.Millisecond, maxReq: 1, variant: "bogus"}); err == nil {
		t.Error("unknown variant accepted")
	}
}

func TestMedian(t *testing.T) {
	for _, tt := range []struct {
		xs   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{3, 1, 2}, 2}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(tt.xs); got != tt.want {
			t.Errorf("median(%v) = %v, want %v", tt.xs, got, tt.want)
		}
	}
}

// TestDriveOnly: -drive sends exactly -n requests and fails when a front
// end answers anything but 200 (here an origin that rate-limits).
func TestDriveOnly(t *testing.T) {
	f, err := setup(options{keys: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var hits atomic.Int64
	counted := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n := hits.Add(1); n > 20 {
			w.WriteHeader(http.StatusTooManyRequests)
		}
	}))
	defer counted.Close()
	o := options{conc: 3, maxReq: 20, keys: 10}
	if err := driveOnly(o, counted.URL); err != nil {
		t.Fatalf("20 requests to a server that admits 20: %v", err)
	}
	if got := hits.Load(); got != 20 {
		t.Errorf("-drive -n 20 sent %d requests", got)
	}
	if err := driveOnly(o, counted.URL); err == nil || !strings.Contains(err.Error(), "20 non-200") {
		t.Errorf("answers of 429 gave %v, want an error counting 20 non-200 answers", err)
	}
	for _, u := range []string{f.bare, f.filtered} {
		if err := driveOnly(options{conc: 2, maxReq: 30, keys: 10}, u); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
}
