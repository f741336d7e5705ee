// Command edge is slidegate's Cloudflare Worker: the shared HTTP handler
// (package httpapi) compiled to Wasm with github.com/syumai/workers, counting
// in Workers KV through package workerskv.
//
// Build and run it with the Makefile (make build-edge, make dev-edge, make
// deploy-edge); wrangler.toml at the repository root wires the KV binding
// and the variables:
//
//	SLIDEGATE_CONFIG  the configuration: JSON text, or an object (a var
//	                  written as a table; empty or absent: the default plans)
//	ORIGIN_URL        where admitted requests go: an absolute http(s) URL,
//	                  "self" for the request's own URL (a Worker on a route
//	                  in front of its zone's origin), or empty for the check
//	                  API (POST /v1/check) only
//	SLIDEGATE_DEBUG   "1" adds the test-only route GET /__slidegate/debug
//	                  (KV operations and memory); never set it in production
//
// The client IP is CF-Connecting-IP. The main is thin: it reads the
// variables, builds the stores and the handler, serves one request with
// workers.ServeNonBlock, and waits for the background KV writes
// (waitUntil) before the Go instance exits. Everything it calls but the
// syscall/js glue is plain Go and tested on the host.
package main
