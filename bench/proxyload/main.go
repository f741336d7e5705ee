// Command proxyload measures what slidegate's HTTP pre-filter costs: it
// starts a trivial origin, a bare httputil.ReverseProxy in front of it, and
// slidegate (httpapi.Handler with the same reverse proxy) in front of it,
// all on 127.0.0.1, then drives both front ends with the same closed-loop
// load in alternating rounds (A B B A ...) so that drift hits both alike,
// and reports p50/p99 latency and throughput with their ratios.
//
//	go run ./proxyload -c 32 -d 3s -rounds 6
//
// The load is bounded: rounds × 2 phases × d, and at most -n requests per
// phase.
package main

import (
	"context"
	_ "expvar" // /debug/vars on the -pprof listener
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	_ "net/http/pprof" // /debug/pprof on the -pprof listener
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
	"time"
)

func main() {
	var o options
	flag.IntVar(&o.conc, "c", 32, "concurrent connections")
	flag.DurationVar(&o.phase, "d", 3*time.Second, "duration of one phase (one front end)")
	flag.IntVar(&o.rounds, "rounds", 6, "rounds; each runs both front ends once")
	flag.IntVar(&o.maxReq, "n", 2_000_000, "at most this many requests per phase")
	flag.IntVar(&o.keys, "keys", 1000, "distinct API keys the load uses (0: anonymous clients)")
	flag.BoolVar(&o.aa, "aa", false, "A/A run: a second bare proxy instead of slidegate (the noise floor)")
	flag.StringVar(&o.variant, "variant", "", "split the cost: headers (fixed headers, no decision) or decision (headers dropped)")
	flag.StringVar(&o.only, "only", "", "with -serve: start only the `FRONT` end bare or slidegate (and the origin)")
	serveFor := flag.Duration("serve", 0, "only start the servers, print their URLs, and stop after this long (for wrk)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to `FILE`")
	flag.StringVar(&o.profileDir, "phaseprofile", "", "write a CPU profile of every measured phase into `DIR` (not with -cpuprofile)")
	pprofAddr := flag.String("pprof", "", "with -serve: serve net/http/pprof and expvar on `ADDR` (127.0.0.1 only), to profile the servers under wrk")
	drive := flag.String("drive", "", "only send -n requests to the front end at `URL` (one that -serve printed) over -c connections, and fail unless every answer is 200")
	flag.Parse()
	if *cpuprofile != "" && o.profileDir != "" {
		fmt.Fprintln(os.Stderr, "proxyload: -cpuprofile and -phaseprofile exclude each other")
		os.Exit(2)
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "proxyload:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	if *drive != "" {
		if err := driveOnly(o, *drive); err != nil {
			fmt.Fprintln(os.Stderr, "proxyload:", err)
			os.Exit(1)
		}
		return
	}
	if *serveFor > 0 {
		if err := serveOnly(o, *serveFor, *pprofAddr, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "proxyload:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(context.Background(), o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "proxyload:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

func run(ctx context.Context, o options, out io.Writer) error {
	rep, err := measure(ctx, o)
	if err != nil {
		return err
	}
	rep.write(out)
	return nil
}

// serveOnly starts the servers for an external load generator and keeps
// them up for d (bounded, so a forgotten run ends by itself) or until
// SIGINT or SIGTERM. -aa and -variant apply as in a measured run.
func serveOnly(o options, d time.Duration, pprofAddr string, out io.Writer) error {
	f, err := setup(o)
	if err != nil {
		return err
	}
	defer f.Close()
	if pprofAddr != "" {
		// The side listener is the default mux: net/http/pprof and expvar
		// (memstats, for allocations per request) register on it.
		ln, err := net.Listen("tcp", pprofAddr)
		if err != nil {
			return err
		}
		if a, ok := ln.Addr().(*net.TCPAddr); !ok || !a.IP.IsLoopback() {
			ln.Close()
			return fmt.Errorf("proxyload: -pprof %s: not a loopback address", pprofAddr)
		}
		srv := &http.Server{Handler: http.DefaultServeMux, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		defer srv.Close()
		fmt.Fprintf(out, "pprof http://%s/debug/pprof/\n", ln.Addr())
	}
	fmt.Fprintf(out, "origin %s\n", f.origin)
	if f.bare != "" {
		fmt.Fprintf(out, "bare %s\n", f.bare)
	}
	if f.filtered != "" {
		fmt.Fprintf(out, "slidegate %s\n", f.filtered)
	}
	fmt.Fprintln(out, "ready")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	<-ctx.Done()
	return nil
}

// driveOnly sends exactly o.maxReq requests to base with the load's keys
// over o.conc connections (instr.sh counts a server's instructions per
// request this way) and fails unless every one was answered 200.
func driveOnly(o options, base string) error {
	keys := loadKeys(o.keys)
	client := loadClient(o.conc)
	defer client.CloseIdleConnections()
	o.phase = 10 * time.Minute // bounded by o.maxReq
	var s stats
	if _, err := phase(context.Background(), client, base, keys, o, &s); err != nil {
		return err
	}
	if s.requests != o.maxReq || s.errors > 0 || s.non200 > 0 {
		return fmt.Errorf("-drive %s: %d of %d requests answered, %d transport errors, %d non-200 answers", base, s.requests, o.maxReq, s.errors, s.non200)
	}
	return nil
}
