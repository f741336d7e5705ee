package dynamostore_test

import (
	"context"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"

	"github.com/slidegate/slidegate/internal/dynalite"
	"github.com/slidegate/slidegate/kvstore"
	"github.com/slidegate/slidegate/kvstore/dynamostore"
	"github.com/slidegate/slidegate/kvstore/storetest"
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

// newTable returns a client of the shared dynalite, counting its requests,
// and a fresh table.
func newTable(t *testing.T, endpoint string) (*dynamodb.Client, *calls, string) {
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
	table := "slidegate-test-" + strconv.FormatInt(tableSeq.Add(1), 10)
	if err := dynamostore.CreateTable(ctx, client, table); err != nil {
		t.Fatalf("CreateTable: %v", err)
	}
	c.take()
	return client, c, table
}

func newStore(t *testing.T) (*dynamostore.Store, *calls) {
	t.Helper()
	client, c, table := newTable(t, dynalite.Shared(t).Endpoint)
	s, err := dynamostore.New(client, table)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s, c
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) kvstore.Store {
		s, _ := newStore(t)
		return s
	})
}
