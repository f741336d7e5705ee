package dynamostore_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

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

// tableAPI is a TableAPI whose table exists already and is active.
type tableAPI struct{ creates, describes int }

func (a *tableAPI) CreateTable(context.Context, *dynamodb.CreateTableInput, ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	a.creates++
	return nil, &types.ResourceInUseException{Message: new(string)}
}

func (a *tableAPI) DescribeTable(context.Context, *dynamodb.DescribeTableInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	a.describes++
	return &dynamodb.DescribeTableOutput{Table: &types.TableDescription{TableStatus: types.TableStatusActive}}, nil
}

// TestCreateTableThatExists: `serve --create-table` started a second time
// finds its table there (DynamoDB's ResourceInUseException) and goes on.
func TestCreateTableThatExists(t *testing.T) {
	a := &tableAPI{}
	if err := dynamostore.CreateTable(context.Background(), a, "slidegate"); err != nil {
		t.Errorf("CreateTable of an existing table: %v, want nil", err)
	}
	if a.creates != 1 || a.describes != 1 {
		t.Errorf("%d creates, %d describes; want 1, 1", a.creates, a.describes)
	}
}
