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
func TestServerOutage(t *testing.T) {
	const storeTimeout = 150 * time.Millisecond
	const margin = time.Second // scheduling on a loaded CI machine, not retries
	srv := dynalite.Run(t)
	client, _, table := newTable(t, srv.Endpoint)
	s, err := dynamostore.New(client, table)
	if err != nil {
		t.Fatal(err)
	}
	lim := limiter.New(limiter.Options{Store: s})
	rules := []limiter.Rule{rule("minute", 1000, time.Minute)}
	n := 0
	check := func() (limiter.Result, error, time.Duration) {
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		defer cancel()
		start := time.Now()
		// One second apart, so that no decision is served from memory alone.
		res, err := lim.Check(ctx, t0.Add(time.Duration(n)*time.Second), "k", rules, 1)
		n++
		return res, err, time.Since(start)
	}
	admit := func(phase string) {
		t.Helper()
		res, err, _ := check()
		if err != nil || !res.Allowed {
			t.Fatalf("%s: Allowed %v, err %v; want admitted", phase, res.Allowed, err)
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
	fail("stopped", false)
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	admit("after restart")

	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	fail("frozen", true)
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	admit("after resume")

	// Only the admitted checks were counted (a frozen server may have
	// applied writes whose answers came too late: at most those five).
	item := stored(t, client, table, "k")
	var total int64
	for k, v := range item {
		if k != dynamostore.TTLAttribute {
			total += v
		}
	}
	t.Logf("stored count %d after 3 admitted checks", total)
	if total < 3 || total > 3+5 {
		t.Errorf("stored %d, want the 3 admitted (plus at most the 5 late writes)", total)
	}
}
