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
