package dynamostore_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/slidegate/slidegate/internal/dynalite"
	"github.com/slidegate/slidegate/kvstore"
	"github.com/slidegate/slidegate/kvstore/dynamostore"
	"github.com/slidegate/slidegate/kvstore/storetest"
	"github.com/slidegate/slidegate/limiter"
	"github.com/slidegate/slidegate/window"
)

func TestMain(m *testing.M) {
	code := m.Run()
	dynalite.StopShared()
	os.Exit(code)
}

// calls counts the DynamoDB requests a client sends, by operation, retries
// included: an SDK middleware after the retry step sees every attempt.
type calls struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *calls) register(stack *middleware.Stack) error {
	return stack.Finalize.Add(middleware.FinalizeMiddlewareFunc("countCalls",
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			c.mu.Lock()
			c.n[middleware.GetOperationName(ctx)]++
			c.mu.Unlock()
			return next.HandleFinalize(ctx, in)
		}), middleware.After)
}

// take returns the counts since the last take and resets them.
func (c *calls) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = map[string]int{}
	return n
}

var tableSeq atomic.Int64

// table is a fresh table on a dynalite server, with a client that counts
// its requests.
type table struct {
	client *dynamodb.Client
	calls  *calls
	name   string
}

func newTable(t *testing.T, endpoint string) *table {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client, err := dynamostore.NewClient(ctx, endpoint)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	c := &calls{n: map[string]int{}}
	client = dynamodb.New(client.Options(), func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, c.register)
	})
	name := "slidegate-test-" + strconv.FormatInt(tableSeq.Add(1), 10)
	if err := dynamostore.CreateTable(ctx, client, name); err != nil {
		t.Fatalf("CreateTable: %v", err)
	}
	c.take()
	return &table{client: client, calls: c, name: name}
}

// store returns a new Store on the table: another Lambda instance.
func (tb *table) store(t *testing.T, opts ...dynamostore.Option) *dynamostore.Store {
	t.Helper()
	s, err := dynamostore.New(tb.client, tb.name, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

// TestConformance runs the kvstore suite on dynalite. Each request the
// Store sends must be one of Actions, which the Lambda's role grants and
// no more (template.yaml): another would be refused by IAM on AWS alone,
// and every decision would be a store error there.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) kvstore.Store {
		tb := newTable(t, dynalite.Shared(t).Endpoint)
		t.Cleanup(func() {
			for op := range tb.calls.take() {
				if !slices.Contains(dynamostore.Actions, "dynamodb:"+op) {
					t.Errorf("the Store called %s, which dynamostore.Actions (the Lambda's policy) leaves out", op)
				}
			}
		})
		return tb.store(t)
	})
}

// t0 is a fixed instant, 7 s into a minute.
var t0 = time.Date(2026, 11, 22, 12, 0, 7, 0, time.UTC)

func rule(name string, limit int64, period time.Duration) limiter.Rule {
	return limiter.Rule{Rule: window.Rule{Name: name, Limit: limit, Period: period}}
}

// instances returns the limiters of two instances on the table, each with
// a store (and a cache) of its own.
func (tb *table) instances(t *testing.T) (*limiter.Limiter, *limiter.Limiter) {
	return limiter.New(limiter.Options{Store: tb.store(t)}), limiter.New(limiter.Options{Store: tb.store(t)})
}

// stored reads id's item straight from the table, bypassing every cache.
func (tb *table) stored(t *testing.T, id string) map[string]int64 {
	t.Helper()
	out, err := tb.client.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName:      aws.String(tb.name),
		Key:            map[string]types.AttributeValue{dynamostore.KeyAttribute: &types.AttributeValueMemberS{Value: id}},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		t.Fatalf("GetItem: %v", err)
	}
	m := map[string]int64{}
	for k, v := range out.Item {
		if n, ok := v.(*types.AttributeValueMemberN); ok {
			x, err := strconv.ParseInt(n.Value, 10, 64)
			if err != nil {
				t.Fatalf("attribute %s: %v", k, err)
			}
			m[k] = x
		}
	}
	return m
}

func attr(name string, period time.Duration, at time.Time) string {
	return name + "#" + period.String() + "#" + strconv.FormatInt(window.Index(at, period), 10)
}

// TestExactUnderConcurrency: 200 concurrent clients against a limit of 150
// admit exactly 150 and the table holds 150, directly through AddIf and
// through limiters on four Stores (four Lambda instances) sharing the table.
func TestExactUnderConcurrency(t *testing.T) {
	t.Parallel()
	const clients, limit = 200, 150
	minute, dayR := rule("minute", limit, time.Minute), rule("day", 10000, 24*time.Hour)
	run := func(t *testing.T, check func(i int) (bool, error)) {
		var admitted atomic.Int64
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make(chan error, clients)
		for i := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				ok, err := check(i)
				if err != nil {
					errs <- err
				} else if ok {
					admitted.Add(1)
				}
			}()
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("check: %v", err)
		}
		if got := admitted.Load(); got != limit {
			t.Errorf("admitted %d of %d, want exactly %d", got, clients, limit)
		}
	}

	t.Run("AddIf", func(t *testing.T) {
		tb := newTable(t, dynalite.Shared(t).Endpoint)
		s := tb.store(t)
		cur := kvstore.Slot{Name: "minute", Bucket: window.Index(t0, time.Minute), Length: time.Minute}
		run(t, func(int) (bool, error) {
			return s.AddIf(context.Background(), "hot", []kvstore.Cond{{Slot: cur, Max: limit - 1, Add: 1}}, make([]int64, 1))
		})
		if got := tb.stored(t, "hot")[attr("minute", time.Minute, t0)]; got != limit {
			t.Errorf("stored count %d, want %d", got, limit)
		}
	})

	// Through dynalite, a failed condition costs a GetItem; DynamoDB
	// returns the item with the failure, which a proxy plays here.
	for _, returnsItem := range []bool{false, true} {
		t.Run(fmt.Sprintf("Limiter/item with failure %v", returnsItem), func(t *testing.T) {
			endpoint := dynalite.Shared(t).Endpoint
			if returnsItem {
				endpoint = newFaultProxy(t, endpoint, func(op string, _ int, _ []byte) fault {
					return fault{oldItem: op == "UpdateItem"}
				}).URL
			}
			tb := newTable(t, endpoint)
			var lims [4]*limiter.Limiter
			for i := range lims {
				lims[i] = limiter.New(limiter.Options{Store: tb.store(t)})
			}
			rules := []limiter.Rule{minute, dayR}
			run(t, func(i int) (bool, error) {
				res, err := lims[i%len(lims)].Check(context.Background(), t0, "hot", rules, 1)
				return res.Allowed, err
			})
			calls := tb.calls.take()
			t.Logf("requests: %v", calls)
			if returnsItem && calls["GetItem"] != 0 {
				t.Errorf("%d GetItem, want 0: failed conditions returned the item", calls["GetItem"])
			}
			item := tb.stored(t, "hot")
			if got := item[attr("minute", time.Minute, t0)]; got != limit {
				t.Errorf("stored minute count %d, want %d", got, limit)
			}
			if got := item[attr("day", 24*time.Hour, t0)]; got != limit {
				t.Errorf("stored day count %d, want %d", got, limit)
			}
		})
	}
}

// TestDayDenialChargesNoRule: a request the day rule denies leaves the
// minute rule's count unchanged; both live in one item, one write.
func TestDayDenialChargesNoRule(t *testing.T) {
	t.Parallel()
	tb := newTable(t, dynalite.Shared(t).Endpoint)
	s := tb.store(t)
	lim := limiter.New(limiter.Options{Store: s, DisableDenyCache: true})
	rules := []limiter.Rule{rule("minute", 100, time.Minute), rule("day", 3, 24*time.Hour)}
	ctx := context.Background()
	for i := range 5 {
		now := t0.Add(time.Duration(i) * time.Second)
		res, err := lim.Check(ctx, now, "k", rules, 1)
		if err != nil {
			t.Fatal(err)
		}
		if want := i < 3; res.Allowed != want {
			t.Fatalf("request %d: Allowed = %v, want %v", i, res.Allowed, want)
		}
		if !res.Allowed && res.Rule != "day" {
			t.Errorf("request %d denied by %q, want day", i, res.Rule)
		}
	}
	item := tb.stored(t, "k")
	if got := item[attr("minute", time.Minute, t0)]; got != 3 {
		t.Errorf("stored minute count %d, want 3 (denied requests charge no rule)", got)
	}
	if got := item[attr("day", 24*time.Hour, t0)]; got != 3 {
		t.Errorf("stored day count %d, want 3", got)
	}
}

// TestRequestsPerDecision counts the DynamoDB requests of each decision with
// an SDK middleware: one UpdateItem per admitted decision in steady state,
// across bucket roll-overs; a GetItem for a denial on cached counts; none
// while an identity is known to be blocked.
func TestRequestsPerDecision(t *testing.T) {
	t.Parallel()
	tb := newTable(t, dynalite.Shared(t).Endpoint)
	s, calls := tb.store(t), tb.calls
	lim := limiter.New(limiter.Options{Store: s})
	rules := []limiter.Rule{rule("minute", 10, time.Minute), rule("day", 10000, 24*time.Hour)}
	ctx := context.Background()
	check := func(now time.Time, id string) limiter.Result {
		t.Helper()
		res, err := lim.Check(ctx, now, id, rules, 1)
		if err != nil {
			t.Fatalf("Check at %s: %v", now.Format(time.TimeOnly), err)
		}
		return res
	}

	t.Run("SteadyState", func(t *testing.T) {
		// Six a minute for four minutes: every decision admits, and each
		// costs exactly one UpdateItem, the first of a new bucket too.
		for i := range 24 {
			now := t0.Add(time.Duration(i) * 10 * time.Second)
			if res := check(now, "steady"); !res.Allowed {
				t.Fatalf("decision %d denied: %+v", i, res.Decision)
			}
			if got := calls.take(); len(got) != 1 || got["UpdateItem"] != 1 {
				t.Fatalf("decision %d at %s sent %v, want exactly one UpdateItem", i, now.Format(time.TimeOnly), got)
			}
		}
		t.Logf("steady state: 24 admitted decisions, 24 UpdateItem, 0 other requests")
	})

	t.Run("Blocked", func(t *testing.T) {
		// A second instance on the same table: its cache has not seen
		// the identity.
		lim2 := limiter.New(limiter.Options{Store: tb.store(t)})
		t1 := t0.Add(time.Hour)
		for i := range 10 {
			if res := check(t1, "burst"); !res.Allowed {
				t.Fatalf("request %d denied", i)
			}
			calls.take()
		}
		// The instance that counted the ten denies on its cached counts,
		// and reads the item once for the wait: other instances may have
		// counted since (limiter's TestDenialOnCachedCountsWaitsForTheTable).
		res := check(t1, "burst")
		if res.Allowed || res.Cached {
			t.Fatalf("11th request: Allowed %v, Cached %v; want a denial on cached counts", res.Allowed, res.Cached)
		}
		if got := calls.take(); len(got) != 1 || got["GetItem"] != 1 {
			t.Errorf("denial on cached counts sent %v, want one GetItem", got)
		}
		// The other instance learns them from its failed conditional write.
		// dynalite does not return the item with the failure, so the store
		// reads it once; DynamoDB returns it (TestAddIfFailureUsesReturnedItem).
		res2, err := lim2.Check(ctx, t1, "burst", rules, 1)
		if err != nil || res2.Allowed {
			t.Fatalf("other instance: Allowed %v, err %v; want a denial", res2.Allowed, err)
		}
		got := calls.take()
		if got["UpdateItem"] != 1 || got["GetItem"] > 1 || len(got) > 2 {
			t.Errorf("other instance's first denial sent %v, want one UpdateItem and at most one GetItem", got)
		}
		t.Logf("first denial on an instance that had not seen the identity: %v", got)
		retry := res.RetryAfter
		if retry <= 0 || retry > time.Minute {
			t.Fatalf("RetryAfter = %s, want within the next minute", retry)
		}
		for i := range 50 {
			now := t1.Add(time.Duration(i) * retry / 50)
			for _, l := range []*limiter.Limiter{lim, lim2} {
				res, err := l.Check(ctx, now, "burst", rules, 1)
				if err != nil || res.Allowed || !res.Cached {
					t.Fatalf("blocked request %d at +%s: Allowed %v, Cached %v, err %v; want a cached denial", i, now.Sub(t1), res.Allowed, res.Cached, err)
				}
			}
		}
		if got := calls.take(); len(got) != 0 {
			t.Errorf("100 blocked decisions sent %v, want no request", got)
		}
		if res := check(t1.Add(retry), "burst"); !res.Allowed {
			t.Fatalf("request at RetryAfter denied: %+v", res.Decision)
		}
		if got := calls.take(); len(got) != 1 || got["UpdateItem"] != 1 {
			t.Errorf("decision after RetryAfter sent %v, want exactly one UpdateItem", got)
		}
	})

	t.Run("CostZero", func(t *testing.T) {
		// The check API's cost 0 reads the state: one GetItem, whether or
		// not the instance has seen the identity, and no write.
		for i := range 2 {
			if _, err := lim.Check(ctx, t0.Add(2*time.Hour), "steady", rules, 0); err != nil {
				t.Fatal(err)
			}
			if got := calls.take(); len(got) != 1 || got["GetItem"] != 1 {
				t.Errorf("cost-0 check %d sent %v, want exactly one GetItem", i+1, got)
			}
		}
	})
}

// TestRetryAfterAcrossInstances: two instances on one table, a minute of 5
// and a request that costs the whole of it (examples/config.json's free
// plan and its POST /v1/search). Instance A counted 1 at 12:00:07 and B
// counted 3 after it; at 12:00:20 A's cache denies the cost-5 request. Its
// RetryAfter was that of A's cached count of 1 (12:01:00, 40 s) where the
// table's 4 admit the request at 12:01:45: the client's retry met another
// 429. It is now the table's, and the request is admitted at it.
func TestRetryAfterAcrossInstances(t *testing.T) {
	t.Parallel()
	a, b := newTable(t, dynalite.Shared(t).Endpoint).instances(t)
	rules := []limiter.Rule{rule("minute", 5, time.Minute)}
	ctx := context.Background()
	check := func(l *limiter.Limiter, at time.Time, cost int64) limiter.Result {
		t.Helper()
		res, err := l.Check(ctx, at, "k", rules, cost)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if !check(a, t0, 1).Allowed || !check(b, t0.Add(3*time.Second), 3).Allowed {
		t.Fatal("the first requests were denied")
	}
	at := t0.Add(13 * time.Second)
	res := check(a, at, 5)
	want := rules[0].Decide(at, 0, 4, 5)
	if res.Allowed || res.RetryAfter != want.RetryAfter {
		t.Fatalf("cost 5 at 12:00:20: Allowed %v, RetryAfter %v; want denied until %v (the table's counts)", res.Allowed, res.RetryAfter, want.RetryAfter)
	}
	if res := check(a, at.Add(want.RetryAfter-time.Millisecond), 5); res.Allowed {
		t.Errorf("admitted a millisecond before RetryAfter")
	}
	if res := check(a, at.Add(want.RetryAfter), 5); !res.Allowed {
		t.Errorf("denied at RetryAfter: %+v", res.Decision)
	}
}

// TestTTLAndCleanup: the item's TTL is the end of the bucket after the
// newest one, and buckets more than two before the newest are removed by
// the same write.
func TestTTLAndCleanup(t *testing.T) {
	t.Parallel()
	tb := newTable(t, dynalite.Shared(t).Endpoint)
	s := tb.store(t)
	lim := limiter.New(limiter.Options{Store: s})
	ctx := context.Background()
	minuteOnly := []limiter.Rule{rule("minute", 10, time.Minute)}
	if _, err := lim.Check(ctx, t0, "k", minuteOnly, 1); err != nil {
		t.Fatal(err)
	}
	b := window.Index(t0, time.Minute)
	if got, want := tb.stored(t, "k")[dynamostore.TTLAttribute], window.Start(b+2, time.Minute).Unix(); got != want {
		t.Errorf("ttl = %d, want %d (end of the next minute bucket)", got, want)
	}
	both := []limiter.Rule{rule("minute", 10, time.Minute), rule("day", 100, 24*time.Hour)}
	for i := range 4 {
		if _, err := lim.Check(ctx, t0.Add(time.Duration(i)*time.Minute), "k", both, 1); err != nil {
			t.Fatal(err)
		}
	}
	item := tb.stored(t, "k")
	d := window.Index(t0, 24*time.Hour)
	if got, want := item[dynamostore.TTLAttribute], window.Start(d+2, 24*time.Hour).Unix(); got != want {
		t.Errorf("ttl = %d, want %d (end of the next day bucket)", got, want)
	}
	var attrs []string
	for k := range item {
		attrs = append(attrs, k)
	}
	slices.Sort(attrs)
	want := []string{attr("day", 24*time.Hour, t0), attr("minute", time.Minute, t0.Add(time.Minute)), attr("minute", time.Minute, t0.Add(2*time.Minute)),
		attr("minute", time.Minute, t0.Add(3*time.Minute)), dynamostore.TTLAttribute}
	slices.Sort(want)
	if !slices.Equal(attrs, want) {
		t.Errorf("item attributes %v, want %v", attrs, want)
	}
}

// TestSpreadClientCostsTwoWrites measures what docs/lambda.md says of
// several instances serving one client: each instance's first request of
// the client in a bucket is built on the previous bucket as that instance
// last saw it, and when another instance has counted in that bucket since,
// the write's condition fails (billed) and the request is written again on
// the counts the failure returned. A client that sends one request a
// minute to two instances in turn, as one spread over a scaled-out
// function does, thus costs two UpdateItem per admitted request, one of
// them failed: two write units where the cost table's steady state is
// one. DynamoDB returns the item with the failure, as the proxy does
// here, so no GetItem is made.
func TestSpreadClientCostsTwoWrites(t *testing.T) {
	t.Parallel()
	endpoint := newFaultProxy(t, dynalite.Shared(t).Endpoint, func(op string, _ int, _ []byte) fault {
		return fault{oldItem: op == "UpdateItem"}
	}).URL
	tb := newTable(t, endpoint)
	a, b := tb.instances(t)
	rules := []limiter.Rule{rule("minute", 10, time.Minute), rule("day", 10000, 24*time.Hour)}
	for i := range 12 {
		l := a
		if i%2 == 1 {
			l = b
		}
		now := t0.Add(time.Duration(i) * time.Minute)
		res, err := l.Check(context.Background(), now, "spread", rules, 1)
		if err != nil || !res.Allowed {
			t.Fatalf("request %d: Allowed %v, err %v", i+1, res.Allowed, err)
		}
		got := tb.calls.take()
		want := map[string]int{"UpdateItem": 2}
		if i == 0 {
			want["UpdateItem"] = 1 // nothing counted before it
		}
		if len(got) != len(want) || got["UpdateItem"] != want["UpdateItem"] {
			t.Errorf("request %d at %s sent %v, want %v", i+1, now.Format(time.TimeOnly), got, want)
		}
	}
}
