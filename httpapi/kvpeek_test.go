package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slidegate/slidegate/kvstore/workerskv"
)

// countingKV is an empty Workers KV namespace that counts the calls made
// to it.
type countingKV struct{ puts, lists atomic.Int64 }

func (k *countingKV) Put(context.Context, string, string, int64, time.Duration) error {
	k.puts.Add(1)
	return nil
}

func (k *countingKV) List(context.Context, string, string) (workerskv.Page, error) {
	k.lists.Add(1)
	return workerskv.Page{Done: true}, nil
}

// TestIPDenialCostsNoKVCalls: on the Worker, a request that
// ip_limits refuse costs no Workers KV operation, whatever key it carries,
// as on the Lambda (docs/lambda.md: "a read per denied request would let an
// IP flood through to DynamoDB, and one per unseen key would let made-up
// keys do the same"). The plan's counters of the key are only peeked at
// then, and the peek of a key the isolate has not seen lists each of its
// buckets in KV, those old enough before the 429 is sent: here 4 lists
// (minute and day, current and previous bucket; $5 per million) and 4
// isolate cells (kept until the buckets expire: two days for a day limit)
// per refused request with a new made-up key.
func TestIPDenialCostsNoKVCalls(t *testing.T) {
	cfg := testConfig(t, func(m map[string]any) {
		m["ip_limits"] = []any{map[string]any{"name": "ip-minute", "limit": 2, "window": "1m", "scope": "local"}}
		delete(m, "costs")
	})
	kv := &countingKV{}
	g := workerskv.NewMemGlobals("iso")
	// Background work due at once (the lists of stale sums) runs after
	// each request; writes due later never do.
	var queued []func(context.Context)
	drain := func() {
		for len(queued) > 0 {
			task := queued[0]
			queued = queued[1:]
			task(context.Background())
		}
	}
	f := newFixture(t, cfg, func(o *Options) {
		st, err := workerskv.New(workerskv.Options{KV: kv, Globals: g, Now: o.Now,
			Later: func(d time.Duration, task func(context.Context)) {
				if d == 0 {
					queued = append(queued, task)
				}
			}})
		if err != nil {
			t.Fatal(err)
		}
		o.Store, o.Local = st, workerskv.NewLocal(g, o.Now)
	})
	for range 2 { // ip-minute's quota
		if w := f.do(req{header: map[string]string{"X-API-Key": "first"}}); w.Code != 200 {
			t.Fatalf("the first requests: %d", w.Code)
		}
		drain()
	}
	lists, puts, cells := kv.lists.Load(), kv.puts.Load(), g.Len()
	const n = 50
	for i := range n {
		if w := f.do(req{header: map[string]string{"X-API-Key": fmt.Sprintf("made-up-%d", i)}}); w.Code != http.StatusTooManyRequests {
			t.Fatalf("request %d: %d, want 429 from ip-minute", i+3, w.Code)
		}
		drain()
	}
	if got := kv.lists.Load() - lists; got != 0 {
		t.Errorf("%d requests refused by ip_limits made %d KV lists", n, got)
	}
	if got := kv.puts.Load() - puts; got != 0 {
		t.Errorf("%d requests refused by ip_limits made %d KV writes", n, got)
	}
	if got := g.Len(); got != cells {
		t.Errorf("isolate cells: %d after the first requests, %d after %d refused ones", cells, got, n)
	}
}
