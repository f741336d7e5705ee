package dynamostore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/slidegate/slidegate/kvstore"
)

// TestStaleResponseDoesNotLowerTTL: the answer to an earlier concurrent
// write, arriving after a later one, carries the TTL that write set, lower
// than the one the item now has (a day rule's). The next write, of the
// minute rule alone, must still set the day's TTL: set lower, DynamoDB
// may delete the item, day counts and all, once the minute's buckets
// expire, and the day limit starts over.
func TestStaleResponseDoesNotLowerTTL(t *testing.T) {
	dayTTL := time.Unix(0, 0).Add(20408 * 24 * time.Hour).Unix()
	minuteTTL := (b0 + 2) * 60 // minute(b0) expires when bucket b0+2 begins
	api := &fakeAPI{update: returns(item("minute#1m0s#29384720", 8, "day#24h0m0s#20407", 8, "ttl", dayTTL))}
	s := mustNew(t, api)
	ctx := context.Background()
	both := []kvstore.Cond{{Slot: minute(b0), Max: 100, Add: 1}, {Slot: day(20407), Max: 1000, Add: 1}}
	if _, err := s.AddIf(ctx, "k", both, make([]int64, 2)); err != nil {
		t.Fatal(err)
	}
	// The late answer to a write that set the minute's TTL only.
	api.update = returns(item("minute#1m0s#29384720", 6, "day#24h0m0s#20407", 6, "ttl", minuteTTL))
	one := []kvstore.Cond{{Slot: minute(b0), Max: 100, Add: 1}}
	if _, err := s.AddIf(ctx, "k", one, make([]int64, 1)); err != nil {
		t.Fatal(err)
	}
	api.update = returns(item("minute#1m0s#29384720", 9, "day#24h0m0s#20407", 9, "ttl", dayTTL))
	if _, err := s.AddIf(ctx, "k", one, make([]int64, 1)); err != nil {
		t.Fatal(err)
	}
	in := api.updates[2]
	got := resolve(in, aws.ToString(in.UpdateExpression))
	if want := fmt.Sprintf("SET ttl = %d ", dayTTL); !strings.HasPrefix(got, want) {
		t.Fatalf("third write: %s; want it to begin %q (the day's TTL, not the minute's %d)", got, want, minuteTTL)
	}
}
