package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/slidegate/slidegate/kvstore/dynamostore"
	"github.com/slidegate/slidegate/kvstore/memstore"
	"github.com/slidegate/slidegate/kvstore/workerskv"
)

// downKV is a Workers KV namespace whose lists fail.
type downKV struct{}

func (downKV) Put(context.Context, string, string, int64, time.Duration) error { return nil }

func (downKV) List(context.Context, string, string) (workerskv.Page, error) {
	return workerskv.Page{}, errors.New("downkv: list timed out")
}

// downDynamo is a DynamoDB that answers nothing.
type downDynamo struct{}

func (downDynamo) UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return nil, errors.New("downdynamo: timeout")
}

func (downDynamo) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return nil, errors.New("downdynamo: timeout")
}

// TestPlatformOutageRetryAfterCoversLocalPlanRule is
// TestOutageRetryAfterCoversLocalPlanRule on the Worker's stores (KV's
// lists failing) and the Lambda's (DynamoDB failing): a request the local
// ip rule ("ip-burst", 2 in 10 s) refuses, whose plan's local "burst" (2 a
// minute) is used up, is told to retry when both admit it, the same on
// both, and is admitted then and refused a millisecond before. Their
// peeks read memory (an isolate's counts, DynamoDB's cache) and do not
// fail, so the plan is read whole there, the shared "day" rule from what
// the instance holds, and ec9e03b's peek of the local rules alone is
// never needed.
func TestPlatformOutageRetryAfterCoversLocalPlanRule(t *testing.T) {
	cfg := testConfig(t, func(m map[string]any) {
		m["ip_limits"] = []any{map[string]any{"name": "ip-burst", "limit": 2, "window": "10s", "scope": "local"}}
		m["plans"] = map[string]any{"free": map[string]any{"limits": []any{
			map[string]any{"name": "day", "limit": 1000, "window": "24h"},
			map[string]any{"name": "burst", "limit": 2, "window": "1m", "scope": "local"}}}}
		m["api_keys"], m["costs"] = map[string]any{}, []any{}
	})
	platforms := map[string]func(t *testing.T, o *Options){
		"worker": func(t *testing.T, o *Options) {
			g := workerskv.NewMemGlobals("iso")
			st, err := workerskv.New(workerskv.Options{KV: downKV{}, Globals: g, Now: o.Now, Later: func(time.Duration, func(context.Context)) {}})
			if err != nil {
				t.Fatal(err)
			}
			o.Store, o.Local = st, workerskv.NewLocal(g, o.Now)
		},
		"lambda": func(t *testing.T, o *Options) {
			st, err := dynamostore.New(downDynamo{}, "t")
			if err != nil {
				t.Fatal(err)
			}
			o.Store, o.Local = st, memstore.New()
		},
	}
	retries := map[string]int64{}
	for name, stores := range platforms {
		t.Run(name, func(t *testing.T) {
			// run plays three requests at the same instant (a day's bucket
			// old enough for the Worker to list) and a fourth after the
			// third's wait plus early.
			run := func(early time.Duration) (*tooMany, int) {
				f := newFixture(t, cfg, func(o *Options) { stores(t, o) })
				f.clock.t = t0.Add(24*time.Hour + 30*time.Second)
				var codes []int
				var w *httptest.ResponseRecorder
				for range 3 {
					w = f.do(req{})
					codes = append(codes, w.Code)
				}
				var body tooMany
				if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || codes[0] != 200 || codes[1] != 200 || codes[2] != 429 {
					t.Fatalf("statuses %v, want 200, 200, 429 (%s); logs:\n%s", codes, w.Body, f.logs)
				}
				f.clock.t = f.clock.t.Add(time.Duration(body.RetryAfterMS)*time.Millisecond + early)
				return &body, f.do(req{}).Code
			}
			body, code := run(0)
			if code != http.StatusOK {
				t.Errorf("the retry at retry_after_ms %d: %d, want 200", body.RetryAfterMS, code)
			}
			if _, code := run(-time.Millisecond); code != http.StatusTooManyRequests {
				t.Errorf("the retry 1 ms before retry_after_ms %d: %d, want 429", body.RetryAfterMS, code)
			}
			retries[name] = body.RetryAfterMS
		})
	}
	if retries["worker"] != retries["lambda"] {
		t.Errorf("retry_after_ms: Worker %d, Lambda %d, want the same", retries["worker"], retries["lambda"])
	}
}
