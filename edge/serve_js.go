//go:build js && wasm

package main

import (
	"context"
	"net/http"
	"os"
	"sync"
	"time"

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
	workers.ServeNonBlock(http.HandlerFunc(build(later).ServeHTTP))
	workers.Ready()
	<-workers.Done()
	wg.Wait()
}

// build reads the Worker's variables and bindings and returns its handler,
// or one that reports why there is none.
func build(later func(time.Duration, func(context.Context))) http.Handler {
	log := jsonlog.New(os.Stderr, nil) // the Workers console stamps each line
	e := env{
		Config: cloudflare.Getenv(varConfig),
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
		dbg = &debug{log: jsLog(), now: time.Now, kv: binding, mem: goMemory}
		kv = recordingKV{KV: binding, d: dbg}
	}
	store, err := workerskv.New(workerskv.Options{KV: kv, Globals: g, Later: later, Now: time.Now, Logger: log})
	if err != nil {
		return failed(err, log)
	}
	h, err := newHandler(e, deps{
		Store:     store,
		Local:     workerskv.NewLocal(g, time.Now),
		Transport: fetch.NewClient().HTTPClient(fetch.RedirectModeManual).Transport,
		Now:       time.Now,
		Logger:    log,
		Debug:     dbg,
	})
	if err != nil {
		return failed(err, log)
	}
	return h
}
