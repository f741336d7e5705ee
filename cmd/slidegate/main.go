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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "slidegate:", err)
		os.Exit(1)
	}
}
