//go:build js && wasm

package main

import (
	"net/http"
	"syscall/js"

	"github.com/slidegate/slidegate/internal/jsasync"
)

// jsFetch is the Worker's way to the origin: the object whose fetch method
// syumai's client calls (fetch.WithBinding), around the global fetch.
//
// A request's body is replaced by the client's own stream (body()) while
// nothing in Go has read from it. syumai hands fetch a ReadableStream made
// from Go's reader, whose length the runtime does not know: every upload
// went to the origin chunked, without the client's Content-Length (which
// fetch drops from the headers), and an origin that needs the length (S3's
// PUT answers 411, a WSGI server reads no body without CONTENT_LENGTH) got
// none through the Worker, while the local server's proxy sends it
// (TestWorkerdUploadLength). The client's stream carries its length, and
// is passed on as a JavaScript Worker passes request.body.
//
// The answer to a WebSocket handshake is kept (last), for wsAnswer.
type jsFetch struct {
	body func() (js.Value, bool)
	last js.Value // fetch's Response to the last request asking for a WebSocket
}

// binding returns the object for fetch.WithBinding.
func (f *jsFetch) binding() js.Value {
	g := js.Global()
	keep := js.FuncOf(func(_ js.Value, args []js.Value) any {
		f.last = args[0]
		return args[0]
	})
	ns := g.Get("Object").New()
	ns.Set("fetch", js.FuncOf(func(_ js.Value, args []js.Value) any {
		req, init := args[0], args[1]
		if b := req.Get("body"); !b.IsNull() && !b.IsUndefined() {
			if raw, ok := f.body(); ok {
				opts := g.Get("Object").New()
				opts.Set("body", raw)
				if r, err := jsasync.New(g.Get("Request"), req, opts); err == nil {
					req = r
				}
			}
		}
		// Invoked, as syumai calls the global fetch: called as a method
		// of js.Global(), it threw "Illegal invocation" under workerd.
		p := g.Get("fetch").Invoke(req, init)
		if isWebSocket(http.Header{"Upgrade": {req.Get("headers").Call("get", "upgrade").String()}}) {
			p = p.Call("then", keep)
		}
		return p
	}))
	return ns
}

// stream returns the client's JavaScript stream of b while nothing has
// read from b (jsFetch), false otherwise or without one.
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

// wsAnswer gives the client the WebSocket the origin accepted. A Response
// of status 101 must carry the WebSocket, which syumai's writer cannot
// give it (it built one without, which the runtime refused): the request's
// promise, which worker.mjs awaits, is resolved with the Worker's own
// Response instead, and what syumai builds afterwards goes nowhere. Before
// it, the Worker's proxy dropped the upgrade as a hop-by-hop header: the
// origin got a plain GET, where the local server's proxy passes the
// WebSocket on (TestWorkerdWebSocket).
type wsAnswer struct {
	fetch   *jsFetch
	resolve js.Value // of the request's promise (wrap)
}

// wrap puts itself around syumai's handleRequest, which worker.mjs calls
// once the Go instance is ready.
func (a *wsAnswer) wrap() {
	g := js.Global()
	binding := g.Get("context").Get("binding")
	serve := binding.Get("handleRequest")
	binding.Set("handleRequest", js.FuncOf(func(_ js.Value, args []js.Value) any {
		var executor js.Func
		executor = js.FuncOf(func(_ js.Value, p []js.Value) any {
			executor.Release()
			a.resolve = p[0]
			serve.Invoke(args[0]).Call("then", p[0], p[1])
			return nil
		})
		return g.Get("Promise").New(executor)
	}))
}

// answer returns what resolves the request with a 101 that carries the
// WebSocket of the origin's last answer, under a header, or nil when that
// answer carried none.
func (a *wsAnswer) answer() func(h http.Header) {
	if a.resolve.IsUndefined() || a.fetch.last.IsUndefined() {
		return nil
	}
	ws := a.fetch.last.Get("webSocket")
	if ws.IsNull() || ws.IsUndefined() {
		return nil
	}
	return func(h http.Header) {
		g := js.Global()
		headers := g.Get("Headers").New()
		for k, vs := range h {
			for _, v := range vs {
				_, _ = jsasync.Call(headers, "append", k, v) // a field JavaScript refuses stays behind
			}
		}
		init := g.Get("Object").New()
		init.Set("status", http.StatusSwitchingProtocols)
		init.Set("webSocket", ws)
		init.Set("headers", headers)
		if res, err := jsasync.New(g.Get("Response"), nil, init); err == nil {
			a.resolve.Invoke(res)
		}
	}
}
