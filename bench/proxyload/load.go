package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/slidegate/slidegate/config"
	"github.com/slidegate/slidegate/httpapi"
)

type options struct {
	conc, rounds, maxReq, keys int
	phase                      time.Duration
	// aa puts a second bare proxy where slidegate would be: an A/A run
	// that shows how far two identical front ends differ on this machine,
	// the noise floor of every ratio.
	aa bool
	// variant splits slidegate's cost: "" (all of it), "headers" (the
	// proxy with slidegate's five rate-limit headers, fixed, and no
	// decision), "decision" (the whole decision, headers removed before
	// the proxy writes the response).
	variant string
	// only, with -serve, starts one front end ("bare" or "slidegate")
	// instead of both, so that a process measured as the bare proxy holds
	// no filled memory store for its collector to mark (pair.sh
	// SEPARATE=1).
	only string
	// profileDir, when set, receives a CPU profile of every measured
	// phase, named <front end>.<round>.<requests>.pprof, so that the two
	// front ends compare per request with the GC and the runtime included.
	profileDir string
}

// stats are the measurements of one front end over all its phases.
type stats struct {
	lat      []time.Duration
	requests int
	errors   int
	non200   int
	elapsed  time.Duration
	cpu      time.Duration // process CPU time (user+system) during the phases
}

// cpuPerReq is the CPU time the whole process (load generator, front end,
// origin) spent per request: unlike latency it hardly moves when other
// processes compete for the cores.
func (s *stats) cpuPerReq() time.Duration {
	if s.requests == 0 {
		return 0
	}
	return s.cpu / time.Duration(s.requests)
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func (s *stats) rps() float64 { return float64(s.requests) / s.elapsed.Seconds() }

func (s *stats) pct(p float64) time.Duration {
	if len(s.lat) == 0 {
		return 0
	}
	return s.lat[min(int(p*float64(len(s.lat))), len(s.lat)-1)]
}

type report struct {
	o              options
	bare, filtered stats
	// per round, adjacent in time: slidegate's p50 and throughput over the
	// bare proxy's. Their medians resist a noisy machine better than the
	// pooled numbers.
	p50Ratio, rpsRatio, cpuRatio []float64
	limited                      int // 429s from slidegate (should be 0: limits are set high)
}

// loadClient is the load's HTTP client: conc kept-alive connections to
// each front end, responses as sent, and a request that hangs for a
// minute fails rather than holding the run.
func loadClient(conc int) *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			MaxIdleConns:        2 * conc,
			MaxIdleConnsPerHost: conc,
			DisableCompression:  true,
		},
		Timeout: time.Minute,
	}
}

// loadKeys returns the API keys the load sends: bench-key-0 ... (wrk.lua
// sends the same 1000).
func loadKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "bench-key-" + strconv.Itoa(i)
	}
	return keys
}

// benchConfig is the default configuration (free, pro, enterprise) with
// every load key on the enterprise plan (6,000 a minute, 1,000,000 a day:
// 1,000 keys admit up to 100,000 requests a second, more than this
// machine serves) and a local per-IP limit of 1,000,000 a second (all load
// comes from 127.0.0.1). Every request runs the whole decision (two
// limiter calls, SHA-256, headers of realistic length) and is admitted.
func benchConfig(keys []string) (*config.Config, error) {
	c := config.Default()
	c.IPLimits = []config.Limit{{Name: "ip-second", Limit: 1_000_000, Window: "1s", Scope: config.ScopeLocal}}
	c.APIKeys = map[string]string{}
	for _, k := range keys {
		c.APIKeys[httpapi.HashKey(k)] = "enterprise"
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// listen serves h on a free loopback port. The serving goroutine carries
// the profiler label server=name, which every connection goroutine (and
// the proxy's transport goroutines they start) inherits: a CPU profile of
// the process splits by front end (pprof -tagfocus server=slidegate)
// without any work per request.
func listen(name string, h http.Handler) (*http.Server, string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go pprof.Do(context.Background(), pprof.Labels("server", name), func(context.Context) { _ = srv.Serve(ln) })
	return srv, "http://" + ln.Addr().String(), nil
}

// fronts are the servers under test: a trivial origin, a bare reverse
// proxy to it, and slidegate with the same reverse proxy.
type fronts struct {
	servers                []*http.Server
	origin, bare, filtered string
	keys                   []string
}

func (f *fronts) Close() {
	for _, s := range f.servers {
		_ = s.Close()
	}
}

func setup(o options) (*fronts, error) {
	if o.only != "" && o.only != "bare" && o.only != "slidegate" {
		return nil, fmt.Errorf("proxyload: -only %q: want bare or slidegate", o.only)
	}
	f := &fronts{}
	body := []byte("ok\n")
	origin, originURL, err := listen("origin", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write(body)
	}))
	if err != nil {
		return nil, err
	}
	f.servers = append(f.servers, origin)
	f.origin = originURL
	target, _ := url.Parse(originURL)
	quiet := slog.New(slog.NewJSONHandler(io.Discard, nil))

	if o.only != "slidegate" {
		bare, bareURL, err := listen("bare", httpapi.NewProxy(target, quiet, nil))
		if err != nil {
			f.Close()
			return nil, err
		}
		f.servers = append(f.servers, bare)
		f.bare = bareURL
	}
	if o.only == "bare" {
		return f, nil
	}

	keys := loadKeys(o.keys)
	f.keys = keys
	cfg, err := benchConfig(keys)
	if err != nil {
		f.Close()
		return nil, err
	}
	var next http.Handler = httpapi.NewProxy(target, quiet, nil)
	if o.variant == "decision" {
		px := next
		next = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			clear(w.Header())
			px.ServeHTTP(w, r)
		})
	}
	h, err := httpapi.New(httpapi.Options{Config: cfg, Next: next, Logger: quiet})
	if err != nil {
		f.Close()
		return nil, err
	}
	var front http.Handler = h
	switch {
	case o.aa:
		front = httpapi.NewProxy(target, quiet, nil)
	case o.variant == "headers":
		front = staticHeaders(httpapi.NewProxy(target, quiet, nil))
	case o.variant != "" && o.variant != "decision":
		f.Close()
		return nil, fmt.Errorf("proxyload: unknown variant %q", o.variant)
	}
	filtered, filteredURL, err := listen("slidegate", front)
	if err != nil {
		f.Close()
		return nil, err
	}
	f.servers = append(f.servers, filtered)
	f.filtered = filteredURL
	return f, nil
}

func measure(ctx context.Context, o options) (*report, error) {
	if o.conc < 1 || o.rounds < 1 || o.phase <= 0 || o.maxReq < 1 {
		return nil, errors.New("proxyload: -c, -rounds, -d and -n must be positive")
	}
	if o.only != "" {
		return nil, errors.New("proxyload: -only goes with -serve")
	}
	f, err := setup(o)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	keys, bareURL, filteredURL := f.keys, f.bare, f.filtered

	rep := &report{o: o}
	client := loadClient(o.conc)
	defer client.CloseIdleConnections()

	// Warm both paths (connections, pools, caches) before measuring.
	warm := o
	warm.phase = min(o.phase, 500*time.Millisecond)
	for _, u := range []string{bareURL, filteredURL} {
		if _, err := phase(ctx, client, u, keys, warm, &stats{}); err != nil {
			return nil, err
		}
	}
	for r := range o.rounds {
		order := []struct {
			url string
			s   *stats
		}{{bareURL, &rep.bare}, {filteredURL, &rep.filtered}}
		if r%2 == 1 {
			order[0], order[1] = order[1], order[0]
		}
		var round [2]stats // bare, filtered
		for _, p := range order {
			runtime.GC()
			rs := &round[0]
			if p.s == &rep.filtered {
				rs = &round[1]
			}
			stop, err := phaseProfile(o.profileDir, p.s == &rep.filtered, r)
			if err != nil {
				return nil, err
			}
			c0 := cpuTime()
			n, err := phase(ctx, client, p.url, keys, o, rs)
			rs.cpu = cpuTime() - c0
			if perr := stop(rs.requests); err == nil {
				err = perr
			}
			if err != nil {
				return nil, err
			}
			if p.s == &rep.filtered {
				rep.limited += n
			}
			p.s.lat = append(p.s.lat, rs.lat...)
			p.s.requests += rs.requests
			p.s.errors += rs.errors
			p.s.non200 += rs.non200
			p.s.elapsed += rs.elapsed
			p.s.cpu += rs.cpu
		}
		for i := range round {
			slices.Sort(round[i].lat)
		}
		rep.p50Ratio = append(rep.p50Ratio, float64(round[1].pct(0.5))/float64(round[0].pct(0.5)))
		rep.rpsRatio = append(rep.rpsRatio, round[1].rps()/round[0].rps())
		rep.cpuRatio = append(rep.cpuRatio, float64(round[1].cpuPerReq())/float64(round[0].cpuPerReq()))
	}
	for _, s := range []*stats{&rep.bare, &rep.filtered} {
		slices.Sort(s.lat)
		if s.errors > 0 || s.non200 > 0 {
			return rep, fmt.Errorf("proxyload: %d transport errors, %d non-200 answers", s.errors, s.non200)
		}
	}
	return rep, nil
}

// phaseProfile starts a CPU profile of one phase in dir (nothing when dir
// is empty); the returned function stops it and renames the file to carry
// the phase's request count: <front end>.<round>.<requests>.pprof.
func phaseProfile(dir string, filtered bool, round int) (func(requests int) error, error) {
	if dir == "" {
		return func(int) error { return nil }, nil
	}
	name := "bare"
	if filtered {
		name = "slidegate"
	}
	tmp := filepath.Join(dir, fmt.Sprintf("%s.%d.pprof.tmp", name, round))
	f, err := os.Create(tmp)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("proxyload: -phaseprofile: %w", err)
	}
	return func(requests int) error {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			return err
		}
		return os.Rename(tmp, filepath.Join(dir, fmt.Sprintf("%s.%d.%d.pprof", name, round, requests)))
	}, nil
}

// phase drives one front end with o.conc closed-loop workers for o.phase
// (or o.maxReq requests), adding to s, and returns the 429s it saw. The
// workers carry the profiler label client=<base URL>, and so do the client
// connections they dial: a -cpuprofile splits the generator's own CPU by
// front end.
func phase(ctx context.Context, client *http.Client, base string, keys []string, o options, s *stats) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, o.phase)
	defer cancel()
	var issued, limited atomic.Int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	labels := pprof.Labels("client", base)
	for w := range o.conc {
		wg.Add(1)
		go pprof.Do(ctx, labels, func(ctx context.Context) {
			defer wg.Done()
			lat := make([]time.Duration, 0, 4096)
			var errs, non200 int
			for i := w; ctx.Err() == nil && issued.Add(1) <= int64(o.maxReq); i += o.conc {
				req, _ := http.NewRequest(http.MethodGet, base+"/v1/items", nil)
				if len(keys) > 0 {
					req.Header.Set("X-API-Key", keys[i%len(keys)])
				}
				t := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					errs++
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				lat = append(lat, time.Since(t))
				switch resp.StatusCode {
				case http.StatusOK:
				case http.StatusTooManyRequests:
					limited.Add(1)
					non200++
				default:
					non200++
				}
			}
			mu.Lock()
			s.lat = append(s.lat, lat...)
			s.requests += len(lat)
			s.errors += errs
			s.non200 += non200
			mu.Unlock()
		})
	}
	wg.Wait()
	s.elapsed += time.Since(start)
	return int(limited.Load()), nil
}

func (r *report) write(w io.Writer) {
	b, f := &r.bare, &r.filtered
	fmt.Fprintf(w, "proxyload: %d rounds × 2 phases × %s, %d connections, %d API keys, GOMAXPROCS %d, %s\n",
		r.o.rounds, r.o.phase, r.o.conc, r.o.keys, runtime.GOMAXPROCS(0), runtime.Version())
	second := "slidegate + same proxy"
	switch {
	case r.o.aa:
		second = "bare proxy #2 (A/A run)"
	case r.o.variant == "headers":
		second = "proxy + fixed headers only"
	case r.o.variant == "decision":
		second = "slidegate, headers dropped"
	}
	fmt.Fprintf(w, "%-28s %10s %10s %10s %12s %10s %12s\n", "front end", "p50", "p90", "p99", "req/s", "requests", "CPU/req")
	for _, row := range []struct {
		name string
		s    *stats
	}{{"bare httputil.ReverseProxy", b}, {second, f}} {
		fmt.Fprintf(w, "%-28s %10s %10s %10s %12.0f %10d %12s\n", row.name,
			round(row.s.pct(0.50)), round(row.s.pct(0.90)), round(row.s.pct(0.99)), row.s.rps(), row.s.requests, row.s.cpuPerReq().Round(100*time.Nanosecond))
	}
	fmt.Fprintf(w, "pooled:            p50 overhead %+.1f %%, p99 overhead %+.1f %%, throughput ratio %.3f\n",
		100*(float64(f.pct(0.50))/float64(b.pct(0.50))-1), 100*(float64(f.pct(0.99))/float64(b.pct(0.99))-1), f.rps()/b.rps())
	fmt.Fprintf(w, "median of %d rounds: p50 overhead %+.1f %%, throughput ratio %.3f (loss %.1f %%)\n",
		len(r.rpsRatio), 100*(median(r.p50Ratio)-1), median(r.rpsRatio), 100*(1-median(r.rpsRatio)))
	fmt.Fprintf(w, "median of %d rounds: CPU per request %+.1f %% (process CPU time / requests: generator + front end + origin)\n",
		len(r.cpuRatio), 100*(median(r.cpuRatio)-1))
	// The per-round ratios, so that several runs can be pooled.
	for _, row := range []struct {
		name string
		xs   []float64
	}{{"p50", r.p50Ratio}, {"req/s", r.rpsRatio}, {"CPU/req", r.cpuRatio}} {
		fmt.Fprintf(w, "per round %s ratio:", row.name)
		for _, x := range row.xs {
			fmt.Fprintf(w, " %.3f", x)
		}
		fmt.Fprintln(w)
	}
}

func round(d time.Duration) string {
	return d.Round(time.Microsecond).String()
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// staticHeaders sets the five rate-limit headers slidegate sends for the
// bench configuration, with values of the same length, and decides
// nothing: what the headers alone cost.
func staticHeaders(next http.Handler) http.Handler {
	vals := map[string][]string{
		"Ratelimit-Policy":      {`"ip-second";q=1000000;w=1, "minute";q=6000;w=60, "day";q=1000000;w=86400`},
		"Ratelimit":             {`"ip-second";r=999990;t=2, "minute";r=5990;t=51, "day";r=999990;t=57591`},
		"X-Ratelimit-Limit":     {"6000"},
		"X-Ratelimit-Remaining": {"5990"},
		"X-Ratelimit-Reset":     {"1800000061"},
	}
	// The slices are shared and never appended to (the proxy only adds
	// the origin's headers, under other names): setting them costs no
	// allocation, so this variant is the bytes on the wire and their
	// serialization alone.
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		for k, v := range vals {
			hd[k] = v
		}
		next.ServeHTTP(w, r)
	})
}
