package dynamostore_test

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/slidegate/slidegate/internal/dynalite"
	"github.com/slidegate/slidegate/kvstore"
	"github.com/slidegate/slidegate/kvstore/dynamostore"
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
