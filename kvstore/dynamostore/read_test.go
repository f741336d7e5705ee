package dynamostore_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/slidegate/slidegate/kvstore"
	"github.com/slidegate/slidegate/kvstore/dynamostore"
)

// TestReadIsTheTables: Read answers with the stored counts, from one
// consistent GetItem, where Load answers from what the Store has seen
// (nothing, on an instance that has not served the key), and leaves the
// item in the cache; a missing item reads as zeros; a failed read is an
// error, wrapped, and changes no count.
func TestReadIsTheTables(t *testing.T) {
	slots := []kvstore.Slot{minute(b0 - 1), minute(b0), day(20400)}
	stored := item("minute#1m0s#29384719", 4, "minute#1m0s#29384720", 6, "day#24h0m0s#20400", 17)
	failure := &types.ProvisionedThroughputExceededException{Message: aws.String("throttled")}
	tests := []struct {
		name string
		get  func(*dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error)
		want []int64
		err  error
	}{
		{"stored", func(*dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) {
			return &dynamodb.GetItemOutput{Item: stored}, nil
		}, []int64{4, 6, 17}, nil},
		{"missing", func(*dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) {
			return &dynamodb.GetItemOutput{}, nil
		}, []int64{0, 0, 0}, nil},
		{"failed", func(*dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) {
			return nil, failure
		}, []int64{-1, -1, -1}, failure},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := &fakeAPI{get: tt.get}
			s := mustNew(t, api)
			counts := []int64{-1, -1, -1}
			err := s.Read(context.Background(), "k", slots, counts)
			if !errors.Is(err, tt.err) {
				t.Fatalf("Read = %v, want %v", err, tt.err)
			}
			if tt.err != nil && !strings.HasPrefix(err.Error(), "dynamostore: ") {
				t.Errorf("Read = %q, want the package prefix", err)
			}
			if got, want := counts, tt.want; !slices.Equal(got, want) {
				t.Errorf("counts %v, want %v", got, want)
			}
			if len(api.gets) != 1 || !aws.ToBool(api.gets[0].ConsistentRead) || aws.ToString(api.gets[0].TableName) != "tbl" {
				t.Fatalf("GetItem requests %+v, want one consistent read of tbl", api.gets)
			}
			if tt.err != nil {
				return
			}
			loaded := make([]int64, len(slots))
			if err := s.Load(context.Background(), "k", slots, loaded); err != nil || !slices.Equal(loaded, tt.want) {
				t.Errorf("Load after Read = %v, %v; want %v (the item cached)", loaded, err, tt.want)
			}
		})
	}
	if err := mustNew(t, &fakeAPI{}).Read(context.Background(), "k", slots, make([]int64, 1)); !errors.Is(err, dynamostore.ErrLength) {
		t.Errorf("Read with 1 count for 3 slots = %v, want ErrLength", err)
	}
}
