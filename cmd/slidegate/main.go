// Command slidegate runs the sliding-window rate limiter as a local HTTP
// server in front of an origin, checks configurations and hashes API keys.
//
//	slidegate serve --config FILE --listen ADDR --origin URL
//	slidegate serve --config examples/config.json --demo-origin
//	slidegate check-config FILE
//	slidegate hash-key KEY
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	// A write to a standard output or error nobody reads any more fails
	// (EPIPE) instead of ending the process: Ctrl-C on
	// `slidegate serve 2>&1 | tee serve.log` ends tee too, and serve died
	// by SIGPIPE at its "shutting down" line, cutting the requests it was
	// to drain. A server is not ended by its log's reader either, as
	// systemd's IgnoreSIGPIPE and nginx have it.
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := signalContext()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "slidegate:", err)
		os.Exit(1)
	}
}

// signalContext returns a context cancelled by the first SIGINT or
// SIGTERM, which starts serve's graceful shutdown. By the time it is
// cancelled the signals have their default effect again: a second one
// ends the process at once, without waiting up to shutdownGrace for the
// requests in flight (an operator's second Ctrl-C).
func signalContext() (context.Context, context.CancelFunc) {
	sig, stopSignals := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-sig.Done() // a signal, or stop
		stopSignals()
		cancel()
	}()
	return ctx, func() { stopSignals(); cancel() }
}
