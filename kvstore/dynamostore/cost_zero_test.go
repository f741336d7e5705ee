package dynamostore_test

import (
	"context"
	"testing"
	"time"

	"github.com/slidegate/slidegate/internal/dynalite"
	"github.com/slidegate/slidegate/limiter"
)

// TestCostZeroReadsTheTable: a check of cost 0 (the check API's "reads
// the state without counting") on a Lambda instance, or a `serve --store
// dynamodb` server, that has not served the key was answered from the
// Store's cache, which holds nothing of it: the whole quota left
// (remaining 10 of 10) while the table held 6, and a key the table had
// used up reported as having room. A store that serves Load from a cache
// must read the table for such a check.
func TestCostZeroReadsTheTable(t *testing.T) {
	t.Parallel()
	tb := newTable(t, dynalite.Shared(t).Endpoint)
	rules := []limiter.Rule{rule("minute", 10, time.Minute)}
	ctx := context.Background()
	a := limiter.New(limiter.Options{Store: tb.store(t)})
	for i := range 6 {
		if res, err := a.Check(ctx, t0.Add(time.Duration(i)*time.Second), "k", rules, 1); err != nil || !res.Allowed {
			t.Fatalf("check %d on instance A: allowed %v, %v", i+1, res.Allowed, err)
		}
	}
	b := limiter.New(limiter.Options{Store: tb.store(t)})
	res, err := b.Check(ctx, t0.Add(10*time.Second), "k", rules, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := res.Remaining, int64(4); got != want {
		t.Errorf("cost 0 on instance B: remaining %d, want %d (the table holds 6 of 10)", got, want)
	}
	if got := tb.stored(t, "k")[attr("minute", time.Minute, t0)]; got != 6 {
		t.Errorf("the table holds %d, want 6: a cost of 0 counts nothing", got)
	}
}
