package dynamostore_test

import (
	"bytes"
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/slidegate/slidegate/internal/dynalite"
	"github.com/slidegate/slidegate/kvstore/dynamostore"
	"github.com/slidegate/slidegate/limiter"
	"github.com/slidegate/slidegate/window"
)

// TestOtherConfigKeepsTTL: two writers of one table with different
// configurations, as in a rollout (Lambda versions side by side during a
// gradual deployment, serve processes restarted one by one with a new
// --config): one counts a key under a minute and a day rule, the other,
// whose configuration has no day rule (MaxPeriod a minute), then counts it
// under the minute rule alone, its first write of the key. That write set
// the item's TTL to the minute's (three minutes ahead), below the two days
// the day counter is read for: DynamoDB may then delete the item, and the
// writer with the day rule (or the configuration rolled back to it) finds
// the key's day quota whole again. The TTL now stays at or past the expiry
// of every counter the item holds.
func TestOtherConfigKeepsTTL(t *testing.T) {
	t.Parallel()
	tb := newTable(t, dynalite.Shared(t).Endpoint)
	ctx := context.Background()
	long := limiter.New(limiter.Options{Store: tb.store(t, dynamostore.MaxPeriod(24*time.Hour))})
	short := limiter.New(limiter.Options{Store: tb.store(t, dynamostore.MaxPeriod(time.Minute))})
	if _, err := long.Check(ctx, t0, "k", []limiter.Rule{rule("minute", 10, time.Minute), rule("day", 100, 24*time.Hour)}, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := short.Check(ctx, t0.Add(time.Second), "k", []limiter.Rule{rule("minute", 10, time.Minute)}, 1); err != nil {
		t.Fatal(err)
	}
	d := window.Index(t0, 24*time.Hour)
	item := tb.stored(t, "k")
	if got, want := item[dynamostore.TTLAttribute], window.Start(d+2, 24*time.Hour).Unix(); got < want {
		t.Errorf("ttl = %d (%s), want at least %d (%s), when the day counter stops being read; item %v",
			got, time.Unix(got, 0).UTC(), want, time.Unix(want, 0).UTC(), item)
	}
	if got := item[attr("day", 24*time.Hour, t0)]; got != 1 {
		t.Errorf("day counter %d, want 1", got)
	}
	// The raise is made once: the writer's next write of the key sets the
	// raised TTL itself, in its one request.
	tb.calls.take()
	if _, err := short.Check(ctx, t0.Add(2*time.Second), "k", []limiter.Rule{rule("minute", 10, time.Minute)}, 1); err != nil {
		t.Fatal(err)
	}
	if got := tb.calls.take(); got["UpdateItem"] != 1 || len(got) != 1 {
		t.Errorf("second write of the key: requests %v, want one UpdateItem", got)
	}
	if got, want := tb.stored(t, "k")[dynamostore.TTLAttribute], window.Start(d+2, 24*time.Hour).Unix(); got < want {
		t.Errorf("after the second write: ttl = %d, want at least %d", got, want)
	}
}

// TestTTLRaiseIsConditional: the write that raises an item's TTL after a
// write of another configuration lowered it (keepTTL) is made on the
// condition that the stored TTL is lower than the raise. Another writer
// may act between the two: DynamoDB (or an operator) may delete the item,
// and another instance's write may raise the TTL further. Sent without
// the condition, the raise created an item of an id and a TTL alone where
// the item was gone, and lowered the TTL the other writer had set. Here
// each happens just before the raise reaches the table.
func TestTTLRaiseIsConditional(t *testing.T) {
	t.Parallel()
	endpoint := dynalite.Shared(t).Endpoint
	direct := newTable(t, endpoint) // the table's client, past the proxy
	later := window.Start(window.Index(t0, 24*time.Hour)+5, 24*time.Hour).Unix()
	for _, c := range []struct {
		name  string
		other func(ctx context.Context, tb *table, id string) error
		want  func(t *testing.T, item map[string]int64)
	}{
		{"item deleted", func(ctx context.Context, tb *table, id string) error {
			_, err := direct.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(tb.name), Key: idKey(id)})
			return err
		}, func(t *testing.T, item map[string]int64) {
			if len(item) != 0 {
				t.Errorf("item %v after the raise; want none: it was deleted before it", item)
			}
		}},
		{"TTL raised by another writer", func(ctx context.Context, tb *table, id string) error {
			_, err := direct.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
				TableName:                 aws.String(tb.name),
				Key:                       idKey(id),
				UpdateExpression:          aws.String("SET #t = :t"),
				ExpressionAttributeNames:  map[string]string{"#t": dynamostore.TTLAttribute},
				ExpressionAttributeValues: map[string]types.AttributeValue{":t": &types.AttributeValueMemberN{Value: strconv.FormatInt(later, 10)}},
			})
			return err
		}, func(t *testing.T, item map[string]int64) {
			if got := item[dynamostore.TTLAttribute]; got != later {
				t.Errorf("ttl = %d after the raise, want %d, the other writer's", got, later)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var tb *table
			raises := 0
			proxy := newFaultProxy(t, endpoint, func(op string, _ int, body []byte) fault {
				// The raise sets the TTL alone; a count's write adds too.
				if op == "UpdateItem" && bytes.Contains(body, []byte(`"UpdateExpression":"SET #t = :t"`)) {
					raises++
					if err := c.other(context.Background(), tb, "k"); err != nil {
						t.Errorf("the other writer: %v", err)
					}
				}
				return fault{}
			})
			tb = newTable(t, proxy.URL)
			long := limiter.New(limiter.Options{Store: tb.store(t, dynamostore.MaxPeriod(24*time.Hour))})
			short := limiter.New(limiter.Options{Store: tb.store(t, dynamostore.MaxPeriod(time.Minute))})
			ctx := context.Background()
			if _, err := long.Check(ctx, t0, "k", []limiter.Rule{rule("minute", 10, time.Minute), rule("day", 100, 24*time.Hour)}, 1); err != nil {
				t.Fatal(err)
			}
			if _, err := short.Check(ctx, t0.Add(time.Second), "k", []limiter.Rule{rule("minute", 10, time.Minute)}, 1); err != nil {
				t.Fatal(err)
			}
			if raises != 1 {
				t.Fatalf("%d raises of the TTL, want 1", raises)
			}
			c.want(t, tb.stored(t, "k"))
		})
	}
}

// idKey is the key of id's item.
func idKey(id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{dynamostore.KeyAttribute: &types.AttributeValueMemberS{Value: id}}
}
