//go:build js && wasm

package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"sync"
	"syscall/js"
	"time"

	"github.com/slidegate/slidegate/internal/jsasync"
	"github.com/slidegate/slidegate/internal/jsonlog"
	"github.com/slidegate/slidegate/kvstore/workerskv"
	"github.com/syumai/workers"
	"github.com/syumai/workers/cloudflare"
	"github.com/syumai/workers/cloudflare/fetch"
)

// serve serves the one request of this Go instance (the stock shim starts
// one per request) and waits for its background work before returning.
// later runs tasks in this request's waitUntil, which Cloudflare cancels
// 30 s after the response: a task due later never runs. The Store keeps
// each chain of writes within that budget and hands it to a newer request
// (workerskv.Options.Later).
func serve() {
	if cloudflare.Getenv(varDebug) == "1" {
		defer enterLive()()
	}
	var wg sync.WaitGroup
	later := func(d time.Duration, task func(context.Context)) {
		wg.Add(1)
		cloudflare.WaitUntil(func() {
			defer wg.Done()
			if d > 0 {
				time.Sleep(d)
			}
			task(context.Background())
		})
	}
	// A handler of a concrete type, so the compiler sees it is not nil and
	// drops ServeNonBlock's fallback to http.DefaultServeMux, which would
	// link ServeMux and its routing (about 50 KB of Wasm).
	var length int64 = -1 // the one request's declared body length (jsFetch)
	f := &jsFetch{length: func() int64 { return length }}
	ws := &wsAnswer{fetch: f}
	ws.wrap()
	h := build(later, f, ws)
	workers.ServeNonBlock(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		joinRequestHeader(r.Header)
		readBody(r)
		body := trackBody(r)
		length = r.ContentLength
		h.ServeHTTP(w, r)
		if body.unsent() {
			f.release(r.Context())
		}
		drain(body)
	}))
	workers.Ready()
	<-workers.Done()
	wg.Wait()
}

// build reads the Worker's variables and bindings and returns its handler,
// or one that reports why there is none. Its proxy reaches the origin
// through f, and passes a WebSocket on through ws.
func build(later func(time.Duration, func(context.Context)), f *jsFetch, ws *wsAnswer) http.Handler {
	log := jsonlog.New(os.Stderr, nil) // the Workers console stamps each line
	// SLIDEGATE_CONFIG as a JavaScript value: a string, an object (a
	// variable written as a table or a JSON object), or undefined.
	cfgSrc := cloudflare.GetBinding(varConfig)
	e := env{
		Config: func() string {
			return configText(cfgSrc.Type().String(), cfgSrc.String, func() string {
				return js.Global().Get("JSON").Call("stringify", cfgSrc).String()
			})
		},
		Origin: cloudflare.Getenv(varOrigin),
		Debug:  cloudflare.Getenv(varDebug) == "1",
	}
	binding, err := workerskv.NewBinding(cloudflare.GetBinding(kvBinding), kvBinding)
	if err != nil {
		return failed(err, log)
	}
	g := workerskv.JSGlobals()
	var kv workerskv.KV = binding
	var dbg *debug
	if e.Debug {
		dbg = &debug{log: jsLog(), now: time.Now, kv: binding, mem: goMemory, live: liveInstances}
		kv = recordingKV{KV: binding, d: dbg}
	}
	store, err := workerskv.New(workerskv.Options{KV: kv, Globals: g, Later: later, Now: time.Now, Logger: log})
	if err != nil {
		return failed(err, log)
	}
	h, err := newHandler(e, deps{
		Store:     store,
		Local:     workerskv.NewLocal(g, time.Now),
		Transport: fetch.NewClient(fetch.WithBinding(f.binding())).HTTPClient(fetch.RedirectModeManual).Transport,
		Now:       time.Now,
		Logger:    log,
		Debug:     dbg,
		Configs:   jsConfigCache{src: cfgSrc},
		Clock:     workerskv.NewClock(g),
		Upgraded:  ws.answer,
	})
	if err != nil {
		return failed(err, log)
	}
	return h
}

// drain reads what the handler left of the request's body b (a check body
// over the limit, a denied request's upload), up to maxDiscard, and closes
// it, as net/http's server does: otherwise the connection may stall with the
// client's upload half read (seen under wrangler dev). A body the proxy
// handed to fetch belongs to the subrequest, which may still be reading it
// after the handler has returned (the origin answered first): drain read it
// too, and the two readers split the upload between them, or the second
// pending read threw ("only supports a single pending read request"), the
// upload stream was cancelled, the origin got a cut-off body as if it were
// whole, and the Worker restarted (TestWorkerdEarlyAnswer).
func drain(b *requestBody) {
	if !b.unsent() {
		return
	}
	defer func() {
		if p := recover(); p != nil {
			if _, ok := p.(js.Error); !ok {
				panic(p)
			}
		}
	}()
	_, _ = io.Copy(io.Discard, io.LimitReader(b, maxDiscard))
	_ = b.Close()
}

// maxDiscard is the most of an unread request body that the Worker reads
// to keep the connection usable; net/http's server uses the same bound.
const maxDiscard = 256 << 10

// bodyWriter returns the writer an origin's body goes to once w's header is
// written: the first down w's Unwrap chain that takes fetch's JavaScript
// stream as it is (syumai's own writer; the debug Worker's), so that the
// body is not copied through Go, or w. The pre-filter's writer in between
// (httpapi's originWriter) has nothing left to do once the header is
// written.
func bodyWriter(w http.ResponseWriter) io.Writer {
	for u := w; ; {
		if _, ok := u.(interface{ WriteRawJSBody(js.Value) }); ok {
			return u
		}
		uw, ok := u.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return w
		}
		u = uw.Unwrap()
	}
}

// nullBody reports whether body is syumai's reader of a null stream, such
// as fetch gives for some answers without content (noBody): reading it
// panics.
func nullBody(body io.Reader) bool {
	raw, ok := body.(rawBody)
	if !ok {
		return false
	}
	s := raw.GetRawJSBody()
	return s.IsNull() || s.IsUndefined()
}

// fixedBody answers with chunk, read with the error err, and then rest
// unless err ended it (EOF, or the origin broke off), n bytes in all, as the body
// of w's answer, whose header w has written: through a FixedLengthStream of
// n bytes that the runtime reads as it sends, each write awaited. It
// reports false, having read nothing, when w takes no JavaScript stream (or
// no Ready, which sends the answer before its body is written). syumai's
// writer makes such a stream of a body with a Content-Length itself, but
// writes into it without waiting: a Worker read an untyped answer of the
// origin (sniffed) as fast as the origin sent it and kept what the client
// had not read yet, 800 MB of workerd's memory for 96 MB sent to a client
// that read slowly, where Cloudflare resets an isolate past 128 MB
// (TestWorkerdUntypedBackpressure).
func fixedBody(w http.ResponseWriter, chunk []byte, err error, rest io.Reader, n int64) bool {
	bw, ok := bodyWriter(w).(interface {
		WriteRawJSBody(js.Value)
		Ready()
	})
	if !ok {
		return false
	}
	g := js.Global()
	stream, serr := jsasync.New(g.Get("FixedLengthStream"), n)
	if serr != nil {
		return false
	}
	out := stream.Get("writable").Call("getWriter")
	bw.WriteRawJSBody(stream.Get("readable"))
	bw.Ready() // the answer goes out: the runtime reads the stream from now on
	buf := make([]byte, 16<<10)
	for {
		if len(chunk) > 0 {
			u := g.Get("Uint8Array").New(len(chunk))
			js.CopyBytesToJS(u, chunk)
			if _, werr := jsasync.Await(context.Background(), out.Call("write", u)); werr != nil {
				return true // the client went away
			}
		}
		if err != nil {
			break
		}
		k, rerr := rest.Read(buf)
		chunk, err = buf[:k], rerr
	}
	end := "close"
	if err != io.EOF {
		end = "abort" // the client's answer is cut, not ended short
	}
	out.Call(end)
	return true
}

// rawBody is what syumai's request bodies offer besides io.Reader: the JS
// stream they read from.
type rawBody interface{ GetRawJSBody() js.Value }

// readBody replaces the body of a request that wantsBody with its bytes,
// read with one await of new Response(stream).arrayBuffer(). syumai's
// reader awaits stream.read() once per Read: twice for a small body (the
// bytes, then the end), about 0.3 ms more per check request in workerd
// (docs/edge.md). A body that cannot be read becomes a reader of the error,
// which the check API answers with a 400.
func readBody(r *http.Request) {
	raw, ok := r.Body.(rawBody)
	if !ok || !wantsBody(r) {
		return
	}
	b, err := func() ([]byte, error) {
		res, err := jsasync.New(js.Global().Get("Response"), raw.GetRawJSBody())
		if err != nil {
			return nil, err
		}
		p, err := jsasync.Call(res, "arrayBuffer")
		if err != nil {
			return nil, err
		}
		return jsasync.Bytes(r.Context(), p)
	}()
	if err != nil {
		r.Body = io.NopCloser(errReader{err})
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// configGlobal is the globalThis property that keeps the configuration's
// binary form for the isolate's next requests: {src: the SLIDEGATE_CONFIG
// value it was parsed from, bin: Uint8Array}.
const configGlobal = "__slidegateConfig"

// jsConfigCache is the isolate's configCache, in globalThis. src is the
// request's SLIDEGATE_CONFIG as a JavaScript value (a string, an object
// when written as a table, or undefined). js.Value.Equal compares
// references, and syscall/js gives equal strings one reference (its table
// of values is keyed by value), so a hit copies no text between JavaScript
// and Go; a miss only parses again. An object hits only if the runtime
// hands each request the same one (not checked here: a miss costs a
// parse, not a wrong configuration).
type jsConfigCache struct{ src js.Value }

func (c jsConfigCache) Lookup() ([]byte, bool) {
	v := js.Global().Get(configGlobal)
	if v.Type() != js.TypeObject || !v.Get("src").Equal(c.src) {
		return nil, false
	}
	u := v.Get("bin")
	b := make([]byte, u.Length())
	js.CopyBytesToGo(b, u)
	return b, true
}

func (c jsConfigCache) Keep(bin []byte) {
	g := js.Global()
	u := g.Get("Uint8Array").New(len(bin))
	js.CopyBytesToJS(u, bin)
	v := g.Get("Object").New()
	v.Set("src", c.src)
	v.Set("bin", u)
	g.Set(configGlobal, v)
}
