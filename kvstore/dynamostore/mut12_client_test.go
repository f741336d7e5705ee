package dynamostore_test

import (
	"context"
	"testing"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"

	"github.com/slidegate/slidegate/kvstore/dynamostore"
)

// TestNewClientTransport: a client of NewClient keeps IdleConns idle
// connections in all, and to its one host, through an endpoint given or
// the regional one (the SDK keeps 100 in all, fewer than a server may
// send at once); only with an endpoint given, a local server that closes
// idle connections early, does it drop them after LocalIdleTimeout: the
// regional client keeps the SDK's idle timeout.
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
			if local := tr.IdleConnTimeout == dynamostore.LocalIdleTimeout; local != (endpoint != "") {
				t.Errorf("IdleConnTimeout %v; want LocalIdleTimeout (%v) only with an endpoint given", tr.IdleConnTimeout, dynamostore.LocalIdleTimeout)
			}
		})
	}
}
