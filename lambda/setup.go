package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/slidegate/slidegate/config"
	"github.com/slidegate/slidegate/httpapi"
	"github.com/slidegate/slidegate/kvstore/dynamostore"
	"github.com/slidegate/slidegate/kvstore/memstore"
)

// maxLocalIdentities bounds the instance's memory store of local-scope
// limits (about 345 bytes of table an identity at this bound, which hold
// up to four limits, so some 34 MB when full): beyond, a
// new identity evicts the one that counts least per unit of time
// (memstore.NewLimited). An instance
// serves one request at a time, so a short local window holds far fewer.
const maxLocalIdentities = 100_000

// Environment variables the function reads (template.yaml sets them).
const (
	EnvConfig = "SLIDEGATE_CONFIG"
	EnvTable  = "TABLE_NAME"
	EnvOrigin = "ORIGIN_URL"
)

// warmTimeout bounds the request that opens the connection to DynamoDB
// during init.
const warmTimeout = time.Second

// Errors of setup, wrapped with the variable's value where that helps.
var (
	ErrTable  = errors.New("lambda: " + EnvTable + " must name the DynamoDB table")
	ErrOrigin = errors.New("lambda: " + EnvOrigin + " must be an absolute http or https URL")
	ErrConfig = errors.New("lambda: " + EnvConfig)
)

// setup builds the instance's handler from the environment; the handler
// logs JSON lines to logs (the function's stderr, which Lambda sends to
// CloudWatch).
func setup(ctx context.Context, getenv func(string) string, logs io.Writer) (http.Handler, error) {
	cfg := config.Default()
	if raw := getenv(EnvConfig); raw != "" {
		var err error
		if cfg, err = config.Parse([]byte(raw)); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
	}
	log := slog.New(slog.NewJSONHandler(logs, nil))
	var next http.Handler
	if raw := getenv(EnvOrigin); raw != "" {
		u, err := httpapi.ParseOrigin(raw)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrOrigin, err)
		}
		next = originProxy(u, log, cfg.Identity.Prefixes(), time.Now)
	}
	table := getenv(EnvTable)
	if table == "" {
		return nil, ErrTable
	}
	client, err := dynamostore.NewClient(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("lambda: %w", err)
	}
	store, err := dynamostore.New(client, table, dynamostore.MaxPeriod(cfg.LongestWindow()))
	if err != nil {
		return nil, fmt.Errorf("lambda: %w", err)
	}
	h, err := httpapi.New(httpapi.Options{
		Config: cfg, Store: store, Local: memstore.NewLimited(maxLocalIdentities),
		Next: next, PeerIP: sourceIP, Logger: log,
	})
	if err != nil {
		return nil, fmt.Errorf("lambda: %w", err)
	}
	warm(ctx, client, table, log)
	return h, nil
}

// warm opens the connection to DynamoDB (DNS, TLS) during init, so that
// the first request's conditional write does not pay for it within
// store_timeout. It reads a key no identity has; a
// failure is logged and otherwise ignored.
func warm(ctx context.Context, client *dynamodb.Client, table string, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, warmTimeout)
	defer cancel()
	if err := dynamostore.Probe(ctx, client, table); err != nil {
		log.Warn("dynamodb warm-up failed", slog.String("table", table), slog.String("error", err.Error()))
	}
}
