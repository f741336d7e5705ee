package dynamostore_test

import (
	"context"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/slidegate/slidegate/internal/dynalite"
	"github.com/slidegate/slidegate/kvstore/dynamostore"
)

// TestWriteNotSentIsRetried: a write whose connection could not be made
// (the dial failed: a lookup that failed, an address that refused) was
// never sent, so DynamoDB cannot have applied it, and it is retried like
// a throttled one: counted once, not let through uncounted (or refused
// with a 503) by on_store_error. A write that was sent and failed is
// still not retried (TestAppliedWriteIsNotRetried).
func TestWriteNotSentIsRetried(t *testing.T) {
	// A port nothing listens on: dialing it fails at once.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := ln.Addr().String()
	ln.Close()
	for _, tt := range writesOfOne() {
		t.Run(tt.name, func(t *testing.T) {
			tb := newTable(t, dynalite.Shared(t).Endpoint)
			var dials atomic.Int64
			tr := http.DefaultTransport.(*http.Transport).Clone()
			var d net.Dialer
			tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
				if dials.Add(1) == 1 {
					return d.DialContext(ctx, network, refused)
				}
				return d.DialContext(ctx, network, addr)
			}
			t.Cleanup(tr.CloseIdleConnections)
			client := dynamodb.New(tb.client.Options(), func(o *dynamodb.Options) { o.HTTPClient = &http.Client{Transport: tr} })
			s, err := dynamostore.New(client, tb.name)
			if err != nil {
				t.Fatal(err)
			}
			if err := tt.write(s); err != nil {
				t.Errorf("write after a failed dial: %v; want it retried on a new connection", err)
			}
			if n := dials.Load(); n != 2 {
				t.Errorf("%d dials, want 2", n)
			}
			if got := tb.stored(t, "k")[attr("minute", time.Minute, t0)]; got != 1 {
				t.Errorf("the table holds %d, want 1", got)
			}
		})
	}
}
