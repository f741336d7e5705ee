package dynamostore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/slidegate/slidegate/kvstore/dynamostore"
)

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
