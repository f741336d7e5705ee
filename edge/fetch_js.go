//go:build js && wasm

package main

import (
	"syscall/js"

	"github.com/slidegate/slidegate/internal/jsasync"
)

// bodyFetch returns the object whose fetch method syumai's client calls
// (fetch.WithBinding): the global fetch, with the request's body replaced
// by the client's own stream (body()) while nothing in Go has read from
// it. syumai hands fetch a ReadableStream made from Go's reader, whose
// length the runtime does not know: every upload went to the origin
// chunked, without the client's Content-Length (which fetch drops from the
// headers), and an origin that needs the length (S3's PUT answers 411, a
// WSGI server reads no body without CONTENT_LENGTH) got none through the
// Worker, while the local server's proxy sends it
// (TestWorkerdUploadLength). The client's stream carries its length, and
// is passed on as a JavaScript Worker passes request.body.
func bodyFetch(body func() (js.Value, bool)) js.Value {
	g := js.Global()
	ns := g.Get("Object").New()
	ns.Set("fetch", js.FuncOf(func(_ js.Value, args []js.Value) any {
		req, init := args[0], args[1]
		if b := req.Get("body"); !b.IsNull() && !b.IsUndefined() {
			if raw, ok := body(); ok {
				opts := g.Get("Object").New()
				opts.Set("body", raw)
				if r, err := jsasync.New(g.Get("Request"), req, opts); err == nil {
					req = r
				}
			}
		}
		// Invoked, as syumai calls the global fetch: called as a method
		// of js.Global(), it threw "Illegal invocation" under workerd.
		return g.Get("fetch").Invoke(req, init)
	}))
	return ns
}

// stream returns the client's JavaScript stream of b while nothing has
// read from b (bodyFetch), false otherwise or without one.
func (b *requestBody) stream() (js.Value, bool) {
	if b == nil || b.read.Load() {
		return js.Value{}, false
	}
	raw, ok := b.rc.(rawBody)
	if !ok {
		return js.Value{}, false
	}
	return raw.GetRawJSBody(), true
}
