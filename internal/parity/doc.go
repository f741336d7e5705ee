// Package parity is the harness of slidegate's differential tests: the
// same generated requests, at the same instants of one fixed clock, go to
// the local server (cmd/slidegate's stack, built here) and to another
// platform's adapter (the Lambda's in lambda/, the Worker's in edge/), each
// in front of its own recording origin, and what the client gets back and
// what the origin receives are compared after the documented platform
// differences are normalised away.
//
// The local server is the reference: its handler is httpapi's behind
// httpapi.NewProxy, served by net/http on a loopback socket, and requests
// reach it as bytes on the wire from the client address they name (any of
// 127.0.0.0/8), so nothing of net/http's request parsing is skipped. The
// platforms' own tests turn a Request into what their front end hands
// their code (an API Gateway event, a Worker's fetch request).
//
// Only test code imports this package.
package parity
