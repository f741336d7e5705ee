//go:build js && wasm

package workerskv

import (
	"strings"
	"syscall/js"
)

// globalName is the property of globalThis that holds the isolate's state:
// {id: string, cells: Map<string, string>}. Only strings and numbers live
// there, never a js.Func or a promise of one Go instance.
const globalName = "__slidegate"

type jsGlobals struct {
	id    string
	cells jsCells
}

type jsCells struct{ m js.Value }

// JSGlobals returns the isolate's globals in globalThis, creating them (and
// the isolate id) on the isolate's first request.
func JSGlobals() Globals {
	g := js.Global()
	st := g.Get(globalName)
	if st.Type() != js.TypeObject {
		st = g.Get("Object").New()
		st.Set("id", newIsolateID())
		st.Set("cells", g.Get("Map").New())
		g.Set(globalName, st)
	}
	return &jsGlobals{id: st.Get("id").String(), cells: jsCells{m: st.Get("cells")}}
}

func (g *jsGlobals) ID() string { return g.id }

// Update runs fn at once: JS runs one piece of code at a time and fn makes
// only synchronous calls, so no other request of the isolate can interleave.
// Other goroutines of this request's own Go instance can, with no lock: a
// log line (a write to stderr whose callback runs them) or the instance's
// first garbage collection (seen in Node: it ran another runnable goroutine
// once, never after) may run one inside fn. That is why log lines come
// after their updates; a background task started by WaitUntil runs to its
// first wait inside the call that starts it, so none is runnable then, and
// the timers that can be (flushes of different counters at one deadline)
// share only the holders' count, where a lost update lets a ninth instance
// hold a KV call, not a count go missing.
func (g *jsGlobals) Update(fn func(c Cells)) { fn(g.cells) }

func (c jsCells) Get(key string) (Cell, bool) {
	v := c.m.Call("get", key)
	if v.Type() != js.TypeString {
		return Cell{}, false
	}
	return decodeCell(v.String())
}

func (c jsCells) Set(key string, cell Cell) { c.m.Call("set", key, encodeCell(cell)) }

func (c jsCells) Len() int { return c.m.Get("size").Int() }

func (c jsCells) Delete(key string) { c.m.Call("delete", key) }

// Sweep reads every key and every value in one string each
// (Array.from(...).join), so that it crosses into JavaScript a few times
// in all and once per cell it deletes: a call per cell and the js.Values it
// made took about 50 µs a cell in Node, 5 s of the isolate's one thread for
// a sweep of 100,000 cells.
func (c jsCells) Sweep(now int64, kept func(string, Cell)) {
	n := c.Len()
	if n == 0 {
		return
	}
	array := js.Global().Get("Array")
	keys := strings.Split(array.Call("from", c.m.Call("keys")).Call("join", "\n").String(), "\n")
	values := strings.Split(array.Call("from", c.m.Call("values")).Call("join", "\n").String(), "\n")
	if len(keys) != n || len(values) != n {
		return // a key or value holding a newline, which no cell's does
	}
	for i, v := range values {
		cell, ok := decodeCell(v)
		switch {
		case !ok || cell.Expires <= now:
			c.m.Call("delete", keys[i])
		case kept != nil:
			kept(keys[i], cell)
		}
	}
}
