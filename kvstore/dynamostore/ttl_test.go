package dynamostore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/slidegate/slidegate/kvstore"
	"github.com/slidegate/slidegate/kvstore/dynamostore"
)

// TestStaleResponseDoesNotLowerTTL: the answer to a write that was in
// flight while a later one was answered carries the TTL it set, lower than
// the one the item now has (a day rule's). The next write, of the minute
// rule alone, must still set the day's TTL: set lower, DynamoDB may delete
// the item, day counts and all, once the minute's buckets expire, and the
// day limit starts over. So must a write after an answer, in order, of
// another writer that set the minute's TTL.
func TestStaleResponseDoesNotLowerTTL(t *testing.T) {
	dayTTL := time.Unix(0, 0).Add(20409 * 24 * time.Hour).Unix() // day(20407) expires when day 20409 begins
	minuteTTL := (b0 + 2) * 60                                   // minute(b0) expires when bucket b0+2 begins
	both := []kvstore.Cond{{Slot: minute(b0), Max: 100, Add: 1}, {Slot: day(20407), Max: 1000, Add: 1}}
	one := []kvstore.Cond{{Slot: minute(b0), Max: 100, Add: 1}}
	ctx := context.Background()
	write := func(s *dynamostore.Store, conds []kvstore.Cond) func() error {
		return func() error {
			_, err := s.AddIf(ctx, "k", conds, make([]int64, len(conds)))
			return err
		}
	}
	dayItem := item("minute#1m0s#29384720", 8, "day#24h0m0s#20407", 8, "ttl", dayTTL)
	minuteItem := item("minute#1m0s#29384720", 6, "day#24h0m0s#20407", 6, "ttl", minuteTTL)
	tests := []struct {
		name string
		run  func(t *testing.T, api *fakeAPI, s *dynamostore.Store)
	}{
		{"late answer", func(t *testing.T, api *fakeAPI, s *dynamostore.Store) {
			overlap(t, api, [2]map[string]types.AttributeValue{minuteItem, dayItem}, 0, [2]func() error{write(s, one), write(s, both)})
		}},
		{"in order", func(t *testing.T, api *fakeAPI, s *dynamostore.Store) {
			api.update = returns(dayItem)
			if err := write(s, both)(); err != nil {
				t.Fatal(err)
			}
			api.update = returns(minuteItem)
			if err := write(s, one)(); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := &fakeAPI{}
			s := mustNew(t, api)
			tt.run(t, api, s)
			api.update = returns(item("minute#1m0s#29384720", 9, "day#24h0m0s#20407", 9, "ttl", dayTTL))
			if err := write(s, one)(); err != nil {
				t.Fatal(err)
			}
			in := api.updates[len(api.updates)-1]
			got := resolve(in, aws.ToString(in.UpdateExpression))
			if want := fmt.Sprintf("SET ttl = %d ", dayTTL); !strings.HasPrefix(got, want) {
				t.Fatalf("third write: %s; want it to begin %q (the day's TTL, not the minute's %d)", got, want, minuteTTL)
			}
		})
	}
}
