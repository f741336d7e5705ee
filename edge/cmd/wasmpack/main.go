// Command wasmpack merges the data segments of a WebAssembly module that the
// Go toolchain built, in place:
//
//	go run ./edge/cmd/wasmpack [-gap 4096] build/app.wasm
//
// The Go linker writes the module's initial memory as one data segment per
// run of non-zero bytes: tens of thousands of them for the Worker (65,000
// for 2.3 MB). The stock syumai shim instantiates the module once per
// request, and V8 copies the segments one by one each time. Segments at
// most -gap bytes apart become one, with the zeros between them written
// out: the Worker then has a handful of segments, instantiates about 1 ms
// faster in V8 (docs/edge.md), and its gzip is smaller, because the
// segment headers went and runs of zeros compress to almost nothing.
//
// The memory image is unchanged: wasmpack checks, before it writes, that
// the packed module's segments write the same bytes as the original's.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "wasmpack:", err)
		os.Exit(1)
	}
}

// defaultGap is the largest run of zeros that Pack writes out, measured on
// the Worker (docs/edge.md): from 32 bytes up nearly every segment merges;
// 4 KiB leaves the few large zero regions (the BSS) as gaps.
const defaultGap = 4096

func run(args []string, log io.Writer) error {
	fs := flag.NewFlagSet("wasmpack", flag.ContinueOnError)
	fs.SetOutput(log)
	gap := fs.Int("gap", defaultGap, "merge segments at most this many zero bytes apart")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("usage: wasmpack [-gap N] FILE.wasm")
	}
	if *gap < 0 {
		return fmt.Errorf("-gap: must be at least 0, got %d", *gap)
	}
	path := fs.Arg(0)
	mod, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	packed, st, err := Pack(mod, *gap)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := sameImage(mod, packed); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := writeFile(path, packed); err != nil {
		return err
	}
	fmt.Fprintf(log, "wasmpack: %s: %d data segments → %d, %d bytes → %d\n",
		path, st.SegmentsBefore, st.SegmentsAfter, st.BytesBefore, st.BytesAfter)
	return nil
}

// sameImage reports an error unless both modules initialize memory alike:
// the same non-zero bytes at the same addresses (memory starts zeroed).
func sameImage(a, b []byte) error {
	ra, err := nonZero(a)
	if err != nil {
		return err
	}
	rb, err := nonZero(b)
	if err != nil {
		return err
	}
	if len(ra) != len(rb) {
		return fmt.Errorf("the packed module writes %d runs of non-zero bytes, the original %d", len(rb), len(ra))
	}
	for i := range ra {
		if ra[i].off != rb[i].off || !bytes.Equal(ra[i].data, rb[i].data) {
			return fmt.Errorf("the packed module's memory image differs from the original's at %d", min(ra[i].off, rb[i].off))
		}
	}
	return nil
}

// writeFile replaces path with b, through a temporary file in the same
// directory, so that a failure leaves the original.
func writeFile(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".wasmpack-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	info, err := os.Stat(path)
	if err != nil {
		return err
	}
	if err := os.Chmod(f.Name(), info.Mode().Perm()); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
