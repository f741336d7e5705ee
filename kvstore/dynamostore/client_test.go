package dynamostore_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/slidegate/slidegate/kvstore/dynamostore"
)

// TestNewClientLocalEndpointDefaultsRegion: with an endpoint given
// (`serve --endpoint http://127.0.0.1:4567`) and no region anywhere in the
// environment, the client signs for us-east-1, which local servers
// accept; without one, every request failed for want of a region. For
// AWS itself (no endpoint) no region is made up.
func TestNewClientLocalEndpointDefaultsRegion(t *testing.T) {
	home := t.TempDir()
	for k, v := range map[string]string{
		"HOME": home, "AWS_CONFIG_FILE": filepath.Join(home, "config"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(home, "credentials"),
		"AWS_REGION": "", "AWS_DEFAULT_REGION": "", "AWS_PROFILE": "", "AWS_EC2_METADATA_DISABLED": "true",
		"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_ENDPOINT_URL_DYNAMODB": "", "AWS_ENDPOINT_URL": "",
	} {
		t.Setenv(k, v)
	}
	for endpoint, want := range map[string]string{"http://127.0.0.1:4567": "us-east-1", "": ""} {
		c, err := dynamostore.NewClient(context.Background(), endpoint)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Options().Region; got != want {
			t.Errorf("endpoint %q: region %q, want %q", endpoint, got, want)
		}
	}
}

// tableAPI is a TableAPI whose table is active once created; exists makes
// it there already, ttlErr is the answer to UpdateTimeToLive.
type tableAPI struct {
	exists             bool
	ttlErr             error
	creates, describes int
	ttls               []*dynamodb.UpdateTimeToLiveInput
}

func (a *tableAPI) CreateTable(context.Context, *dynamodb.CreateTableInput, ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	a.creates++
	if a.exists {
		return nil, &types.ResourceInUseException{Message: new(string)}
	}
	return &dynamodb.CreateTableOutput{}, nil
}

func (a *tableAPI) DescribeTable(context.Context, *dynamodb.DescribeTableInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	a.describes++
	return &dynamodb.DescribeTableOutput{Table: &types.TableDescription{TableStatus: types.TableStatusActive}}, nil
}

func (a *tableAPI) UpdateTimeToLive(_ context.Context, in *dynamodb.UpdateTimeToLiveInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error) {
	a.ttls = append(a.ttls, in)
	if a.ttlErr != nil {
		return nil, a.ttlErr
	}
	return &dynamodb.UpdateTimeToLiveOutput{}, nil
}

// TestCreateTableThatExists: `serve --create-table` started a second time
// finds its table there (DynamoDB's ResourceInUseException) and goes on,
// leaving the table's settings as they are.
func TestCreateTableThatExists(t *testing.T) {
	a := &tableAPI{exists: true}
	if err := dynamostore.CreateTable(context.Background(), a, "slidegate"); err != nil {
		t.Errorf("CreateTable of an existing table: %v, want nil", err)
	}
	if a.creates != 1 || a.describes != 1 || len(a.ttls) != 0 {
		t.Errorf("%d creates, %d describes, %d UpdateTimeToLive; want 1, 1, 0", a.creates, a.describes, len(a.ttls))
	}
}

// TestCreateTableEnablesTTL: a table that `serve --store dynamodb
// --create-table` creates in AWS has its TTL enabled on TTLAttribute, as
// template.yaml's has; created without, DynamoDB never deleted an item,
// and every identity ever seen (each client IP, each made-up API key)
// stayed in the table, billed, for good. A local server without TTL
// (dynalite answers UnknownOperationException) is not an error; any other
// failure is, naming the table.
func TestCreateTableEnablesTTL(t *testing.T) {
	tests := []struct {
		name    string
		ttlErr  error
		wantErr bool
	}{
		{"enabled", nil, false},
		{"server without TTL", &smithy.GenericAPIError{Code: "UnknownOperationException", Message: "UnknownError"}, false},
		{"not allowed", &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "not authorized to perform: dynamodb:UpdateTimeToLive"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := &tableAPI{ttlErr: tt.ttlErr}
			err := dynamostore.CreateTable(context.Background(), a, "slidegate")
			if (err != nil) != tt.wantErr {
				t.Fatalf("CreateTable = %v, want error %v", err, tt.wantErr)
			}
			if tt.wantErr && (!errors.Is(err, tt.ttlErr) || !strings.Contains(err.Error(), `"slidegate"`)) {
				t.Errorf("CreateTable = %v; want it to wrap %v and name the table", err, tt.ttlErr)
			}
			if len(a.ttls) != 1 {
				t.Fatalf("%d UpdateTimeToLive calls, want 1", len(a.ttls))
			}
			in := a.ttls[0]
			spec := in.TimeToLiveSpecification
			if aws.ToString(in.TableName) != "slidegate" || spec == nil || aws.ToString(spec.AttributeName) != dynamostore.TTLAttribute || !aws.ToBool(spec.Enabled) {
				t.Errorf("UpdateTimeToLive table %q spec %+v; want slidegate, %q enabled", aws.ToString(in.TableName), spec, dynamostore.TTLAttribute)
			}
		})
	}
}
