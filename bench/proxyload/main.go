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
	"flag"
	"fmt"
	"io"
	"os"
	"time"
)

func main() {
	var o options
	flag.IntVar(&o.conc, "c", 32, "concurrent connections")
	flag.DurationVar(&o.phase, "d", 3*time.Second, "duration of one phase (one front end)")
	flag.IntVar(&o.rounds, "rounds", 6, "rounds; each runs both front ends once")
	flag.IntVar(&o.maxReq, "n", 2_000_000, "at most this many requests per phase")
	flag.IntVar(&o.keys, "keys", 1000, "distinct API keys the load uses (0: anonymous clients)")
	flag.Parse()
	if err := run(context.Background(), o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "proxyload:", err)
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
