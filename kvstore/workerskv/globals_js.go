//go:build js && wasm

package workerskv

import "syscall/js"

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
func (g *jsGlobals) Update(fn func(c Cells)) { fn(g.cells) }

func (c jsCells) Get(key string) (Cell, bool) {
	v := c.m.Call("get", key)
	if v.Type() != js.TypeString {
		return Cell{}, false
	}
	return decodeCell(v.String())
}

func (c jsCells) Set(key string, cell Cell) { c.m.Call("set", key, encodeCell(cell)) }

func (c jsCells) Sweep(now int64, kept func(string, Cell)) {
	entries := js.Global().Get("Array").Call("from", c.m.Call("entries"))
	for i, n := 0, entries.Length(); i < n; i++ {
		e := entries.Index(i)
		v := e.Index(1)
		if v.Type() != js.TypeString {
			continue
		}
		cell, ok := decodeCell(v.String())
		switch {
		case !ok || cell.Expires <= now:
			c.m.Call("delete", e.Index(0))
		case kept != nil:
			kept(e.Index(0).String(), cell)
		}
	}
}
