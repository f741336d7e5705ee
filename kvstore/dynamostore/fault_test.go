package dynamostore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/slidegate/slidegate/internal/dynalite"
	"github.com/slidegate/slidegate/kvstore/dynamostore"
	"github.com/slidegate/slidegate/limiter"
)

// TestServerOutage takes dynalite away mid-run, first killed (connections
// refused) then frozen (connections accepted, never answered): every check
// returns an error within the store timeout plus a generous margin (the HTTP
// layer turns it into its on_store_error answer), and after the server comes
// back the same store recovers by itself, with the counts kept.
//
// It does not run in parallel with the load tests of this package: its
// bounds are about the store, not about a starved scheduler.
func TestServerOutage(t *testing.T) {
	const storeTimeout = 150 * time.Millisecond
	const margin = 2 * time.Second // scheduling on a loaded machine (-race, parallel packages), not retries
	srv := dynalite.Run(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("dynalite output:\n%s", srv.Output())
		}
	})
	tb := newTable(t, srv.Endpoint)
	lim := limiter.New(limiter.Options{Store: tb.store(t)})
	rules := []limiter.Rule{rule("minute", 1000, time.Minute)}
	// unsure counts the checks that failed while the server process was
	// there: it may have received their write and apply it later.
	n, admitted, unsure := 0, int64(0), int64(0)
	alive := true
	check := func() (limiter.Result, error, time.Duration) {
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		defer cancel()
		start := time.Now()
		// One second apart, so that no decision is served from memory alone.
		res, err := lim.Check(ctx, t0.Add(time.Duration(n)*time.Second), "k", rules, 1)
		n++
		if err != nil && alive {
			unsure++
		}
		return res, err, time.Since(start)
	}
	// admit checks until one is admitted: a server just back may first
	// work through requests its clients gave up on. It reports how many
	// checks that took; it fails after 20 (about 3 s).
	admit := func(phase string) {
		t.Helper()
		for i := 1; ; i++ {
			res, err, _ := check()
			if err == nil && res.Allowed {
				t.Logf("%s: admitted at check %d", phase, i)
				admitted++
				return
			}
			if i == 20 {
				t.Fatalf("%s: Allowed %v, err %v; want admitted", phase, res.Allowed, err)
			}
		}
	}
	fail := func(phase string, deadline bool) {
		t.Helper()
		var slowest time.Duration
		defer func() { t.Logf("%s: slowest of 5 failed checks took %s", phase, slowest) }()
		for range 5 {
			_, err, took := check()
			slowest = max(slowest, took)
			if err == nil {
				t.Fatalf("%s: check succeeded", phase)
			}
			if took > storeTimeout+margin {
				t.Errorf("%s: error after %s, want within %s + %s", phase, took, storeTimeout, margin)
			}
			if deadline && !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%s: error %v, want the context deadline", phase, err)
			}
		}
	}

	admit("before")
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	alive = false
	fail("stopped", false)
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	alive = true
	admit("after restart")

	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	fail("frozen", true)
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	admit("after resume")

	// The admitted checks were counted, and perhaps writes that a frozen
	// server applied after their callers gave up: a store error never
	// loses a count, it may add one.
	item := tb.stored(t, "k")
	var total int64
	for k, v := range item {
		if k != dynamostore.TTLAttribute {
			total += v
		}
	}
	t.Logf("stored count %d after %d admitted checks and %d failed ones the server may have applied", total, admitted, unsure)
	if total < admitted || total > admitted+unsure {
		t.Errorf("stored %d, want the %d admitted plus at most %d late writes", total, admitted, unsure)
	}
}
