package dynamostore_test

import (
	"context"
	"math"
	"testing"

	"github.com/slidegate/slidegate/kvstore"
)

// TestCountBeyondInt64Saturates: a counter DynamoDB holds above
// math.MaxInt64 reads as math.MaxInt64, as the memory store's Add stops
// there (d76bcfc). The limiter caps a count_denied add by the count it read,
// but DynamoDB adds without a bound: two adds racing near the top, or a
// Store whose cached count lagged another instance's, took the counter past
// it, and every later read of the item failed as a store error (ErrItem,
// "value out of range"), under on_store_error allow the client admitted
// without a limit until the item expired.
func TestCountBeyondInt64Saturates(t *testing.T) {
	for _, tt := range []struct {
		name, stored string
		want         int64
	}{
		{"just past it", "9223372036854775808", math.MaxInt64},
		{"far past it", "18446744073709551615000", math.MaxInt64},
		{"at it", "9223372036854775807", math.MaxInt64},
	} {
		t.Run(tt.name, func(t *testing.T) {
			api := &fakeAPI{update: returns(item("minute#1m0s#29384720", tt.stored, "ttl", 1))}
			s := mustNew(t, api)
			slots := []kvstore.Slot{minute(b0)}
			if err := s.Add(context.Background(), "k", slots, []int64{1_000_000_000_000_000}); err != nil {
				t.Fatalf("Add: %v", err)
			}
			counts := make([]int64, 1)
			if err := s.Load(context.Background(), "k", slots, counts); err != nil || counts[0] != tt.want {
				t.Errorf("Load = %v, %v; want %d", counts, err, tt.want)
			}
		})
	}
}
