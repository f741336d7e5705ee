// Command slidegate runs the sliding-window rate limiter as a local HTTP
// server in front of an origin, checks configurations and hashes API keys.
// serve reads its configuration again on SIGHUP, keeping the counts.
//
//	slidegate serve --config FILE --listen ADDR --origin URL
//	slidegate serve --config examples/config.json --demo-origin
//	slidegate check-config FILE
//	slidegate hash-key KEY
package main

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/slidegate/slidegate/httpapi"
)

func main() {
	// A write to a standard output or error nobody reads any more fails
	// (EPIPE) instead of ending the process: Ctrl-C on
	// `slidegate serve 2>&1 | tee serve.log` ends tee too, and serve died
	// by SIGPIPE at its "shutting down" line, cutting the requests it was
	// to drain. A server is not ended by its log's reader either, as
	// systemd's IgnoreSIGPIPE and nginx have it.
	signal.Ignore(syscall.SIGPIPE)
	// Go's HTTP transport writes some complaints about the origin to the
	// standard logger: an origin that sent more than its Content-Length
	// said is "Unsolicited response received on idle HTTP channel", with
	// up to 4 KiB of what it sent quoted. They were plain lines among
	// serve's JSON ones, which a log pipeline parsing JSON drops or
	// rejects, whole: they are WARN lines, cut as a logged path is.
	log.SetFlags(0)
	log.SetOutput(stdWarn{slog.New(slog.NewJSONHandler(os.Stderr, nil))})
	ctx, stop := signalContext()
	var reload <-chan struct{}
	if len(os.Args) > 1 && os.Args[1] == "serve" {
		// Not for the other commands: hash-key reading a terminal that
		// hangs up ends.
		reload = hangups()
	}
	err := runReloading(ctx, os.Args[1:], os.Stdout, os.Stderr, reload)
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

// hangups returns a channel that receives after each SIGHUP, which then no
// longer ends the process (Go's default: exit at once, without a drain):
// serve reloads its configuration, as daemons do on the signal. SIGHUPs
// that come while a reload is pending make one more reload, not one each:
// it reads the newest file.
func hangups() <-chan struct{} {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGHUP)
	reload := make(chan struct{}, 1)
	go func() {
		for range sig {
			select {
			case reload <- struct{}{}:
			default: // one is pending already
			}
		}
	}()
	return reload
}

// stdWarn turns the standard logger's lines into WARN records of log.
type stdWarn struct{ log *slog.Logger }

func (w stdWarn) Write(p []byte) (int, error) {
	w.log.Warn(httpapi.Logged(strings.TrimSuffix(string(p), "\n")))
	return len(p), nil
}
