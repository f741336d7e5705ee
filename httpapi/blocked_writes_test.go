//go:build !js

package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/slidegate/slidegate/internal/dynalite"
	"github.com/slidegate/slidegate/kvstore/dynamostore"
	"github.com/slidegate/slidegate/kvstore/memstore"
)

// TestBlockedKeyCostsNoIPWrites: with a shared ip_limits rule on DynamoDB,
// a key the instance knows to be blocked is refused with no DynamoDB
// request, as it is without ip_limits (docs/lambda.md: blocked, 0
// requests), from its own address and from new ones, and with the answer
// the first denial gave. The ip rule counted each such request (a write of
// the address's item) and took it back when the plan refused it (a
// second): 20 refused requests cost 40 billed writes, and the address
// never became blocked itself, so a flood with a used-up key cost twice
// what admitted traffic does, for as long as it lasted.
func TestBlockedKeyCostsNoIPWrites(t *testing.T) {
	db := dynalite.Run(t)
	ctx := context.Background()
	client, err := dynamostore.NewClient(ctx, db.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	const table = "slidegate-blocked-writes"
	if err := dynamostore.CreateTable(ctx, client, table); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, func(m map[string]any) {
		m["ip_limits"] = []any{map[string]any{"name": "ip-minute", "limit": 50, "window": "1m"}}
	})
	cfg.StoreTimeout = "5s" // a loaded machine's dynalite is not what is tested
	api := &xdCalls{Client: client}
	take := func() int { n := api.n; api.n = 0; return n }
	st, err := dynamostore.New(api, table)
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, cfg, func(o *Options) { o.Store, o.Local = st, memstore.New() })
	pro := func(remote string) req { return req{remote: remote, header: map[string]string{"X-API-Key": proKey}} }
	for i := range 10 {
		if w := f.do(pro("192.0.2.1:1")); w.Code != http.StatusOK {
			t.Fatalf("request %d: %d, want 200", i+1, w.Code)
		}
	}
	if got := take(); got != 20 {
		t.Fatalf("10 admitted requests sent %d DynamoDB requests, want 20 (a write of the address's item and one of the key's)", got)
	}
	first := f.do(pro("192.0.2.1:1"))
	if first.Code != http.StatusTooManyRequests {
		t.Fatalf("11th request: %d, want 429", first.Code)
	}
	take() // the first denial reads the key's item, and counts the address and takes it back
	for i := range 20 {
		remote := "192.0.2.1:1"
		if i%2 == 1 {
			remote = fmt.Sprintf("198.51.100.%d:1", i) // an address the instance has not seen
		}
		w := f.do(pro(remote))
		if w.Code != http.StatusTooManyRequests {
			t.Fatalf("blocked request %d from %s: %d, want 429", i+1, remote, w.Code)
		}
		if remote == "192.0.2.1:1" {
			for _, name := range []string{"Retry-After", "RateLimit", "RateLimit-Policy", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"} {
				if got, want := w.Header().Get(name), first.Header().Get(name); got != want {
					t.Errorf("blocked request %d: %s = %q, want %q (the first denial's)", i+1, name, got, want)
				}
			}
			if got, want := w.Body.String(), first.Body.String(); got != want {
				t.Errorf("blocked request %d: body %s, want the first denial's %s", i+1, got, want)
			}
		}
	}
	if got := take(); got != 0 {
		t.Errorf("20 requests of a blocked key sent %d DynamoDB requests, want none", got)
	}
	out, err := client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(table),
		Key:            map[string]types.AttributeValue{dynamostore.KeyAttribute: &types.AttributeValueMemberS{Value: "ip:198.51.100.1"}},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	if out.Item != nil {
		t.Errorf("a new address of the blocked key has an item: %v", out.Item)
	}
}
