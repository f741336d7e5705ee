// Command accuracy replays deterministic request traces through slidegate's
// two-bucket window and an exact sliding log, and writes the report
// (accuracy.md and SVG plots) into a directory:
//
//	go run ./cmd/accuracy -out docs
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/slidegate/slidegate/internal/accuracy"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
}

// run parses args, runs the suite and writes the report. quick (a hidden
// flag for tests) shrinks every trace.
func run(args []string, stdout, stderr io.Writer) error {
	def := accuracy.DefaultConfig()
	fs := flag.NewFlagSet("accuracy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "", "directory to write accuracy.md and the SVG plots into (required)")
	seed := fs.Uint64("seed", def.Seed, "seed of the trace generators")
	quick := fs.Bool("quick", false, "short traces (for tests; the numbers are not the published ones)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil // -h: the usage is printed, nothing failed
		}
		return fmt.Errorf("accuracy: %w", err)
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("accuracy: unexpected argument %q", fs.Arg(0))
	case *out == "":
		return errors.New("accuracy: -out: a directory is required")
	}
	// Fail on an unusable directory before spending seconds on the suite.
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return fmt.Errorf("accuracy: -out: %w", err)
	}
	cfg := def
	cfg.Seed = *seed
	if *quick {
		cfg = accuracy.QuickConfig(cfg)
	}
	rep, err := accuracy.Run(cfg)
	if err != nil {
		return err
	}
	if err := rep.Write(*out); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "accuracy: wrote %s/accuracy.md and plots in %s\n", *out, rep.Elapsed.Round(1e6))
	return nil
}
