package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// Retry bounds of NewClient: at most MaxAttempts tries of one call, at most
// MaxBackoff between two. The Store makes a retry only when the caller's
// deadline (store_timeout) leaves time for the backoff and another attempt;
// otherwise the failure goes to the caller as it is.
const (
	MaxAttempts = 3
	MaxBackoff  = 20 * time.Millisecond
)

// LocalIdleTimeout is how long NewClient keeps an idle connection to an
// endpoint given explicitly (dynalite, DynamoDB Local).
const LocalIdleTimeout = 4 * time.Second

// RegionalIdleTimeout is how long NewClient keeps an idle connection to
// DynamoDB's regional endpoint: less than the minute after which the
// endpoint closes an idle connection (the AWS SDK for Java's default
// maximum idle time is that minute), where the SDK's own is 90 s. A
// Lambda instance is frozen between invocations, so it cannot see the
// close until it is thawed; then the first write after a freeze of 60 to
// 90 s went out on the closed connection, failed, and was answered per
// on_store_error (writes are not retried: see writeRetryer). net/http
// measures idleness in wall-clock time when it takes a connection from
// the pool, time that passes while the instance is frozen, so a
// connection idle for longer is closed and a new one dialed.
const RegionalIdleTimeout = 50 * time.Second

// IdleConns is how many idle connections to DynamoDB a client of
// NewClient keeps for reuse: the requests a local server may send at once
// without dialing again (a Lambda instance sends one at a time).
const IdleConns = 256

// NewClient returns a DynamoDB client from the default AWS configuration
// (environment, shared config, the Lambda role) with bounded retries,
// keeping up to IdleConns idle connections for reuse. A
// non-empty endpoint (for example dynalite's "http://127.0.0.1:4567")
// replaces the regional one; for a loopback endpoint without
// AWS_ACCESS_KEY_ID in the environment it signs with placeholder
// credentials, which local servers accept, and the region defaults to
// us-east-1, and idle connections are dropped after LocalIdleTimeout
// (RegionalIdleTimeout without an endpoint).
func NewClient(ctx context.Context, endpoint string) (*dynamodb.Client, error) {
	opts := []func(*config.LoadOptions) error{
		config.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = MaxAttempts
				o.MaxBackoff = MaxBackoff
				// No retry quota: after an outage it would go on refusing
				// retries; attempts and the context bound the calls.
				o.RateLimiter = ratelimit.None
			})
		}),
	}
	if endpoint != "" {
		u, err := url.Parse(endpoint)
		if strings.Contains(endpoint, "@") {
			// User info, or an @ that a password may stand before where
			// Go takes it for a path ("http://u:0/pw@host"): the SDK
			// signs its requests and sends no user info, and the error
			// went to the log with the password in it.
			return nil, fmt.Errorf("dynamostore: endpoint %q: an @ in it, user info perhaps, which DynamoDB is not sent (it takes AWS credentials): drop it", shownScheme(u, err))
		}
		if err != nil || u.Scheme == "" || u.Host == "" {
			return nil, fmt.Errorf("dynamostore: endpoint %q: want a URL such as http://127.0.0.1:4567", endpoint)
		}
		if loopback(u.Hostname()) && os.Getenv("AWS_ACCESS_KEY_ID") == "" {
			opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("local", "local", "")))
		}
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("dynamostore: aws config: %w", err)
	}
	if cfg.Region == "" && endpoint != "" {
		cfg.Region = "us-east-1"
	}
	return dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
		// The SDK's HTTP client, with the client's own settings
		// (AWS_CA_BUNDLE's roots: a fresh client dropped them, and a
		// TLS endpoint they vouch for failed).
		hc, ok := o.HTTPClient.(*awshttp.BuildableClient)
		if !ok || hc == nil {
			hc = awshttp.NewBuildableClient()
		}
		o.HTTPClient = hc.WithTransportOptions(func(tr *http.Transport) {
			// As many idle connections as IdleConns requests at once:
			// the SDK's 10 per host made a server under load close
			// and dial again most of its connections after each
			// burst, each handshake (TCP, TLS) within store_timeout.
			tr.MaxIdleConns = IdleConns
			tr.MaxIdleConnsPerHost = IdleConns
			// Drop idle connections before the server closes them, so
			// that a request does not meet a closed one.
			tr.IdleConnTimeout = RegionalIdleTimeout
			if endpoint != "" {
				// Local servers close idle connections early (Node's
				// default keep-alive is 5 s).
				tr.IdleConnTimeout = LocalIdleTimeout
			}
		})
	}), nil
}

// shownScheme is an endpoint with an @ as an error may show it: its
// scheme alone, when it parsed.
func shownScheme(u *url.URL, err error) string {
	if err != nil || u.Scheme == "" {
		return "…"
	}
	return u.Scheme + "://…"
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// TableAPI is the slice of the DynamoDB client CreateTable calls.
type TableAPI interface {
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	UpdateTimeToLive(ctx context.Context, in *dynamodb.UpdateTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
}

// CreateTable creates table with the key schema the Store expects, billed
// on demand, waits until it is active and enables its TTL on TTLAttribute,
// as template.yaml does: without, DynamoDB never deletes an item, and every
// identity ever seen stays in the table. A server that has no TTL
// (dynalite) is not an error. A table that already exists is not an error
// either, and is left as it is; one being deleted is created again once it
// is gone. It waits for the table until ctx ends,
// also while DescribeTable, whose answers are eventually consistent, does
// not know it yet. It is for `serve --create-table` and tests; the Lambda
// gets its table from template.yaml.
func CreateTable(ctx context.Context, client TableAPI, table string) error {
	if table == "" {
		return ErrTable
	}
	created, err := createTable(ctx, client, table)
	if err != nil {
		return err
	}
	last := "" // the last status described, for the error at the deadline
	for {
		out, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
		var missing *types.ResourceNotFoundException
		switch {
		case errors.As(err, &missing) && !created:
			// The table found there (ResourceInUseException) is gone: it
			// was being deleted (delete-table, then serve at once). Waited
			// on as a table just created, it held serve the whole of its
			// bound for a table nobody created.
			var cerr error
			if created, cerr = createTable(ctx, client, table); cerr != nil {
				return cerr
			}
		case errors.As(err, &missing):
			// DescribeTable reads table metadata eventually consistently:
			// just after CreateTable it may not know the table yet (the
			// SDK's TableExistsWaiter waits through this too). Taken for a
			// failure, it stopped `serve --create-table` after creating
			// the table, and the next run found it there and left its TTL
			// off.
		case err != nil:
			return fmt.Errorf("dynamostore: describe table %q: %w", table, err)
		case out.Table != nil && out.Table.TableStatus == types.TableStatusActive:
			if !created {
				return nil
			}
			return enableTTL(ctx, client, table)
		case out.Table != nil:
			last = string(out.Table.TableStatus)
		}
		select {
		case <-ctx.Done():
			if missing != nil {
				return fmt.Errorf("dynamostore: table %q not active: %w (last answer: %w)", table, ctx.Err(), err)
			}
			if last != "" {
				return fmt.Errorf("dynamostore: table %q not active: %w (last status %s)", table, ctx.Err(), last)
			}
			return fmt.Errorf("dynamostore: table %q not active: %w", table, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// createTable asks DynamoDB to create table and reports whether it did:
// false when the table exists already, or is still being deleted
// (ResourceInUseException).
func createTable(ctx context.Context, client TableAPI, table string) (bool, error) {
	_, err := client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(KeyAttribute), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(KeyAttribute), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return false, fmt.Errorf("dynamostore: create table %q: %w", table, err)
	}
	return err == nil, nil
}

// enableTTL turns on the TTL of table, which CreateTable created, on
// TTLAttribute.
func enableTTL(ctx context.Context, client TableAPI, table string) error {
	_, err := client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName:               aws.String(table),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(TTLAttribute), Enabled: aws.Bool(true)},
	})
	var api smithy.APIError
	if err != nil && !(errors.As(err, &api) && api.ErrorCode() == "UnknownOperationException") {
		return fmt.Errorf("dynamostore: table %q created, but its TTL on %q not enabled (without it no item ever expires; enable it by hand): %w", table, TTLAttribute, err)
	}
	return nil
}

// Probe reads from table a key no identity has: it reports whether the
// table exists and can be read (a *types.ResourceNotFoundException when it
// does not exist), and opens the connection (DNS, TLS) before the first
// request needs it within its store_timeout.
func Probe(ctx context.Context, c API, table string) error {
	_, err := c.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(table),
		Key:       map[string]types.AttributeValue{KeyAttribute: &types.AttributeValueMemberS{Value: "slidegate:probe"}},
	})
	return err
}
