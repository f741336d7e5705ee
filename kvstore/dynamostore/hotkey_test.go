package dynamostore_test

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/smithy-go"

	"github.com/slidegate/slidegate/internal/dynalite"
	"github.com/slidegate/slidegate/kvstore"
	"github.com/slidegate/slidegate/kvstore/dynamostore"
	"github.com/slidegate/slidegate/limiter"
	"github.com/slidegate/slidegate/window"
)

// TestHotKeyLeavesOthersTheirRetries: one identity whose item DynamoDB
// throttles on every attempt (a client flooding a single item past its
// partition's write rate) does not use up the retries of the others. The
// SDK's standard retryer keeps one retry quota per client (500 tokens, 5 a
// retry), shared by every call: 50 calls of the hot item emptied it, and
// from then on every identity's throttled write or failed read went to
// on_store_error at its first failure, unretried ("retry quota
// exceeded"). The Store's retryers have no quota (ratelimit.None): attempts
// and the caller's deadline bound each call.
func TestHotKeyLeavesOthersTheirRetries(t *testing.T) {
	// hotCalls calls of the hot item, MaxAttempts-1 retries each, 5 tokens
	// a retry under the default quota: more than its 500. They run
	// workers at a time, each retry waiting its backoff.
	const hotCalls, workers = 60, 10
	cur := kvstore.Slot{Name: "minute", Bucket: window.Index(t0, time.Minute), Length: time.Minute}
	tests := []struct {
		name, op, code string
		status         int
		call           func(ctx context.Context, s kvstore.Conditional, id string) error
	}{
		{"writes", "UpdateItem", "ThrottlingException", 400, func(ctx context.Context, s kvstore.Conditional, id string) error {
			_, err := s.AddIf(ctx, id, []kvstore.Cond{{Slot: cur, Max: 1 << 20, Add: 1}}, make([]int64, 1))
			return err
		}},
		{"reads", "GetItem", "InternalServerError", 500, func(ctx context.Context, s kvstore.Conditional, id string) error {
			return s.(kvstore.Reader).Read(ctx, id, []kvstore.Slot{cur}, make([]int64, 1))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			coldFailed := false
			px := newFaultProxy(t, dynalite.Shared(t).Endpoint, func(op string, _ int, body []byte) fault {
				if op != tt.op {
					return fault{}
				}
				switch {
				case bytes.Contains(body, []byte(`"ip:hot"`)):
					return fault{status: tt.status, code: tt.code}
				case bytes.Contains(body, []byte(`"ip:cold"`)) && !coldFailed:
					coldFailed = true // called under the proxy's lock
					return fault{status: tt.status, code: tt.code}
				}
				return fault{}
			})
			s := newTable(t, px.URL).store(t)
			var wg sync.WaitGroup
			for range workers {
				wg.Go(func() {
					for range hotCalls / workers {
						if err := tt.call(context.Background(), s, "ip:hot"); err == nil {
							t.Errorf("a hot call succeeded; want the %s of every attempt", tt.code)
						}
					}
				})
			}
			wg.Wait()
			if n, want := px.count(tt.op), hotCalls*dynamostore.MaxAttempts; n != want {
				t.Errorf("%d %s requests for the hot item, want %d (every call retried)", n, tt.op, want)
			}
			if err := tt.call(context.Background(), s, "ip:cold"); err != nil {
				t.Errorf("another identity's call after one %s = %v; want its retry to succeed", tt.code, err)
			}
		})
	}
}

// TestThrottledHotKey: what a flooding client meets once DynamoDB throttles
// the writes of its item. An instance that has seen it reach its limit
// refuses it from memory (the Store's counts, then the deny cache) and
// sends no write, throttled or not. An instance that has not gets the
// throttling error from every check, after MaxAttempts writes, and
// remembers nothing: the HTTP layer applies on_store_error to each request
// (under allow, each is let through) until one write of the identity is
// answered; that answer (a failed condition, with the counts) is a denial
// the instance then remembers, and its next checks send nothing.
func TestThrottledHotKey(t *testing.T) {
	t.Parallel()
	const limit, flood = 5, 20
	var throttled atomic.Bool
	px := newFaultProxy(t, dynalite.Shared(t).Endpoint, func(op string, _ int, body []byte) fault {
		if op == "UpdateItem" && throttled.Load() && bytes.Contains(body, []byte(`"ip:hot"`)) {
			return fault{status: 400, code: "ThrottlingException"}
		}
		return fault{}
	})
	tb := newTable(t, px.URL)
	rules := []limiter.Rule{rule("minute", limit, time.Minute)}
	ctx := context.Background()
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Millisecond) }
	seen := limiter.New(limiter.Options{Store: tb.store(t)})
	for i := range limit {
		if res, err := seen.Check(ctx, at(i), "ip:hot", rules, 1); err != nil || !res.Allowed {
			t.Fatalf("check %d: allowed %v, %v; want admitted", i+1, res.Allowed, err)
		}
	}
	throttled.Store(true)
	writes := px.count("UpdateItem")
	for i := range flood {
		if res, err := seen.Check(ctx, at(limit+i), "ip:hot", rules, 1); err != nil || res.Allowed {
			t.Fatalf("instance that saw the limit, check %d: allowed %v, %v; want denied", i+1, res.Allowed, err)
		}
	}
	if n := px.count("UpdateItem") - writes; n != 0 {
		t.Errorf("instance that saw the limit: %d writes for %d denied checks, want 0", n, flood)
	}

	unseen := limiter.New(limiter.Options{Store: tb.store(t)})
	writes = px.count("UpdateItem")
	for i := range flood {
		_, err := unseen.Check(ctx, at(limit+i), "ip:hot", rules, 1)
		var api smithy.APIError
		if !errors.As(err, &api) || api.ErrorCode() != "ThrottlingException" {
			t.Fatalf("instance that has not seen the client, check %d: %v; want the ThrottlingException (on_store_error decides)", i+1, err)
		}
	}
	if n, want := px.count("UpdateItem")-writes, flood*dynamostore.MaxAttempts; n != want {
		t.Errorf("instance that has not seen the client: %d writes for %d throttled checks, want %d (nothing remembered)", n, flood, want)
	}
	throttled.Store(false)
	if res, err := unseen.Check(ctx, at(limit+flood), "ip:hot", rules, 1); err != nil || res.Allowed {
		t.Fatalf("first answered write: allowed %v, %v; want denied", res.Allowed, err)
	}
	throttled.Store(true)
	writes = px.count("UpdateItem")
	for i := range flood {
		if res, err := unseen.Check(ctx, at(limit+flood+1+i), "ip:hot", rules, 1); err != nil || res.Allowed || !res.Cached {
			t.Fatalf("after the answered write, check %d: allowed %v, cached %v, %v; want denied from memory", i+1, res.Allowed, res.Cached, err)
		}
	}
	if n := px.count("UpdateItem") - writes; n != 0 {
		t.Errorf("after the answered write: %d writes for %d denied checks, want 0", n, flood)
	}
}
