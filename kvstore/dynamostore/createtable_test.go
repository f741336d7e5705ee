package dynamostore_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/slidegate/slidegate/kvstore/dynamostore"
)

// deletingTableAPI is a TableAPI whose table is being deleted when
// CreateTable first asks for it, as DynamoDB answers: CreateTable fails
// with ResourceInUseException while the table is DELETING, DescribeTable
// describes it DELETING for deleting calls, then does not know it
// (ResourceNotFoundException) until it is created again, after which it
// is ACTIVE. stuck keeps it DELETING for ever; inUse keeps CreateTable
// failing with ResourceInUseException once it is gone too (DynamoDB's
// control plane not done with the deletion).
type deletingTableAPI struct {
	mu                          sync.Mutex
	deleting                    int
	stuck, inUse                bool
	gone, recreated             bool
	creates, describes, ttlsSet int
}

func (a *deletingTableAPI) CreateTable(context.Context, *dynamodb.CreateTableInput, ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.creates++
	if !a.gone || a.inUse {
		return nil, &types.ResourceInUseException{Message: new("Attempt to change a resource which is still in use: Table is being deleted")}
	}
	a.recreated = true
	return &dynamodb.CreateTableOutput{}, nil
}

func (a *deletingTableAPI) DescribeTable(context.Context, *dynamodb.DescribeTableInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.describes++
	switch {
	case a.recreated:
		return &dynamodb.DescribeTableOutput{Table: &types.TableDescription{TableStatus: types.TableStatusActive}}, nil
	case a.stuck || a.describes <= a.deleting:
		return &dynamodb.DescribeTableOutput{Table: &types.TableDescription{TableStatus: types.TableStatusDeleting}}, nil
	}
	a.gone = true
	return nil, &types.ResourceNotFoundException{Message: new("Requested resource not found: Table: slidegate not found")}
}

func (a *deletingTableAPI) UpdateTimeToLive(context.Context, *dynamodb.UpdateTimeToLiveInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ttlsSet++
	return &dynamodb.UpdateTimeToLiveOutput{}, nil
}

// TestCreateTableWhileDeleted: `serve --create-table` run while its
// table was being deleted (aws dynamodb delete-table, to start again from
// empty counts, then serve at once) found it there (ResourceInUseException),
// waited while it was DELETING, and then, since 25eb3cd, took DynamoDB's
// "not found" for a table just created that DescribeTable did not know
// yet: it waited the whole of --create-table's 2 minutes for a table
// nobody was creating, and stopped with "table not ready within 2m0s:
// context deadline exceeded (last answer: ResourceNotFoundException)".
// CreateTable now creates the table once the deleted one is gone, and
// turns its TTL on.
func TestCreateTableWhileDeleted(t *testing.T) {
	for _, deleting := range []int{0, 2} {
		a := &deletingTableAPI{deleting: deleting}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := dynamostore.CreateTable(ctx, a, "slidegate")
		cancel()
		if err != nil {
			t.Fatalf("%d DELETING answers: CreateTable = %v, want nil: the table is gone and can be created", deleting, err)
		}
		if !a.recreated || a.ttlsSet != 1 {
			t.Errorf("%d DELETING answers: table created again %v, TTL set %d times; want true, 1", deleting, a.recreated, a.ttlsSet)
		}
	}
}

// TestCreateTableStuckDeleting: a table that stays DELETING ends the
// wait with the caller's context, and the error says what the table was
// doing, not only that it was not active.
func TestCreateTableStuckDeleting(t *testing.T) {
	a := &deletingTableAPI{stuck: true}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err := dynamostore.CreateTable(ctx, a, "slidegate")
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), `"slidegate"`) || !strings.Contains(err.Error(), "DELETING") {
		t.Errorf("CreateTable = %v; want the deadline, naming the table and its status DELETING", err)
	}
	if a.ttlsSet != 0 {
		t.Errorf("TTL set %d times, want 0", a.ttlsSet)
	}
	// Gone, but not yet to be created again: the error names the last
	// answer, DescribeTable's ResourceNotFoundException.
	a = &deletingTableAPI{inUse: true}
	ctx, cancel = context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err = dynamostore.CreateTable(ctx, a, "slidegate")
	var missing *types.ResourceNotFoundException
	if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &missing) || strings.Contains(err.Error(), "%!") {
		t.Errorf("CreateTable = %v; want the deadline and the ResourceNotFoundException", err)
	}
	if a.creates < 2 || a.ttlsSet != 0 {
		t.Errorf("%d CreateTable calls, TTL set %d times; want at least 2 (asked again once gone), 0", a.creates, a.ttlsSet)
	}
}

// TestCreateTableCancelled: a caller that gives up (serve stopped
// with Ctrl-C during --create-table) ends the wait at once, whether
// DescribeTable does not know the table yet or describes it CREATING.
func TestCreateTableCancelled(t *testing.T) {
	for _, unknown := range []int{1 << 30, 0} {
		a := &laggingTableAPI{unknown: unknown, creating: 1 << 30}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- dynamostore.CreateTable(ctx, a, "slidegate") }()
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) || !strings.HasPrefix(err.Error(), "dynamostore: ") {
				t.Errorf("CreateTable = %v, want context.Canceled, package-prefixed", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("CreateTable still waiting 10 s after its context was cancelled")
		}
	}
}

// laggingTableAPI is a TableAPI whose DescribeTable does not know a table
// for its first unknown calls after CreateTable (ResourceNotFoundException,
// as DynamoDB's eventually consistent DescribeTable may answer), then sees
// it CREATING for creating calls, then ACTIVE.
type laggingTableAPI struct {
	tableAPI
	unknown, creating int
}

func (a *laggingTableAPI) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	a.describes++
	switch {
	case a.describes <= a.unknown:
		return nil, &types.ResourceNotFoundException{Message: new("Requested resource not found: Table: slidegate not found")}
	case a.describes <= a.unknown+a.creating:
		return &dynamodb.DescribeTableOutput{Table: &types.TableDescription{TableStatus: types.TableStatusCreating}}, nil
	}
	return &dynamodb.DescribeTableOutput{Table: &types.TableDescription{TableStatus: types.TableStatusActive}}, nil
}

// TestCreateTableWaitsForDescribe: DescribeTable reads table metadata
// eventually consistently, and just after CreateTable DynamoDB may answer
// it with ResourceNotFoundException (the SDK's TableExistsWaiter waits
// through it). `serve --create-table` took that answer for a failure: it
// stopped with "describe table: ResourceNotFoundException" after creating
// the table, and run again found the table there (ResourceInUseException)
// and left its TTL off, so DynamoDB never deleted an item. CreateTable now
// waits until the table is described ACTIVE, then enables its TTL.
func TestCreateTableWaitsForDescribe(t *testing.T) {
	tests := []struct {
		name              string
		unknown, creating int
	}{
		{"not yet known", 1, 0},
		{"not yet known, then creating", 2, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := &laggingTableAPI{unknown: tt.unknown, creating: tt.creating}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := dynamostore.CreateTable(ctx, a, "slidegate"); err != nil {
				t.Fatalf("CreateTable = %v, want nil: the table was created and becomes ACTIVE", err)
			}
			if want := tt.unknown + tt.creating + 1; a.describes != want {
				t.Errorf("%d DescribeTable calls, want %d", a.describes, want)
			}
			if len(a.ttls) != 1 {
				t.Errorf("%d UpdateTimeToLive calls, want 1: the new table's TTL stayed off", len(a.ttls))
			}
		})
	}
}

// TestCreateTableNeverDescribed: a table DynamoDB never describes ends the
// wait with the caller's context, naming the table and the last answer.
func TestCreateTableNeverDescribed(t *testing.T) {
	a := &laggingTableAPI{unknown: 1 << 30}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err := dynamostore.CreateTable(ctx, a, "slidegate")
	var missing *types.ResourceNotFoundException
	if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &missing) || !strings.Contains(err.Error(), `"slidegate"`) {
		t.Errorf("CreateTable = %v; want the deadline and the ResourceNotFoundException, naming the table", err)
	}
	if len(a.ttls) != 0 {
		t.Errorf("%d UpdateTimeToLive calls, want 0", len(a.ttls))
	}
}
