package httpapi

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/slidegate/slidegate/kvstore"
	"github.com/slidegate/slidegate/kvstore/memstore"
)

// ipItemDown is a shared store whose calls for IP identities fail, as a
// DynamoDB table throttles one hot item (a client flooding from one
// address) or a Worker's KV list of a new address outlasts store_timeout,
// while the key's counts answer.
type ipItemDown struct{ s *memstore.Store }

var errIPItem = errors.New("ip item: ThrottlingException")

func (s ipItemDown) Load(ctx context.Context, id string, slots []kvstore.Slot, counts []int64) error {
	if strings.HasPrefix(id, "ip:") {
		return errIPItem
	}
	return s.s.Load(ctx, id, slots, counts)
}

func (s ipItemDown) Add(ctx context.Context, id string, slots []kvstore.Slot, costs []int64) error {
	if strings.HasPrefix(id, "ip:") {
		return errIPItem
	}
	return s.s.Add(ctx, id, slots, costs)
}

// TestFailedIPRuleStillAsksThePlan: under on_store_error allow, a shared
// ip_limits rule whose store call fails leaves the request to the plan,
// whose denial stands. The plan was not asked: a client whose key had used
// its minute (3) was let through, uncounted, on every request whose ip
// check failed, which it can bring about itself (flooding its address's
// DynamoDB item past the write rate, which throttles it; a fresh address
// for each request to a Worker isolate while KV lists outlast
// store_timeout), though the key's own counts, and on the Lambda its deny
// cache, refused it.
func TestFailedIPRuleStillAsksThePlan(t *testing.T) {
	cfg := testConfig(t, func(m map[string]any) {
		m["ip_limits"] = []any{map[string]any{"name": "ip-min", "limit": 100, "window": "1m"}}
		m["costs"] = []any{}
		m["on_store_error"] = "allow"
	})
	f := newFixture(t, cfg, func(o *Options) { o.Store = ipItemDown{memstore.New()} })
	var codes []int
	for range 5 {
		w := f.do(req{header: map[string]string{"X-API-Key": "used-up"}})
		codes = append(codes, w.Code)
	}
	if want := []int{200, 200, 200, 429, 429}; !slices.Equal(codes, want) {
		t.Errorf("statuses %v, want %v (the plan's minute of 3 refuses the fourth)", codes, want)
	}
	if f.served != 3 {
		t.Errorf("the origin served %d requests, want 3", f.served)
	}
}
