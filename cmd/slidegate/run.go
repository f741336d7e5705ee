package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/slidegate/slidegate/config"
	"github.com/slidegate/slidegate/httpapi"
	"github.com/slidegate/slidegate/kvstore"
	"github.com/slidegate/slidegate/kvstore/dynamostore"
	"github.com/slidegate/slidegate/kvstore/memstore"
)

const usage = `usage:
  slidegate serve [--config FILE] [--listen ADDR] [--origin URL | --demo-origin]
                  [--store memory|dynamodb --table T [--endpoint URL] [--create-table]]
  slidegate check-config FILE
  slidegate hash-key KEY    (KEY "-" reads one line from standard input)`

// Errors of the command line.
var (
	errUsage = errors.New("usage")
)

// shutdownGrace bounds how long in-flight requests may take after SIGTERM.
const shutdownGrace = 10 * time.Second

// run is the whole program: main only wires the signals and the exit code.
// It returns when a command is done, or, for serve, when ctx is cancelled
// and the server has shut down.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: no command\n%s", errUsage, usage)
	}
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:], stdout, stderr)
	case "check-config":
		return checkConfig(args[1:], stdout)
	case "hash-key":
		return hashKey(args[1:], os.Stdin, stdout)
	case "help", "-h", "--help":
		fmt.Fprintln(stdout, usage)
		return nil
	}
	return fmt.Errorf("%w: unknown command %q\n%s", errUsage, args[0], usage)
}

func checkConfig(args []string, stdout io.Writer) error {
	if len(args) != 1 {
		return fmt.Errorf("%w: check-config takes one FILE\n%s", errUsage, usage)
	}
	cfg, err := loadConfig(args[0])
	if err != nil {
		return err
	}
	plans := make([]string, 0, len(cfg.Plans))
	for name := range cfg.Plans {
		plans = append(plans, name)
	}
	slices.Sort(plans)
	fmt.Fprintf(stdout, "%s: ok: plans %s (default %s), %d API keys, %d IP limits, %d route costs, on_store_error %s, store_timeout %s, shadow %t\n",
		args[0], strings.Join(plans, ", "), cfg.DefaultPlan, len(cfg.APIKeys), len(cfg.IPLimits), len(cfg.Costs), cfg.OnStoreError, cfg.StoreTimeout, cfg.Shadow)
	return nil
}

func loadConfig(path string) (*config.Config, error) {
	if path == "" {
		return config.Default(), nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	cfg, err := config.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

func hashKey(args []string, stdin io.Reader, stdout io.Writer) error {
	if len(args) != 1 {
		return fmt.Errorf("%w: hash-key takes one KEY\n%s", errUsage, usage)
	}
	key := args[0]
	if key == "-" {
		line, err := bufio.NewReader(stdin).ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("read key: %w", err)
		}
		key = strings.TrimRight(line, "\r\n")
	}
	if key == "" {
		return fmt.Errorf("%w: empty KEY", errUsage)
	}
	fmt.Fprintln(stdout, httpapi.HashKey(key))
	return nil
}

type serveFlags struct {
	config, listen, origin string
	demo                   bool
	store, table, endpoint string
	createTable            bool
	maxIdentities          int
	maxIdentitiesSet       bool // given on the command line
}

// defaultMaxIdentities bounds the memory store: about 340 bytes each for
// a minute-and-day plan, so some 340 MB of live heap when full.
const defaultMaxIdentities = 1_000_000

func serve(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var f serveFlags
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.config, "config", "", "configuration `FILE` (JSON); empty means the default plans")
	fs.StringVar(&f.listen, "listen", "127.0.0.1:8080", "`ADDR` to listen on (port 0 picks a free one)")
	fs.StringVar(&f.origin, "origin", "", "origin `URL` admitted requests are proxied to")
	fs.BoolVar(&f.demo, "demo-origin", false, "start a small built-in origin on 127.0.0.1 and proxy to it")
	fs.StringVar(&f.store, "store", "memory", "counter store: memory or dynamodb")
	fs.StringVar(&f.table, "table", "", "DynamoDB `TABLE` (--store dynamodb)")
	fs.StringVar(&f.endpoint, "endpoint", "", "DynamoDB endpoint `URL`, e.g. http://127.0.0.1:4567 for dynalite")
	fs.BoolVar(&f.createTable, "create-table", false, "create the DynamoDB table if it does not exist")
	fs.IntVar(&f.maxIdentities, "max-identities", defaultMaxIdentities, "most identities the memory store holds (`N`; 0: no bound); a new one beyond is a store error, answered per on_store_error")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil // -h or --help: the flag set printed the flags
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	fs.Visit(func(fl *flag.Flag) { f.maxIdentitiesSet = f.maxIdentitiesSet || fl.Name == "max-identities" })
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	if f.origin != "" && f.demo {
		return fmt.Errorf("%w: --origin and --demo-origin exclude each other", errUsage)
	}
	cfg, err := loadConfig(f.config)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	store, err := openStore(ctx, f, cfg)
	if err != nil {
		return err
	}

	var servers []*http.Server
	var next http.Handler
	originURL := f.origin
	if f.demo {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return fmt.Errorf("demo origin: %w", err)
		}
		demo := &http.Server{Handler: demoOrigin(), ReadHeaderTimeout: 10 * time.Second}
		servers = append(servers, demo)
		go func() { _ = demo.Serve(ln) }()
		originURL = "http://" + ln.Addr().String()
		fmt.Fprintf(stdout, "slidegate: demo origin on %s\n", originURL)
	}
	if originURL != "" {
		u, err := url.Parse(originURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%w: --origin %q: must be an http or https URL", errUsage, originURL)
		}
		next = httpapi.NewProxy(u, log, cfg.Identity.Prefixes())
	}
	h, err := httpapi.New(httpapi.Options{Config: cfg, Store: store, Next: next, Logger: log})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	servers = append([]*http.Server{srv}, servers...)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintf(stdout, "slidegate: listening on http://%s (store %s, origin %s)\n", ln.Addr(), f.store, orNone(originURL))

	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	fmt.Fprintln(stdout, "slidegate: shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	var errs []error
	// The front first, so in-flight requests can still reach the origin.
	for _, s := range servers {
		if err := s.Shutdown(sctx); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	fmt.Fprintln(stdout, "slidegate: stopped")
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "none: check API only"
	}
	return s
}

// openStore returns the shared counter store: memory, bounded to
// --max-identities, or DynamoDB.
func openStore(ctx context.Context, f serveFlags, cfg *config.Config) (kvstore.Store, error) {
	switch f.store {
	case "memory":
		if f.table != "" || f.endpoint != "" || f.createTable {
			return nil, fmt.Errorf("%w: --table, --endpoint and --create-table need --store dynamodb", errUsage)
		}
		if f.maxIdentities < 0 {
			return nil, fmt.Errorf("%w: --max-identities %d: must be 0 (no bound) or more", errUsage, f.maxIdentities)
		}
		return memstore.NewLimited(f.maxIdentities), nil
	case "dynamodb":
		if f.maxIdentitiesSet {
			return nil, fmt.Errorf("%w: --max-identities needs --store memory", errUsage)
		}
		if f.table == "" {
			return nil, fmt.Errorf("%w: --store dynamodb needs --table", errUsage)
		}
		client, err := dynamostore.NewClient(ctx, f.endpoint)
		if err != nil {
			return nil, err
		}
		if f.createTable {
			if err := dynamostore.CreateTable(ctx, client, f.table); err != nil {
				return nil, err
			}
		}
		return dynamostore.New(client, f.table, dynamostore.MaxPeriod(cfg.LongestWindow()))
	}
	return nil, fmt.Errorf("%w: --store %q: must be memory or dynamodb", errUsage, f.store)
}
