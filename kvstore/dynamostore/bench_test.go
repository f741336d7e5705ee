package dynamostore_test

import (
	"context"
	"testing"

	"github.com/slidegate/slidegate/kvstore"
)

// BenchmarkLoad is the limiter's read of a cached identity: no request, no
// allocation.
func BenchmarkLoad(b *testing.B) {
	api := &fakeAPI{update: returns(item("minute#1m0s#29384719", 5, "minute#1m0s#29384720", 2, "day#24h0m0s#20406", 9))}
	s := mustNew(b, api)
	ctx := context.Background()
	if err := s.Add(ctx, "k", []kvstore.Slot{minute(b0)}, []int64{1}); err != nil {
		b.Fatal(err)
	}
	slots := []kvstore.Slot{minute(b0 - 1), minute(b0), day(20405), day(20406)}
	counts := make([]int64, len(slots))
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Load(ctx, "k", slots, counts); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAddIf is the store's share of an admitted decision (building the
// UpdateItem, caching the returned item) against a fake that answers at
// once: the SDK call itself is not measured.
func BenchmarkAddIf(b *testing.B) {
	api := &fakeAPI{update: returns(item("minute#1m0s#29384719", 5, "minute#1m0s#29384720", 2, "day#24h0m0s#20405", 0, "day#24h0m0s#20406", 9, "ttl", 1))}
	s := mustNew(b, api)
	ctx := context.Background()
	conds := []kvstore.Cond{
		{Slot: minute(b0 - 1), Max: 5}, {Slot: minute(b0), Max: 50, Add: 1},
		{Slot: day(20405), Max: 0}, {Slot: day(20406), Max: 9000, Add: 1},
	}
	counts := make([]int64, len(conds))
	b.ReportAllocs()
	for b.Loop() {
		api.updates = api.updates[:0]
		if _, err := s.AddIf(ctx, "k", conds, counts); err != nil {
			b.Fatal(err)
		}
	}
}
