//go:build js && wasm

package main

import (
	"context"
	"net/http"
	"syscall/js"

	"github.com/slidegate/slidegate/internal/jsasync"
)

// jsFetch is the Worker's way to the origin: the object whose fetch method
// syumai's client calls (fetch.WithBinding), around the global fetch.
//
// syumai hands fetch a ReadableStream made from Go's reader, whose length
// the runtime does not know: every upload went to the origin chunked,
// without the client's Content-Length (which fetch drops from the
// headers), and an origin that needs the length (S3's PUT answers 411, a
// WSGI server reads no body without CONTENT_LENGTH) got none through the
// Worker, while the local server's proxy sends it (TestWorkerdUploadLength).
// A body of a declared length is piped into a FixedLengthStream of that
// length, whose length the runtime sends (piped); one without, into an
// IdentityTransformStream: handed syumai's stream itself, a chunked upload
// of 1 MiB that the origin refused unread (413) stalled the Worker for
// about 30 s (TestWorkerdOriginRefusesUpload). The client's own stream,
// handed to fetch instead (0bfc7b1), stayed the failed fetch's when the
// origin was down: drain could not read what was left of the upload, and
// the Worker stalled for about a minute with the client's upload half read
// (TestWorkerdOriginDownUpload).
//
// The answer to a WebSocket handshake is kept (last), for wsAnswer.
type jsFetch struct {
	length func() int64 // the request's declared body length; -1: unknown (chunked)
	last   js.Value     // fetch's Response to the last request asking for a WebSocket
	// The pipe of the body into fetch's stream (its promise), and what
	// stops it; undefined without one.
	pipe, stop js.Value
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
			if r, ok := f.piped(req); ok {
				req = r
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

// piped returns req with its body piped into a FixedLengthStream of the
// request's declared length (an IdentityTransformStream without one), false
// when the runtime refused.
// The pipe leaves the body to drain when it stops (release).
func (f *jsFetch) piped(req js.Value) (js.Value, bool) {
	n := f.length()
	g := js.Global()
	var fixed js.Value
	var err error
	if n >= 0 {
		fixed, err = jsasync.New(g.Get("FixedLengthStream"), n)
	} else {
		fixed, err = jsasync.New(g.Get("IdentityTransformStream"))
	}
	if err != nil {
		return js.Value{}, false
	}
	stop := g.Get("AbortController").New()
	opts := g.Get("Object").New()
	opts.Set("preventCancel", true)
	opts.Set("signal", stop.Get("signal"))
	pipe, err := jsasync.Call(req.Get("body"), "pipeTo", fixed.Get("writable"), opts)
	if err != nil {
		return js.Value{}, false
	}
	init := g.Get("Object").New()
	init.Set("body", fixed.Get("readable"))
	r, err := jsasync.New(g.Get("Request"), req, init)
	if err != nil {
		stop.Call("abort")
		return js.Value{}, false
	}
	f.pipe, f.stop = pipe, stop
	return r, true
}

// release stops the pipe of a body fetch did not take (the origin was
// down), and waits until it has let go of the body, for drain to read
// what is left.
func (f *jsFetch) release(ctx context.Context) {
	if f.pipe.IsUndefined() {
		return
	}
	f.stop.Call("abort")
	_, _ = jsasync.Await(ctx, f.pipe) // rejected: stopped, or fetch failed
	f.pipe = js.Undefined()
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
// once the Go instance is ready. It also hands syumai the request with its
// path escaped (escapedURL): syumai's conversion refused a stray "%", and
// Go's url package wrote a path holding a "|" out with each "%2F" decoded.
func (a *wsAnswer) wrap() {
	g := js.Global()
	binding := g.Get("context").Get("binding")
	serve := binding.Get("handleRequest")
	binding.Set("handleRequest", js.FuncOf(func(_ js.Value, args []js.Value) any {
		req := args[0]
		if u, ok := escapedURL(req.Get("url").String()); ok {
			if r, err := jsasync.New(g.Get("Request"), u, req); err == nil {
				req = r
			}
		}
		var executor js.Func
		executor = js.FuncOf(func(_ js.Value, p []js.Value) any {
			executor.Release()
			a.resolve = p[0]
			serve.Invoke(req).Call("then", p[0], p[1])
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
