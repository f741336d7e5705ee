//go:build js && wasm

package main

import "syscall/js"

// debugGlobal is the globalThis property that holds the debug log: an array
// of strings that lives as long as the isolate.
const debugGlobal = "__slidegate_debug"

// liveGlobal is the globalThis property that holds the debug Worker's
// count of Go instances: {live: not returned from serve, freed: an array
// with an entry for each of those that V8 collected, and reg, the
// FinalizationRegistry that fills it} (debugReport.Live, .Freed).
const liveGlobal = "__slidegate_live"

// liveToken is this instance's object in liveGlobal's registry: the
// instance refers to it (syscall/js's table of values) for as long as it
// is reachable itself.
var liveToken js.Value

// liveCounts returns the isolate's count of instances, creating it.
func liveCounts() js.Value {
	g := js.Global()
	v := g.Get(liveGlobal)
	if v.Type() == js.TypeObject {
		return v
	}
	v = g.Get("Object").New()
	freed := g.Get("Array").New()
	// A built-in bound to the array: a function of the Go instance would
	// keep that instance reachable from the registry.
	push := g.Get("Array").Get("prototype").Get("push").Call("bind", freed)
	v.Set("live", 0)
	v.Set("freed", freed)
	v.Set("reg", g.Get("FinalizationRegistry").New(push))
	g.Set(liveGlobal, v)
	return v
}

// liveInstances returns the count of instances that have not returned from
// serve, and of those that V8 collected.
func liveInstances() (live, freed int64) {
	v := liveCounts()
	return int64(v.Get("live").Int()), int64(v.Get("freed").Length())
}

// enterLive counts this Go instance until leave.
func enterLive() (leave func()) {
	v := liveCounts()
	liveToken = js.Global().Get("Object").New()
	v.Get("reg").Call("register", liveToken, 1, liveToken)
	v.Set("live", v.Get("live").Int()+1)
	return func() {
		v.Get("reg").Call("unregister", liveToken)
		v.Set("live", v.Get("live").Int()-1)
	}
}

// maxDebugLines bounds the log of a long-running debug Worker.
const maxDebugLines = 200_000

type jsEventLog struct{ a js.Value }

func jsLog() eventLog {
	a := js.Global().Get(debugGlobal)
	if a.Type() != js.TypeObject {
		a = js.Global().Get("Array").New()
		js.Global().Set(debugGlobal, a)
	}
	return jsEventLog{a: a}
}

func (l jsEventLog) Append(line string) {
	if l.a.Length() < maxDebugLines {
		l.a.Call("push", line)
	}
}

func (l jsEventLog) Lines() []string {
	n := l.a.Length()
	lines := make([]string, n)
	for i := range n {
		lines[i] = l.a.Index(i).String()
	}
	return lines
}

// WriteRawJSBody passes a JavaScript body stream on, as syumai's own writer
// takes it (a proxied answer's body goes over as fetch gave it, not through
// Go), so that the debug Worker's answers, which the tests read, take the
// production Worker's path. The debug Worker wraps syumai's writer only.
func (m *memWriter) WriteRawJSBody(body js.Value) {
	m.stamp()
	m.Header().Set(streamHeader, "1")
	m.ResponseWriter.(interface{ WriteRawJSBody(js.Value) }).WriteRawJSBody(body)
}

// Ready sends the answer before its body is written, as syumai's own
// writer does (fixedBody).
func (m *memWriter) Ready() {
	m.ResponseWriter.(interface{ Ready() }).Ready()
}

// goMemory is the size of the Go instance's linear memory (memory.size).
// runtime.ReadMemStats, which gave MemStats.Sys (the same less the static
// data), linked 2.3 KB of the Worker's gzip for the debug Worker alone.
func goMemory() uint64 { return uint64(memoryPages()) << 16 }

// memoryPages returns the size of the linear memory in 64 KiB pages
// (mem_wasm.s).
func memoryPages() int32
