package main

import (
	"bytes"
	"context"
	"strings"
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
	for _, want := range []string{"bare httputil.ReverseProxy", "slidegate + same proxy", "p50 overhead:", "throughput ratio:"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}
