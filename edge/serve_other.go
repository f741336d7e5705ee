//go:build !(js && wasm)

package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
)

// serve explains how to build the Worker: outside js/wasm there is nothing
// to serve (cmd/slidegate is the local server).
func serve() {
	fmt.Fprintln(os.Stderr, "edge: this is the Cloudflare Worker; build it with `make build-edge` (GOOS=js GOARCH=wasm) and run it with `make dev-edge`")
	os.Exit(2)
}

// bodyWriter is w: outside js/wasm no writer takes a JavaScript stream.
func bodyWriter(w http.ResponseWriter) io.Writer { return w }

// nullBody is false: outside js/wasm no body is a JavaScript null.
func nullBody(io.Reader) bool { return false }

// fixedBody is false: outside js/wasm no writer takes a JavaScript stream.
func fixedBody(http.ResponseWriter, []byte, error, io.Reader, int64) bool { return false }
