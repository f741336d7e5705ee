package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/slidegate/slidegate/internal/dynalite"
	"github.com/slidegate/slidegate/internal/testenv"
	"github.com/slidegate/slidegate/kvstore/dynamostore"
)

// TestServeTableKeySchema: a table whose key is not slidegate's (made by
// hand, or for another program) stops serve at start, with or without
// --create-table (which leaves a table it finds as it is), with an error
// that names --table and the key it needs. DynamoDB's own message ("The
// provided key element does not match the schema") named neither the key
// nor what to do about it.
func TestServeTableKeySchema(t *testing.T) {
	srv := dynalite.Run(t)
	ctx := context.Background()
	client, err := dynamostore.NewClient(ctx, srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	key := func(name string, typ types.ScalarAttributeType, kt types.KeyType) ([]types.AttributeDefinition, []types.KeySchemaElement) {
		return []types.AttributeDefinition{{AttributeName: aws.String(name), AttributeType: typ}},
			[]types.KeySchemaElement{{AttributeName: aws.String(name), KeyType: kt}}
	}
	for _, tc := range []struct {
		table string
		keys  [][2]string // attribute, type; the first the partition key, a second the sort key
	}{
		{"key-named-pk", [][2]string{{"pk", "S"}}},
		{"key-a-number", [][2]string{{"id", "N"}}},
		{"key-with-sort", [][2]string{{"id", "S"}, {"sk", "S"}}},
	} {
		in := &dynamodb.CreateTableInput{TableName: aws.String(tc.table), BillingMode: types.BillingModePayPerRequest}
		for i, k := range tc.keys {
			kt := types.KeyTypeHash
			if i > 0 {
				kt = types.KeyTypeRange
			}
			defs, schema := key(k[0], types.ScalarAttributeType(k[1]), kt)
			in.AttributeDefinitions = append(in.AttributeDefinitions, defs...)
			in.KeySchema = append(in.KeySchema, schema...)
		}
		if _, err := client.CreateTable(ctx, in); err != nil {
			t.Fatal(err)
		}
		if err := dynamodb.NewTableExistsWaiter(client, func(o *dynamodb.TableExistsWaiterOptions) {
			o.MinDelay, o.MaxDelay = 50*time.Millisecond, 200*time.Millisecond
		}).Wait(ctx, &dynamodb.DescribeTableInput{TableName: in.TableName}, 20*time.Second); err != nil {
			t.Fatal(err)
		}
		for _, create := range []bool{false, true} {
			args := []string{"serve", "--listen", "127.0.0.1:0", "--store", "dynamodb", "--table", tc.table, "--endpoint", srv.Endpoint}
			if create {
				args = append(args, "--create-table")
			}
			out := &testenv.Buffer{}
			// A table serve takes makes it listen until ctx ends: the
			// bound fails the test then rather than hanging it.
			rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
			err := run(rctx, args, out, io.Discard)
			cancel()
			if strings.Contains(out.String(), "listening") {
				t.Errorf("%s (--create-table %t): serve listened on a table whose key is not its own", tc.table, create)
			}
			if err == nil || !strings.Contains(err.Error(), `--table "`+tc.table+`"`) || !strings.Contains(err.Error(), `string partition key "id" and no sort key`) {
				t.Errorf("%s (--create-table %t): serve = %v, want an error naming --table and the key it needs", tc.table, create, err)
			}
		}
	}
}
