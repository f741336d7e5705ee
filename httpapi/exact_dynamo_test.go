//go:build !js

package httpapi

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/slidegate/slidegate/internal/dynalite"
	"github.com/slidegate/slidegate/kvstore/dynamostore"
	"github.com/slidegate/slidegate/kvstore/memstore"
	"github.com/slidegate/slidegate/window"
)

// xdInstance is one Lambda instance of TestExactnessAcrossInstances: a
// Handler with a DynamoDB Store of its own (its read cache and deny cache)
// on the shared table, its own local store, and a clock that runs skew
// ahead of the others' (behind, when negative).
type xdInstance struct {
	f    *fixture
	api  *xdCalls
	skew time.Duration
	last int64 // the model's newest time of this instance's limiter
	// seen is, per identity of the model, the step of the instance's last
	// answer that reached the table.
	seen map[string]int
}

// xdCalls counts the DynamoDB requests of one instance's Store: an answer
// after none came from the instance's memory (its deny cache).
type xdCalls struct {
	*dynamodb.Client
	n int
}

func (c *xdCalls) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	c.n++
	return c.Client.UpdateItem(ctx, in, optFns...)
}

func (c *xdCalls) GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	c.n++
	return c.Client.GetItem(ctx, in, optFns...)
}

// TestExactnessAcrossInstances is TestExactnessModel in the Lambda's
// deployment shape: two to four instances, each a Handler with its own
// dynamostore.Store (its read cache, its deny cache) and local store, on
// one DynamoDB table (dynalite), their clocks up to 200 ms apart.
// Sequential random traffic goes mostly to another instance than the last
// (in half the runs all of it is the pro key's, on one item), and a refused
// request often comes again at the moments its answer named, at another
// instance. Every rule is shared, and there are no ip_limits (their refund
// is seen per instance, which docs/lambda.md says may make a wait too
// long). The table is one set of counts, so every answer must be the
// exactness model's on those counts at the answering instance's time (its
// own newest time: each limiter holds its own): the status, every RateLimit
// item, X-RateLimit-*, Retry-After and the JSON numbers, which
// docs/lambda.md says are the table's for a shared rule's denial (the failed
// write's counts, or the GetItem's). Two answers from an instance's memory
// (its deny cache) are held to the decision alone: when another instance
// has decided at a later time (its clock ahead, or the traffic's clock
// stepped back since), and after another instance counted the identity
// under the other plan (a check API request naming it), which the
// remembered denial does not see (see xdRun). With
// count_denied, whose waits docs/lambda.md says are those of the instance's
// cached counts (no read), only the decision and Remaining >= 0 are held to
// the model. After every request each item of the table has a ttl no
// earlier than the last moment any bucket it holds is read (the end of the
// bucket after it), and every count it holds is one the model counted.
func TestExactnessAcrossInstances(t *testing.T) {
	db := dynalite.Run(t)
	ctx := context.Background()
	client, err := dynamostore.NewClient(ctx, db.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	for _, countDenied := range []bool{false, true} {
		t.Run("count_denied="+strconv.FormatBool(countDenied), func(t *testing.T) {
			denied := 0
			seeds := 12
			for seed := range uint64(seeds) {
				rng := rand.New(rand.NewPCG(seed, 0xd7a))
				c := xmGenConfig(rng)
				for _, rs := range [][]xmRule{c.ip, c.plans["free"], c.plans["pro"]} {
					for i := range rs {
						rs[i].local = false
					}
				}
				c.ip = nil // a refund of ip_limits is per instance (documented)
				c.countDenied = countDenied
				table := fmt.Sprintf("slidegate-xd-%t-%d", countDenied, seed)
				if err := dynamostore.CreateTable(ctx, client, table); err != nil {
					t.Fatal(err)
				}
				denied += xdRun(t, client, table, c, rng, 120, seed)
				if t.Failed() {
					return
				}
			}
			t.Logf("%d refusals in %d runs", denied, seeds)
			if denied < seeds*5 {
				t.Errorf("only %d refusals in %d runs: the traffic is too light", denied, seeds)
			}
		})
	}
}

// xdRun drives one configuration over instances on table and reports how
// many answers refused.
func xdRun(t *testing.T, client *dynamodb.Client, table string, c *xmConfig, rng *rand.Rand, steps int, seed uint64) int {
	t.Helper()
	cfg := c.config(t)
	cfg.StoreTimeout = "5s" // a loaded machine's dynalite is not what is tested
	longest := cfg.LongestWindow()
	var inst []*xdInstance
	for range 2 + rng.IntN(3) {
		in := &xdInstance{api: &xdCalls{Client: client}, seen: map[string]int{}}
		st, err := dynamostore.New(in.api, table, dynamostore.MaxPeriod(longest))
		if err != nil {
			t.Fatal(err)
		}
		if rng.IntN(2) == 0 {
			in.skew = time.Duration(rng.Int64N(int64(200*time.Millisecond))) - 100*time.Millisecond
		}
		in.f = newFixture(t, cfg, func(o *Options) { o.Store, o.Local = st, memstore.New() })
		inst = append(inst, in)
	}
	m := &xmModel{c: c, counts: map[xmKey]int64{}}
	at := t0.Add(time.Duration(rng.Int64N(int64(24 * time.Hour))))
	var back []time.Time
	var refused, last xmReq
	var log []string
	denied, prev := 0, 0
	// counted holds, per identity of the model, the steps that counted it
	// and the plan each counted it under.
	type count struct {
		step int
		plan string
	}
	counted := map[string][]count{}
	// Half the runs are one client's, the pro key's (its check API calls
	// naming either plan), all on one item.
	focus := seed%2 == 1
	for i := range steps {
		var r xmReq
		r, at, back = xmNext(rng, c, at, back, refused, last, i > 0, xdStep)
		if focus {
			r.ipN, r.key = 1, proKey
		}
		last = r
		// Mostly another instance than the last: each then answers on
		// counts it has not seen, and a refused client's retry comes to
		// an instance that did not refuse it.
		n := rng.IntN(len(inst))
		if n == prev && rng.IntN(4) != 0 {
			n = (n + 1 + rng.IntN(len(inst)-1)) % len(inst)
		}
		prev = n
		in := inst[n]
		now := at.Add(in.skew)
		in.f.clock.t = now
		calls := in.api.n
		w := in.f.do(r.http())
		fromMemory := in.api.n == calls
		got := xmRead(w, r)
		ip, plan, cost, ok := m.groups(r)
		log = append(log, fmt.Sprintf("#%d +%s instance %d (skew %s) %s: %d %s %s (memory %t)", i, at.Sub(t0), n, in.skew, r, w.Code, got.items, got.retry, fromMemory))
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("seed %d (%s)\n%s\n%s", seed, c, strings.Join(log, "\n"), fmt.Sprintf(format, args...))
		}
		if !ok {
			if w.Code != http.StatusBadRequest {
				fail("cost %d above the plan's smallest limit: %d %s, want 400", cost, w.Code, w.Body)
			}
			continue
		}
		m.last = in.last
		decided := m.clock(now)
		in.last = m.last
		// A count an instance ahead made in a bucket this one has not
		// reached is no count of its window yet: its reset (t) cannot
		// foresee it, and its decisions do not read it.
		ahead := map[xmKey]int64{}
		for k, v := range m.counts {
			if i, _ := xmBucket(decided, k.period); k.bucket > i {
				ahead[k] = v
				delete(m.counts, k)
			}
		}
		a := m.decide(decided, ip, plan, cost)
		for k, v := range ahead {
			m.counts[k] += v
		}
		a.since(decided.Sub(now))
		want := a.want(now, r, c.shadow)
		errs := xmCompareDecision(got, want)
		if rem, err := strconv.ParseInt(got.remaining, 10, 64); err != nil || rem < 0 {
			errs = append(errs, fmt.Sprintf("X-RateLimit-Remaining %q", got.remaining))
		}
		// A denial an instance remembers holds its numbers until its
		// Retry-After. An instance whose clock is ahead (its skew, or the
		// traffic's clock stepped back after it counted) reaches that
		// moment sooner and may admit the identity in the meantime, as it
		// may after any denial's Retry-After: numbers the others gave are
		// then early. No clock can be held to another's, so only the
		// instances' agreement that the request is refused is checked then.
		behind := false
		for _, o := range inst {
			behind = behind || o != in && o.last > decided.UnixNano()
		}
		// An instance's remembered denial is dropped when a request of the
		// identity under another plan that shares one of its limits goes to
		// the table from the same instance (limiter.Options); docs/lambda.md
		// says that this happens per instance. A count another instance
		// made so (a check API request naming the other plan) leaves the
		// remembered numbers short by what it added.
		name := xdPlan(r, c)
		crossed := false
		for _, k := range counted[plan.id] {
			crossed = crossed || k.step > in.seen[plan.id] && k.plan != name
		}
		if !fromMemory {
			in.seen[plan.id] = i
		}
		if a.admitted {
			counted[plan.id] = append(counted[plan.id], count{i, name})
		}
		if !c.countDenied && !((behind || crossed) && fromMemory && !a.admitted) {
			errs = append(errs, xmCompareNumbers(a, got, want, r, c.shadow)...)
		}
		errs = append(errs, xdTable(t, client, table, m, longest)...)
		if len(errs) > 0 {
			fail("%s\n%s", strings.Join(errs, "\n"), w.Body)
		}
		if !a.admitted {
			denied++
			refused = r
			back = xmBack(back, at, a.retry)
		}
	}
	return denied
}

// xdTable checks every item of table: its ttl covers each bucket it holds
// (the bucket's end plus twice the longest window, docs/lambda.md), and the
// model counted the same total in the buckets of each rule window it holds.
// The item's identity is the Handler's (a hash for a key), so the model's
// counts are compared as a multiset of (window, bucket, count) over all
// identities.
func xdTable(t *testing.T, client *dynamodb.Client, table string, m *xmModel, longest time.Duration) []string {
	t.Helper()
	out, err := client.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	var errs []string
	stored := map[string]int64{}
	for _, item := range out.Items {
		ttlAttr, _ := item[dynamostore.TTLAttribute].(*types.AttributeValueMemberN)
		if ttlAttr == nil {
			errs = append(errs, fmt.Sprintf("item %v has no ttl", item[dynamostore.KeyAttribute]))
			continue
		}
		ttl, _ := strconv.ParseInt(ttlAttr.Value, 10, 64)
		for a, v := range item {
			parts := strings.Split(a, "#")
			if len(parts) != 3 {
				continue
			}
			p, err1 := time.ParseDuration(parts[1])
			b, err2 := strconv.ParseInt(parts[2], 10, 64)
			nv, _ := v.(*types.AttributeValueMemberN)
			if err1 != nil || err2 != nil || nv == nil {
				errs = append(errs, fmt.Sprintf("attribute %s: %v", a, v))
				continue
			}
			// Read as the previous bucket until the end of the next one.
			if end := window.Start(b+2, p); ttl < (end.UnixNano()+int64(time.Second)-1)/int64(time.Second) {
				errs = append(errs, fmt.Sprintf("item %v: ttl %d before %s is last read (%d)", item[dynamostore.KeyAttribute], ttl, a, end.Unix()))
			}
			n, _ := strconv.ParseInt(nv.Value, 10, 64)
			if n != 0 {
				stored[parts[0]+"#"+parts[1]+"#"+parts[2]+"="+nv.Value]++
			}
		}
	}
	// The model's counts, in the same form, for the buckets the table still
	// holds (a write removes buckets more than two before its own).
	modeled := map[string]int64{}
	for k, n := range m.counts {
		if n == 0 {
			continue
		}
		modeled[k.name+"#"+k.period.String()+"#"+strconv.FormatInt(k.bucket, 10)+"="+strconv.FormatInt(n, 10)]++
	}
	for k, n := range stored {
		if modeled[k] < n {
			errs = append(errs, fmt.Sprintf("the table holds %s (%d items), the model %d", k, n, modeled[k]))
		}
	}
	return errs
}

// xdStep is xmStep with fewer of its long steps (a third are kept), so that
// more requests meet counts other instances added in the same windows.
func xdStep(rng *rand.Rand, c *xmConfig, at time.Time) time.Time {
	next := xmStep(rng, c, at)
	if next.Sub(at) > 10*time.Second && rng.IntN(3) != 0 {
		return at.Add(time.Duration(rng.Int64N(int64(2 * time.Second))))
	}
	return next
}

// xdPlan is the plan r is decided under.
func xdPlan(r xmReq, c *xmConfig) string {
	switch {
	case r.check && r.plan != "":
		return r.plan
	case r.key == proKey:
		return "pro"
	}
	return "free"
}
