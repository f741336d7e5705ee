//go:build js && wasm

package main

import "syscall/js"

// debugGlobal is the globalThis property that holds the debug log: an array
// of strings that lives as long as the isolate.
const debugGlobal = "__slidegate_debug"

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

// goMemory is the size of the Go instance's linear memory (memory.size).
// runtime.ReadMemStats, which gave MemStats.Sys (the same less the static
// data), linked 2.3 KB of the Worker's gzip for the debug Worker alone.
func goMemory() uint64 { return uint64(memoryPages()) << 16 }

// memoryPages returns the size of the linear memory in 64 KiB pages
// (mem_wasm.s).
func memoryPages() int32
