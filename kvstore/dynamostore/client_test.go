package dynamostore_test

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/slidegate/slidegate/kvstore/dynamostore"
)

// noAWSEnv gives the test an empty home and an environment without AWS
// settings (region, profile, credentials, endpoints, CA bundle) and
// returns the home.
func noAWSEnv(t *testing.T) string {
	t.Helper()
	home := t.TempDir()
	for k, v := range map[string]string{
		"HOME": home, "AWS_CONFIG_FILE": filepath.Join(home, "config"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(home, "credentials"),
		"AWS_REGION": "", "AWS_DEFAULT_REGION": "", "AWS_PROFILE": "", "AWS_EC2_METADATA_DISABLED": "true",
		"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_ENDPOINT_URL_DYNAMODB": "", "AWS_ENDPOINT_URL": "",
		"AWS_CA_BUNDLE": "",
	} {
		t.Setenv(k, v)
	}
	return home
}

// TestNewClientLocalEndpointDefaultsRegion: with an endpoint given
// (`serve --endpoint http://127.0.0.1:4567`) and no region anywhere in the
// environment, the client signs for us-east-1, which local servers
// accept; without one, every request failed for want of a region. For
// AWS itself (no endpoint) no region is made up.
func TestNewClientLocalEndpointDefaultsRegion(t *testing.T) {
	noAWSEnv(t)
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

// TestNewClientEndpointHidesUserInfo: an endpoint with an @ (user info,
// or a password Go takes for a path) is refused without the password in
// the error, which serve prints on standard error and so to its log. One
// that did not parse (a bad port, a bracket left open) was quoted whole,
// password and all; one that parsed was taken, its user info never sent.
func TestNewClientEndpointHidesUserInfo(t *testing.T) {
	noAWSEnv(t)
	for _, endpoint := range []string{
		"http://u:s3cret@127.0.0.1:bad",
		"http://u:s3cret@[::1",
		"http://u:s3cret@127.0.0.1:4567",
		"http://svc:0/s3cret@127.0.0.1:4567",
		"u:s3cret@127.0.0.1:4567",
	} {
		_, err := dynamostore.NewClient(context.Background(), endpoint)
		if err == nil || strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "drop it") {
			t.Errorf("endpoint %q: %v, want an error without the password that says to drop the user info", endpoint, err)
		}
	}
}

// TestNewClientEndpointKeepsCABundle: an endpoint over TLS whose
// certificate the operator's AWS_CA_BUNDLE vouches for (`serve --endpoint
// https://dynamodb.internal:8443`, a private CA's certificate) is trusted; the
// client's own HTTP client, with the idle timeout for local servers, used
// to drop the bundle, and every request failed the certificate check.
func TestNewClientEndpointKeepsCABundle(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.Header().Set("X-Amz-Crc32", strconv.FormatUint(uint64(crc32.ChecksumIEEE([]byte("{}"))), 10))
		_, _ = io.WriteString(w, "{}")
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // failed handshakes
	srv.StartTLS()
	defer srv.Close()
	home := noAWSEnv(t)
	bundle := filepath.Join(home, "ca.pem")
	if err := os.WriteFile(bundle, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_CA_BUNDLE", bundle)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := dynamostore.NewClient(ctx, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if err := dynamostore.Probe(ctx, c, "slidegate"); err != nil {
		t.Errorf("Probe through a TLS endpoint AWS_CA_BUNDLE trusts: %v, want nil", err)
	}
	if hc, ok := c.Options().HTTPClient.(*awshttp.BuildableClient); !ok || hc.GetTransport().IdleConnTimeout != dynamostore.LocalIdleTimeout {
		t.Errorf("HTTP client %T: want a BuildableClient whose idle timeout is LocalIdleTimeout", c.Options().HTTPClient)
	}
}

// TestNewClientKeepsConnections: a local server under load (`serve --store
// dynamodb`, 40 requests at once) reuses its connections to DynamoDB from
// one burst to the next, through an endpoint given or the regional one.
// The SDK's default kept 10 idle connections per host: 30 of every 40
// were closed after each burst and dialed again, each paying the TCP and
// TLS handshakes within store_timeout (the Lambda's warm-up exists to keep
// them out of it), which a server far from the region does not meet.
func TestNewClientKeepsConnections(t *testing.T) {
	const burst, bursts = 40, 4
	for _, viaEnv := range []bool{false, true} {
		t.Run(fmt.Sprintf("AWS_ENDPOINT_URL_DYNAMODB %v", viaEnv), func(t *testing.T) {
			var mu sync.Mutex
			inFlight, dialed := 0, 0
			all := make(chan struct{})
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				// Every request of a burst waits for the others: each
				// needs a connection of its own.
				mu.Lock()
				wait := all
				if inFlight++; inFlight == burst {
					close(all)
					all, inFlight = make(chan struct{}), 0
				}
				mu.Unlock()
				select {
				case <-wait:
				case <-time.After(10 * time.Second): // not all came: the test fails on the count
				}
				w.Header().Set("Content-Type", "application/x-amz-json-1.0")
				w.Header().Set("X-Amz-Crc32", strconv.FormatUint(uint64(crc32.ChecksumIEEE([]byte("{}"))), 10))
				_, _ = io.WriteString(w, "{}")
			}))
			srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
				if s == http.StateNew {
					mu.Lock()
					dialed++
					mu.Unlock()
				}
			}
			srv.Start()
			defer srv.Close()
			noAWSEnv(t)
			endpoint := srv.URL
			if viaEnv {
				// The regional client's path, with the endpoint from
				// the environment.
				t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", srv.URL)
				t.Setenv("AWS_REGION", "us-east-1")
				t.Setenv("AWS_ACCESS_KEY_ID", "AKID")
				t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
				endpoint = ""
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c, err := dynamostore.NewClient(ctx, endpoint)
			if err != nil {
				t.Fatal(err)
			}
			for range bursts {
				var wg sync.WaitGroup
				for range burst {
					wg.Go(func() {
						if err := dynamostore.Probe(ctx, c, "slidegate"); err != nil {
							t.Error(err)
						}
					})
				}
				wg.Wait()
			}
			mu.Lock()
			defer mu.Unlock()
			// A few more than one burst's: the transport puts a
			// connection back after its caller has read the answer, and
			// the next burst may dial before it is back (41 in one run
			// of eight on two busy cores). The SDK's 10 per host dialed
			// 30 more per burst.
			if dialed < burst || dialed > burst+burst/8 {
				t.Errorf("%d connections for %d bursts of %d requests, want %d (%d at most)", dialed, bursts, burst, burst, burst+burst/8)
			}
		})
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

// TestNewClientTransport: a client of NewClient keeps IdleConns idle
// connections in all, and to its one host, through an endpoint given or
// the regional one (the SDK keeps 100 in all, fewer than a server may
// send at once). It drops idle connections before their server closes
// them: after LocalIdleTimeout with an endpoint given (a local server that
// closes idle connections early), after RegionalIdleTimeout otherwise,
// under the minute after which DynamoDB closes them (the SDK's 90 s let
// a Lambda instance thawed after 60 to 90 s write on a closed one).
func TestNewClientTransport(t *testing.T) {
	for _, endpoint := range []string{"", "http://127.0.0.1:4567"} {
		t.Run("endpoint "+endpoint, func(t *testing.T) {
			noAWSEnv(t)
			t.Setenv("AWS_REGION", "eu-west-1")
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c, err := dynamostore.NewClient(ctx, endpoint)
			if err != nil {
				t.Fatal(err)
			}
			hc, ok := c.Options().HTTPClient.(*awshttp.BuildableClient)
			if !ok {
				t.Fatalf("HTTP client %T, want a BuildableClient", c.Options().HTTPClient)
			}
			tr := hc.GetTransport()
			if tr.MaxIdleConns != dynamostore.IdleConns || tr.MaxIdleConnsPerHost != dynamostore.IdleConns {
				t.Errorf("MaxIdleConns %d, MaxIdleConnsPerHost %d; want %d both", tr.MaxIdleConns, tr.MaxIdleConnsPerHost, dynamostore.IdleConns)
			}
			want := dynamostore.RegionalIdleTimeout
			if endpoint != "" {
				want = dynamostore.LocalIdleTimeout
			}
			if tr.IdleConnTimeout != want || want >= time.Minute {
				t.Errorf("IdleConnTimeout %v; want %v, under DynamoDB's minute", tr.IdleConnTimeout, want)
			}
		})
	}
}

// TestNewClientIgnoresMaxAttemptsEnv: NewClient's reads make at most
// MaxAttempts tries, as docs/lambda.md says, also with AWS_MAX_ATTEMPTS in
// the environment: the SDK's config reads it only when no retryer is given
// (config v1.33.15's resolveRetryer), and had it been read, the client
// would have applied it over NewClient's retryer. This pins that against
// an SDK upgrade.
func TestNewClientIgnoresMaxAttemptsEnv(t *testing.T) {
	noAWSEnv(t)
	t.Setenv("AWS_REGION", "eu-west-1")
	t.Setenv("AWS_MAX_ATTEMPTS", "10")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := dynamostore.NewClient(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if n := c.Options().Retryer.MaxAttempts(); n != dynamostore.MaxAttempts {
		t.Errorf("the client's retryer makes %d attempts, want %d", n, dynamostore.MaxAttempts)
	}
}
