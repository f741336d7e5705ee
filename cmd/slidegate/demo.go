package main

import (
	"encoding/json"
	"net/http"
	"time"
)

// demoOrigin is the origin `--demo-origin` starts: it answers every request
// with a small JSON document, so that `make run` shows slidegate working
// with nothing else running. GET /demo/stream sends one line, waits half a
// second and sends another: a request that is in flight long enough to
// watch a graceful shutdown finish it.
func demoOrigin() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /demo/stream", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("first\n"))
		if fl, ok := w.(http.Flusher); ok {
			fl.Flush()
		}
		select {
		case <-time.After(500 * time.Millisecond):
		case <-r.Context().Done():
			return
		}
		_, _ = w.Write([]byte("second\n"))
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{
			"hello":  "from the slidegate demo origin",
			"method": r.Method,
			"path":   r.URL.Path,
		})
	})
	return mux
}
