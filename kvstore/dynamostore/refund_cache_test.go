package dynamostore_test

import (
	"context"
	"testing"
	"time"

	"github.com/slidegate/slidegate/internal/dynalite"
	"github.com/slidegate/slidegate/limiter"
)

// TestOtherInstancesRefundSeenByNextWrite: instance B takes back counts
// (the HTTP layer refunding the ip_limits count of requests their plan
// refused) that instance A had seen in an answer. A's cache stays above
// the table until A writes again, and the answer to that write is the
// table's: with a limit of 10, B's 5 and A's 5 counted in 12:00 and B's 5
// taken back, A at 12:01:30 admits 8 (2 weighted of 12:00's 5, and 8),
// not 5. A's writes answered 5 for 12:00, but the cache kept the larger of
// that and the 10 it had seen: A refused the IP, as final, through all of
// 12:01, past the Retry-After docs/lambda.md says such a refusal lasts.
func TestOtherInstancesRefundSeenByNextWrite(t *testing.T) {
	t.Parallel()
	tb := newTable(t, dynalite.Shared(t).Endpoint)
	rules := []limiter.Rule{rule("minute", 10, time.Minute)}
	ctx := context.Background()
	a := limiter.New(limiter.Options{Store: tb.store(t)})
	b := limiter.New(limiter.Options{Store: tb.store(t)})
	var taken []time.Time
	for i := range 5 {
		res, err := b.Check(ctx, t0.Add(time.Duration(i)*time.Second), "ip:192.0.2.1", rules, 1)
		if err != nil || !res.Allowed {
			t.Fatalf("B's check %d: allowed %v, %v", i+1, res.Allowed, err)
		}
		taken = append(taken, res.At)
	}
	for i := range 5 {
		if res, err := a.Check(ctx, t0.Add(time.Duration(10+i)*time.Second), "ip:192.0.2.1", rules, 1); err != nil || !res.Allowed {
			t.Fatalf("A's check %d: allowed %v, %v", i+1, res.Allowed, err)
		}
	}
	for _, at := range taken {
		if err := b.Refund(ctx, at, "ip:192.0.2.1", rules, 1); err != nil {
			t.Fatal(err)
		}
	}
	if got := tb.stored(t, "ip:192.0.2.1")[attr("minute", time.Minute, t0)]; got != 5 {
		t.Fatalf("12:00 holds %d, want 5", got)
	}
	later := t0.Truncate(time.Minute).Add(90 * time.Second) // 12:01:30: 12:00 weighs half
	admitted := 0
	for range 12 {
		res, err := a.Check(ctx, later, "ip:192.0.2.1", rules, 1)
		if err != nil {
			t.Fatal(err)
		}
		if res.Allowed {
			admitted++
		}
	}
	if admitted != 8 {
		t.Errorf("A admitted %d at 12:01:30, want 8 (floor(5 × 0.5) + 8 = 10)", admitted)
	}
}
