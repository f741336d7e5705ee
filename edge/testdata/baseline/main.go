// Command baseline is a stock syumai/workers hello-world Worker: the latency
// and size baseline that edge's workerd tests measure slidegate against.
package main

import (
	"io"
	"net/http"

	"github.com/syumai/workers"
)

func main() {
	workers.Serve(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "hello")
	}))
}
