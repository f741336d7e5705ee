package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
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
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/slidegate/slidegate/config"
	"github.com/slidegate/slidegate/httpapi"
	"github.com/slidegate/slidegate/kvstore"
	"github.com/slidegate/slidegate/kvstore/dynamostore"
	"github.com/slidegate/slidegate/kvstore/memstore"
)

const usage = `usage:
  slidegate serve [--config FILE] [--listen ADDR] [--origin URL | --demo-origin]
                  [--store memory|dynamodb --table T [--endpoint URL] [--create-table]]
                  [--max-identities N] [--origin-timeout D] [--client-timeout D]
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
	return runReloading(ctx, args, stdout, stderr, nil)
}

// runReloading is run with serve re-reading its --config at each receive
// from reload (main's SIGHUP); a nil reload never reloads.
func runReloading(ctx context.Context, args []string, stdout, stderr io.Writer, reload <-chan struct{}) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: no command\n%s", errUsage, usage)
	}
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:], stdout, stderr, reload)
	case "check-config", "hash-key":
		rest := args[1:]
		if len(rest) == 1 && isHelp(rest[0]) {
			// Not a FILE or a KEY: hash-key --help printed the hash of
			// "--help", and check-config -h said there was no file -h.
			fmt.Fprintln(stdout, usage)
			return nil
		}
		if len(rest) > 0 && rest[0] == "--" {
			// hash-key -- -h hashes the key "-h"; "--" alone ends the
			// options and gives no KEY (hash-key -- $KEY, KEY unset,
			// printed the hash of "--").
			rest = rest[1:]
		}
		if args[0] == "check-config" {
			return checkConfig(rest, stdout, stderr)
		}
		return hashKey(rest, os.Stdin, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprintln(stdout, usage)
		return nil
	}
	return fmt.Errorf("%w: unknown command %q\n%s", errUsage, args[0], usage)
}

// isHelp reports whether arg asks for help as the flag package takes it.
func isHelp(arg string) bool {
	return arg == "-h" || arg == "-help" || arg == "--help" || arg == "--h"
}

// The bounds of the variables the Lambda and the Worker read the
// configuration from. A Lambda's environment holds 4 KB in all, measured
// as one JSON object of its names and values (the "String measured" of
// its error), where each quote of the configuration is escaped again
// (lambdaEnvSize); a Worker's variable 5 KB (Cloudflare's limits page),
// the configuration as one line of JSON.
const (
	maxLambdaEnv    = 4096
	maxWorkerConfig = 5 << 10
)

// lambdaEnvSize is the size the Lambda measures its environment at with
// config, one line of JSON, as SLIDEGATE_CONFIG, and TABLE_NAME and
// ORIGIN_URL empty (the least they take).
func lambdaEnvSize(config string) int {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	_ = e.Encode(map[string]string{"SLIDEGATE_CONFIG": config, "TABLE_NAME": "", "ORIGIN_URL": ""})
	return b.Len() - 1 // Encode's newline
}

func checkConfig(args []string, stdout, stderr io.Writer) error {
	if len(args) != 1 {
		return fmt.Errorf("%w: check-config takes one FILE\n%s", errUsage, usage)
	}
	if args[0] == "" {
		// loadConfig takes "" for the defaults, which would pass for a
		// valid file (check-config "$UNSET").
		return fmt.Errorf("%w: check-config FILE: empty name", errUsage)
	}
	cfg, data, err := readConfig(args[0])
	if err != nil {
		return err
	}
	plans := make([]string, 0, len(cfg.Plans))
	for name := range cfg.Plans {
		plans = append(plans, name)
	}
	slices.Sort(plans)
	_, err = fmt.Fprintf(stdout, "%s: ok: plans %s (default %s), %d API keys, %d IP limits, %d route costs, on_store_error %s, store_timeout %s, shadow %t\n",
		args[0], strings.Join(plans, ", "), cfg.DefaultPlan, len(cfg.APIKeys), len(cfg.IPLimits), len(cfg.Costs), cfg.OnStoreError, cfg.StoreTimeout, cfg.Shadow)
	if err == nil {
		warnCarrierSize(stderr, args[0], data)
	}
	return written(err)
}

// warnCarrierSize warns when the configuration data, valid, is too large
// as one line of JSON for the Lambda's environment or the Worker's
// variable, or as it is for a Worker's secret put from the file: serve
// takes it, but the deployment there fails (the stack update is rolled
// back; wrangler deploy is refused), which check-config, the check the
// docs advise before a deployment, said nothing of.
func warnCarrierSize(stderr io.Writer, path string, data []byte) {
	var line bytes.Buffer
	if json.Compact(&line, bytes.TrimPrefix(data, []byte("\ufeff"))) != nil {
		return
	}
	var where string
	switch env := lambdaEnvSize(line.String()); {
	case line.Len() > maxWorkerConfig:
		where = "a Lambda's environment (4 KB for all its variables) and a Worker's variable (5 KB)"
	case env > maxLambdaEnv:
		where = fmt.Sprintf("a Lambda's environment (4 KB for all its variables, names and values, TABLE_NAME's and ORIGIN_URL's too, %d in a Lambda's measure, which escapes each quote again)", env)
	}
	if where != "" {
		fmt.Fprintf(stderr, "slidegate: warning: %s is %d bytes as one line of JSON, more than %s hold: serve takes it, but deploying it there fails. List in api_keys only the keys whose plan is not default_plan (with unlisted_keys \"key\", any other key is its own client on default_plan already), or split the keys among deployments\n", path, line.Len(), where)
	}
	// A Worker's secret put from the file (docs/edge.md: wrangler secret
	// put SLIDEGATE_CONFIG < FILE, or a secrets file read from it) holds
	// the file as it is, its white space too: a file written over several
	// lines can pass 5 KB where its one line fits.
	if line.Len() <= maxWorkerConfig && len(data) > maxWorkerConfig {
		fmt.Fprintf(stderr, "slidegate: warning: %s is %d bytes as it is, more than a Worker's variable (5 KB) holds: put as a secret from the file (wrangler secret put SLIDEGATE_CONFIG < %s), it is refused; as one line of JSON (%d bytes) it fits: put that (jq -c . %s)\n", path, len(data), path, line.Len(), path)
	}
}

// written is the error of a command's output, its whole point: with
// SIGPIPE ignored, an output nobody reads fails the write instead of
// ending the process, and the command must fail too (it exited 0).
func written(err error) error {
	if err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}

// loadConfig reads the configuration file at path, or returns the
// defaults for no path. A blank file (empty, or white space and a byte
// order mark alone), which Parse takes for the empty document and so the
// defaults, is refused: named with --config, it is more likely a file
// truncated to be written again, a newline alone (echo > config.json) or a
// pipe read already than a wish for the defaults, and it would make every
// keyed client a default plan's without a word. Leaving --config out
// gives the defaults.
func loadConfig(path string) (*config.Config, error) {
	cfg, _, err := readConfig(path)
	return cfg, err
}

// readConfig is loadConfig, and returns the file's text too.
func readConfig(path string) (cfg *config.Config, text []byte, err error) {
	if path == "" {
		return config.Default(), nil, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("read config: %w", err)
	}
	defer f.Close()
	// Not os.ReadFile: a file far larger than a configuration may be (a log
	// named by mistake, /dev/zero, a pipe) was read whole before Parse
	// refused it, or for ever. Read stops one byte past MaxSize, and so
	// does the copy.
	var data bytes.Buffer
	cfg, err = config.Read(io.TeeReader(f, &data))
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	if config.Blank(data.Bytes()) {
		return nil, nil, fmt.Errorf("%s: empty file (white space at most), which would be the built-in defaults: leave --config out for them", path)
	}
	return cfg, data.Bytes(), nil
}

// hashKey prints the api_keys hash of a key as the pre-filter and the
// check API count it: without the white space around it, with a warning
// on stderr. A key with a control character, which no header can carry
// (servers refuse it), is hashed all the same, as the check API may send
// it, with a warning.
func hashKey(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) != 1 {
		return fmt.Errorf("%w: hash-key takes one KEY\n%s", errUsage, usage)
	}
	key := args[0]
	if key == "-" {
		// The key, a CR and a LF at most: "hash-key - </dev/zero" read
		// until the process died of memory.
		line, err := bufio.NewReader(io.LimitReader(stdin, maxKeyBytes+2)).ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("read key: %w", err)
		}
		key = strings.TrimRight(line, "\r\n")
		if len(key) > maxKeyBytes {
			return fmt.Errorf("read key: longer than %d bytes, more than a request's header may hold", maxKeyBytes)
		}
	}
	if key == "" {
		return fmt.Errorf("%w: empty KEY", errUsage)
	}
	// White space around a key is not the key's: the pre-filter drops it
	// on every platform and so does the check API (HTTP's, Unicode's, a
	// byte order mark and a Latin-1 no-break space: httpapi.TrimKey).
	// Hashed with it, the entry matched no request.
	if trimmed := httpapi.TrimKey(key); trimmed != key {
		if trimmed == "" {
			return fmt.Errorf("%w: KEY is only white space, which is no key", errUsage)
		}
		key = trimmed
		fmt.Fprintln(stderr, "slidegate: warning: the white space around KEY is not the key's (every platform and the check API drop it): hashed without it")
	}
	// The check API takes JSON, which is UTF-8, and a Worker reads the
	// bytes of a header that are not UTF-8 as U+FFFD: such a key (a key
	// file saved as UTF-16 or in Latin-1) matches neither.
	switch valid, control := utf8.ValidString(key), strings.ContainsFunc(key, isControl); {
	case !valid && control:
		fmt.Fprintln(stderr, "slidegate: warning: KEY is not UTF-8 and holds a control character (a key file saved as UTF-16?): no request can carry this key")
	case !valid:
		fmt.Fprintln(stderr, "slidegate: warning: KEY is not UTF-8 (a key file saved as UTF-16 or in Latin-1?): the check API cannot send this key, and a Worker reads it otherwise (U+FFFD for each such byte)")
	case control:
		fmt.Fprintln(stderr, "slidegate: warning: KEY holds a control character, which a header value cannot: only the check API can send this key")
	}
	_, err := fmt.Fprintln(stdout, httpapi.HashKey(key))
	return written(err)
}

// maxHeaderBytes is serve's http.Server MaxHeaderBytes.
const maxHeaderBytes = 64 << 10

// maxKeyBytes bounds a key that hash-key reads from standard input: the
// most a request's header may hold in serve, request line included, so
// more than any key header can carry. net/http's server reads 4 KiB past
// MaxHeaderBytes before its 431 (a header of 69,632 bytes with its request
// line passes), and a key of up to about 68 KiB reaches the pre-filter:
// bounded by MaxHeaderBytes alone, hash-key refused keys serve counts
// (TestHashKeyTakesWhatServeTakes).
const maxKeyBytes = maxHeaderBytes + 4<<10

// isControl reports whether r is a control character a header value
// cannot hold (HTAB it can).
func isControl(r rune) bool {
	return r < ' ' && r != '\t' || r == 0x7f
}

type serveFlags struct {
	config, listen, origin string
	demo                   bool
	store, table, endpoint string
	createTable            bool
	maxIdentities          int
	originTimeout          time.Duration
	clientTimeout          time.Duration
}

// defaultOriginTimeout bounds the wait for an origin's answer to begin,
// as nginx's proxy_read_timeout does; a streamed answer may take longer
// once its header has come.
const defaultOriginTimeout = time.Minute

// defaultMaxIdentities bounds each memory store: about 280 bytes an
// identity under up to four limits, so some 280 MB of live heap when full.
const defaultMaxIdentities = 1_000_000

// evictionReport is how often serve logs the identities its memory stores
// evicted, when they did.
const evictionReport = time.Minute

func serve(ctx context.Context, args []string, stdout, stderr io.Writer, reload <-chan struct{}) error {
	var f serveFlags
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.config, "config", "", "configuration `FILE` (JSON), read again on SIGHUP; left out, the default plans")
	fs.StringVar(&f.listen, "listen", "127.0.0.1:8080", "`ADDR` to listen on (port 0 picks a free one)")
	fs.StringVar(&f.origin, "origin", "", "origin `URL` admitted requests are proxied to")
	fs.BoolVar(&f.demo, "demo-origin", false, "start a small built-in origin on 127.0.0.1 and proxy to it")
	fs.StringVar(&f.store, "store", "memory", "counter store: memory or dynamodb")
	fs.StringVar(&f.table, "table", "", "DynamoDB `TABLE` (--store dynamodb)")
	fs.StringVar(&f.endpoint, "endpoint", "", "DynamoDB endpoint `URL`, e.g. http://127.0.0.1:4567 for dynalite")
	fs.BoolVar(&f.createTable, "create-table", false, "create the DynamoDB table if it does not exist")
	fs.DurationVar(&f.originTimeout, "origin-timeout", defaultOriginTimeout, "longest wait on the origin (`D`; 0: none but the transport's 30 s to connect and 10 s for TLS): to connect, to take the next part of a request, for its answer to begin; beyond, the client gets a 504")
	fs.DurationVar(&f.clientTimeout, "client-timeout", defaultClientTimeout, "longest silence of a client within a request (`D`; 0: no bound): between parts of its body, or while it takes none of the answer; beyond, the connection is closed")
	fs.IntVar(&f.maxIdentities, "max-identities", defaultMaxIdentities, "most identities each memory store holds (`N`; 0: no bound); beyond, a new one evicts the one that counts least per unit of time")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil // -h or --help: the flag set printed the flags
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if f.maxIdentities < 0 {
		return fmt.Errorf("%w: --max-identities %d: must be 0 (no bound) or more", errUsage, f.maxIdentities)
	}
	if f.originTimeout < 0 {
		return fmt.Errorf("%w: --origin-timeout %s: must be 0 (no bound) or more", errUsage, f.originTimeout)
	}
	if f.clientTimeout < 0 {
		return fmt.Errorf("%w: --client-timeout %s: must be 0 (no bound) or more", errUsage, f.clientTimeout)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	// A flag given an empty value is most likely an unset variable
	// (--config "$CONFIG"): taken as the default, it served the default
	// plans, listened on every interface (--listen ""), or went to AWS
	// instead of a local endpoint (--endpoint "").
	var empty []string
	fs.Visit(func(fl *flag.Flag) {
		if fl.Value.String() == "" {
			empty = append(empty, "--"+fl.Name)
		}
	})
	if len(empty) > 0 {
		return fmt.Errorf("%w: %s: empty value (leave a flag out for its default)", errUsage, strings.Join(empty, ", "))
	}
	if f.origin != "" && f.demo {
		return fmt.Errorf("%w: --origin and --demo-origin exclude each other", errUsage)
	}
	var origin *url.URL
	if f.origin != "" {
		// Before anything starts (a DynamoDB table, the demo origin).
		var err error
		if origin, err = parseOrigin(f.origin); err != nil {
			return err
		}
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
	// Local-scope limits keep their counters in memory whatever the store.
	local := memstore.NewLimited(f.maxIdentities)
	mems := []*memstore.Store{local}
	if m, ok := store.(*memstore.Store); ok {
		mems = append(mems, m)
	}
	// Reports run until serve returns, after the drain: its evictions count.
	rctx, stopReports := context.WithCancel(context.WithoutCancel(ctx))
	reported := make(chan struct{})
	go func() {
		defer close(reported)
		reportEvictions(rctx, log, evictionReport, mems)
	}()
	defer func() { stopReports(); <-reported }() // its last line before serve returns

	var servers []*http.Server
	if f.demo {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return fmt.Errorf("demo origin: %w", err)
		}
		demo := &http.Server{Handler: demoOrigin(), ReadHeaderTimeout: 10 * time.Second}
		servers = append(servers, demo)
		go func() { _ = demo.Serve(ln) }()
		origin = &url.URL{Scheme: "http", Host: ln.Addr().String()}
		fmt.Fprintf(stdout, "slidegate: demo origin on %s\n", origin)
	}
	b := &builder{origin: origin, log: log, store: store, local: local, originTimeout: f.originTimeout, clientTimeout: f.clientTimeout}
	first, err := b.build(cfg)
	if err != nil {
		return err
	}
	var cur current
	cur.p.Store(first)
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	// Reloads run one at a time, off the loop below: a --config that
	// blocks its reader (a FIFO with no writer) holds the reload, not the
	// shutdown. serve does not wait for a reload still reading at its end.
	lctx, stopReloads := context.WithCancel(ctx)
	defer stopReloads()
	go func() {
		for {
			select {
			case <-lctx.Done():
				return
			case <-reload:
				reloadConfig(lctx, log, f.config, b, &cur)
			}
		}
	}()
	srv := frontServer(&cur, log, f.clientTimeout, b.clock())
	servers = append([]*http.Server{srv}, servers...)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintf(stdout, "slidegate: listening on http://%s (store %s, origin %s)\n", ln.Addr(), f.store, orNone(origin))

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

// frontServer is serve's server for its clients, serving h and logging
// its own errors to log at WARN. d (--client-timeout; <= 0: no bound)
// bounds, from now(), the writes of the answers the server writes itself
// (see answersBounded).
func frontServer(h http.Handler, log *slog.Logger, d time.Duration, now func() time.Time) *http.Server {
	const idle = 2 * time.Minute
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       idle,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		ConnState:         answersBounded(d, idle, now),
	}
}

// builder builds serve's handler from a configuration, at start and at
// each reload, on the same stores, so a reload keeps every count.
type builder struct {
	origin        *url.URL // nil: the check API only
	log           *slog.Logger
	store         kvstore.Store
	local         *memstore.Store
	originTimeout time.Duration
	clientTimeout time.Duration
	// now is the clock of the client's deadlines (--client-timeout); nil
	// means time.Now. Tests replace it to decide when a client's silence
	// has passed the bound.
	now func() time.Time
	// transport is the first proxy's, bounded by boundOrigin: the proxies
	// of later configurations take it over, so a reload keeps the
	// connections to the origin. Set by the first build; builds are
	// serialized.
	transport http.RoundTripper
}

// served is a handler built from one configuration.
type served struct {
	http.Handler                  // api, as the server serves it
	api          *httpapi.Handler // for the newest time it has seen
}

// build returns the handler serving cfg: the pre-filter in front of a
// proxy to the origin, whose trusted proxies are cfg's.
func (b *builder) build(cfg *config.Config) (*served, error) {
	var next http.Handler
	if b.origin != nil {
		p := httpapi.NewProxy(b.origin, b.log, cfg.Identity.Prefixes())
		if b.transport == nil {
			// A hung origin would hold its clients for as long as they wait.
			boundOrigin(p, b.originTimeout)
			b.transport = p.Transport
		} else {
			p.Transport = b.transport
		}
		next = boundWrites(fullDuplex(p), b.clientTimeout, b.clock())
	}
	h, err := httpapi.New(httpapi.Options{Config: cfg, Store: b.store, Local: b.local, Next: next, Logger: b.log})
	if err != nil {
		return nil, err
	}
	return &served{Handler: boundSilence(h, b.clientTimeout, b.clock()), api: h}, nil
}

// clock returns b.now, or time.Now when it is nil.
func (b *builder) clock() func() time.Time {
	if b.now == nil {
		return time.Now
	}
	return b.now
}

// current is serve's handler: each request is served whole by the
// configuration in force when it came, and a reload swaps it for the
// requests that come after, without a lock on their way.
type current struct{ p atomic.Pointer[served] }

// ServeHTTP serves r by the configuration in force, but for HTTP/2's
// connection preface over cleartext ("PRI * HTTP/2.0": h2c with prior
// knowledge, such as grpc-go's insecure clients send), which is answered
// 505, uncounted: serve speaks HTTP/1 to its clients. net/http's server
// hands the preface to the handler as a request (for one that would take
// the connection over, and closes the connection after the answer); the
// pre-filter counted it against the client's address and the proxy sent
// the origin a "PRI /*" nobody asked for.
func (c *current) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == "PRI" && r.ProtoMajor == 2 {
		httpapi.WriteProblem(w, http.StatusHTTPVersionNotSupported, http.StatusText(http.StatusHTTPVersionNotSupported),
			"HTTP/2 without TLS (prior knowledge) is not served: use HTTP/1.1")
		return
	}
	c.p.Load().ServeHTTP(w, r)
}

// reloadConfig reads the configuration file path again and, when it is
// valid, serves the requests to come with it, logging the outcome either
// way; an invalid one leaves the configuration in force. Counters are
// keyed by identity, rule name and period: a limit changed under the
// same name and window applies to what is already counted, a renamed
// rule or another window starts from zero. The store is the one serve
// opened (--store is a flag, not configuration); a DynamoDB store's TTL
// floor follows a longer window, never a shorter one.
func reloadConfig(ctx context.Context, log *slog.Logger, path string, b *builder, cur *current) {
	if path == "" {
		log.WarnContext(ctx, "configuration not reloaded: serve runs on the built-in defaults (no --config), nothing to reload")
		return
	}
	cfg, err := loadConfig(path) // a blank file too: see loadConfig
	var next *served
	if err == nil {
		next, err = b.build(cfg)
	}
	if err != nil {
		log.ErrorContext(ctx, "configuration not reloaded: the one in force stays", "config", path, "error", err.Error())
		return
	}
	if ds, ok := b.store.(*dynamostore.Store); ok {
		// Opened for the longest window at start: a longer one now would
		// have its counters expire early, where a write names only the
		// shorter rules of an identity.
		ds.RaiseMaxPeriod(cfg.LongestWindow())
	}
	// A clock stepping back must not reopen buckets already counted past
	// (limiter.Limiter.Seen).
	next.api.Seen(cur.p.Load().api.Latest())
	cur.p.Store(next)
	log.InfoContext(ctx, "configuration reloaded", "config", path, "plans", len(cfg.Plans), "api_keys", len(cfg.APIKeys),
		"ip_limits", len(cfg.IPLimits), "costs", len(cfg.Costs))
}

// reportEvictions logs, every interval and when ctx ends, how many
// identities the memory stores evicted since the last report, when any
// were: their counts are lost, so a client that comes back starts afresh.
func reportEvictions(ctx context.Context, log *slog.Logger, every time.Duration, mems []*memstore.Store) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	var last uint64
	for {
		select {
		case <-ctx.Done():
			logEvictions(log, mems, last)
			return
		case <-tick.C:
			last = logEvictions(log, mems, last)
		}
	}
}

// logEvictions logs a WARN line when the stores have evicted identities
// since last (their total then) and returns the total now.
func logEvictions(log *slog.Logger, mems []*memstore.Store, last uint64) uint64 {
	var n uint64
	for _, m := range mems {
		n += m.Evicted()
	}
	if n > last {
		log.Warn("memory store full: identities evicted, their counts lost; raise --max-identities if they were clients", "evicted", n-last, "evicted_total", n)
	}
	return n
}

// fullDuplex lets the origin's answer go out while the client is still
// sending its body (a streamed upload with a streamed answer). Without it
// Go's HTTP/1 server reads the rest of the body before the answer's
// header, and a client that waits for the answer before it sends more
// waits for ever.
//
// An answer that starts before the request's body was read to its end
// (the origin was down, or answered first) closes the connection. In full
// duplex Go's server reads the rest of such a body after the handler, and
// then panicked on its next read of a connection kept alive ("invalid
// concurrent Body.Read call", golang/go#68560): a stack in the log and the
// connection cut, for every such request. Reading the rest in the handler
// instead would wait for a client that waits for the answer first (one
// that sent Expect: 100-continue, or streams). Go's server closes the
// connection in the same case without full duplex when more than 256 KiB
// are left, or for Expect: 100-continue.
func fullDuplex(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).EnableFullDuplex() // HTTP/2 is full duplex already
		if r.ProtoMajor != 1 || r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		b := &eofBody{ReadCloser: r.Body}
		r = r.WithContext(r.Context()) // a copy, for its own Body
		r.Body = b
		next.ServeHTTP(&closeUnread{ResponseWriter: w, body: b}, r)
	})
}

// eofBody records whether a request body was read to its end.
type eofBody struct {
	io.ReadCloser
	eof atomic.Bool // read by the handler, set by the transport's goroutine
}

func (b *eofBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.eof.Store(true)
	}
	return n, err
}

// closeUnread asks the server to close the connection after an answer
// that starts before its request's body was read to the end (fullDuplex).
type closeUnread struct {
	http.ResponseWriter
	body  *eofBody
	wrote bool
}

func (w *closeUnread) WriteHeader(code int) {
	if code >= 200 && !w.wrote {
		w.wrote = true
		if !w.body.eof.Load() {
			w.Header().Set("Connection", "close")
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *closeUnread) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the server's writer (Flush,
// Hijack, deadlines).
func (w *closeUnread) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// orNone shows the origin in the start line, which goes to logs: without
// its query, which may hold the origin's token (an Azure Function's
// ?code=), as errors about the URL show it.
func orNone(u *url.URL) string {
	if u == nil {
		return "none: check API only"
	}
	v := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return v.String() + "?…"
	}
	return v.String()
}

// parseOrigin parses --origin: an http or https URL with a host, and a
// port, if any, from 1 to 65535 (a wrong one made every request a 502).
// User info is refused: the proxy would not send it, and it would be
// printed.
func parseOrigin(s string) (*url.URL, error) {
	u, err := httpapi.ParseOrigin(s)
	if err != nil {
		return nil, fmt.Errorf("%w: --origin %w", errUsage, err)
	}
	return u, nil
}

// openStore returns the shared counter store: memory, bounded to
// --max-identities, or DynamoDB.
func openStore(ctx context.Context, f serveFlags, cfg *config.Config) (kvstore.Store, error) {
	switch f.store {
	case "memory":
		if f.table != "" || f.endpoint != "" || f.createTable {
			return nil, fmt.Errorf("%w: --table, --endpoint and --create-table need --store dynamodb", errUsage)
		}
		return memstore.NewLimited(f.maxIdentities), nil
	case "dynamodb":
		if f.table == "" {
			return nil, fmt.Errorf("%w: --store dynamodb needs --table", errUsage)
		}
		client, err := dynamostore.NewClient(ctx, f.endpoint)
		if err != nil {
			return nil, err
		}
		if f.createTable {
			if err := createTable(ctx, client, f.table); err != nil {
				return nil, err
			}
		}
		if err := checkTable(ctx, client, f.table); err != nil {
			return nil, err
		}
		return dynamostore.New(client, f.table, dynamostore.MaxPeriod(cfg.LongestWindow()))
	}
	return nil, fmt.Errorf("%w: --store %q: must be memory or dynamodb", errUsage, f.store)
}

// tableCheckTimeout bounds serve's first read of its DynamoDB table.
const tableCheckTimeout = 10 * time.Second

// tableCreateTimeout bounds serve --create-table: creating the table,
// waiting until it is active (seconds on AWS) and turning its TTL on. A
// variable, for the tests.
var tableCreateTimeout = 2 * time.Minute

// createTable creates table within tableCreateTimeout. Unbounded, an
// endpoint that takes the connection and never answers (a frozen
// dynalite, another program's port) held serve at start for ever, without
// a word, where the table check gives up after tableCheckTimeout.
func createTable(ctx context.Context, client dynamostore.TableAPI, table string) error {
	cctx, cancel := context.WithTimeout(ctx, tableCreateTimeout)
	defer cancel()
	err := dynamostore.CreateTable(cctx, client, table)
	if err != nil && ctx.Err() == nil && cctx.Err() != nil {
		return fmt.Errorf("--create-table: table %q not ready within %s: %w", table, tableCreateTimeout, err)
	}
	return err
}

// checkTable reads a key no identity has, so that a table serve cannot use
// (a mistyped --table, no region, no credentials) stops it at start: it
// started, and every request met a store error, answered per
// on_store_error (under "allow", let through unlimited).
func checkTable(ctx context.Context, client dynamostore.API, table string) error {
	ctx, cancel := context.WithTimeout(ctx, tableCheckTimeout)
	defer cancel()
	err := dynamostore.Probe(ctx, client, table)
	var missing *types.ResourceNotFoundException
	var api smithy.APIError
	switch {
	case errors.As(err, &missing):
		return fmt.Errorf("--table %q: no such table in this region (--create-table creates it): %w", table, err)
	case errors.As(err, &api) && api.ErrorCode() == "ValidationException" && strings.Contains(api.ErrorMessage(), "key element does not match the schema"):
		// A table made by hand (a key named "pk", a number key, a sort
		// key): DynamoDB's message names no key, and --create-table
		// leaves a table it finds as it is, so neither said what to do.
		return fmt.Errorf("--table %q: its key is not slidegate's, a string partition key %q and no sort key (create another table, or give --create-table a new name): %w", table, dynamostore.KeyAttribute, err)
	case err != nil:
		return fmt.Errorf("--table %q: cannot read it: %w", table, err)
	}
	return nil
}
