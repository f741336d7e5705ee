package dynamostore_test

import (
	"context"
	"testing"
	"time"

	"github.com/slidegate/slidegate/internal/dynalite"
	"github.com/slidegate/slidegate/kvstore/dynamostore"
	"github.com/slidegate/slidegate/limiter"
	"github.com/slidegate/slidegate/window"
)

// TestOtherConfigKeepsTTL: two writers of one table with different
// configurations, as in a rollout (Lambda versions side by side during a
// gradual deployment, serve processes restarted one by one with a new
// --config): one counts a key under a minute and a day rule, the other,
// whose configuration has no day rule (MaxPeriod a minute), then counts it
// under the minute rule alone, its first write of the key. That write set
// the item's TTL to the minute's (three minutes ahead), below the two days
// the day counter is read for: DynamoDB may then delete the item, and the
// writer with the day rule (or the configuration rolled back to it) finds
// the key's day quota whole again. The TTL now stays at or past the expiry
// of every counter the item holds.
func TestOtherConfigKeepsTTL(t *testing.T) {
	t.Parallel()
	tb := newTable(t, dynalite.Shared(t).Endpoint)
	ctx := context.Background()
	long := limiter.New(limiter.Options{Store: tb.store(t, dynamostore.MaxPeriod(24*time.Hour))})
	short := limiter.New(limiter.Options{Store: tb.store(t, dynamostore.MaxPeriod(time.Minute))})
	if _, err := long.Check(ctx, t0, "k", []limiter.Rule{rule("minute", 10, time.Minute), rule("day", 100, 24*time.Hour)}, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := short.Check(ctx, t0.Add(time.Second), "k", []limiter.Rule{rule("minute", 10, time.Minute)}, 1); err != nil {
		t.Fatal(err)
	}
	d := window.Index(t0, 24*time.Hour)
	item := tb.stored(t, "k")
	if got, want := item[dynamostore.TTLAttribute], window.Start(d+2, 24*time.Hour).Unix(); got < want {
		t.Errorf("ttl = %d (%s), want at least %d (%s), when the day counter stops being read; item %v",
			got, time.Unix(got, 0).UTC(), want, time.Unix(want, 0).UTC(), item)
	}
	if got := item[attr("day", 24*time.Hour, t0)]; got != 1 {
		t.Errorf("day counter %d, want 1", got)
	}
	// The raise is made once: the writer's next write of the key sets the
	// raised TTL itself, in its one request.
	tb.calls.take()
	if _, err := short.Check(ctx, t0.Add(2*time.Second), "k", []limiter.Rule{rule("minute", 10, time.Minute)}, 1); err != nil {
		t.Fatal(err)
	}
	if got := tb.calls.take(); got["UpdateItem"] != 1 || len(got) != 1 {
		t.Errorf("second write of the key: requests %v, want one UpdateItem", got)
	}
	if got, want := tb.stored(t, "k")[dynamostore.TTLAttribute], window.Start(d+2, 24*time.Hour).Unix(); got < want {
		t.Errorf("after the second write: ttl = %d, want at least %d", got, want)
	}
}
