//go:build js && wasm

package workerskv

import (
	"maps"
	"syscall/js"
	"testing"
)

// TestJSCellsSweep: the sweep of the isolate's Map, which reads its keys and
// values in one string each, deletes the expired cells and what is no cell,
// and hands each cell it keeps to kept under its own key.
func TestJSCellsSweep(t *testing.T) {
	c := jsCells{m: js.Global().Get("Map").New()}
	cells := map[string]Cell{
		"sg:day:ab:86400000:1:iso":    {N: 3, Flushed: 2, Expires: 200},
		"sum|sg:day:ab:86400000:1:":   {N: 9, At: 5, Expires: 300},
		"l|s|1000|7|ip:2001:db8::/64": {N: 1, Expires: 100},
		"l|s|1000|6|ip:198.51.100.7":  {N: 4, Expires: 50},
		clockKey:                      {N: 42, Expires: 1 << 62},
	}
	for k, cell := range cells {
		c.Set(k, cell)
	}
	c.m.Call("set", "garbage", "1,2")
	if got, want := c.Len(), 6; got != want {
		t.Fatalf("Len = %d, want %d", got, want)
	}
	got := map[string]Cell{}
	c.Sweep(100, func(k string, cell Cell) { got[k] = cell })
	want := maps.Clone(cells)
	delete(want, "l|s|1000|7|ip:2001:db8::/64")
	delete(want, "l|s|1000|6|ip:198.51.100.7")
	if !maps.Equal(got, want) {
		t.Errorf("kept %v, want %v", got, want)
	}
	if got, want := c.Len(), 3; got != want {
		t.Errorf("Len after the sweep = %d, want %d", got, want)
	}
	c.Delete(clockKey)
	if _, ok := c.Get(clockKey); ok || c.Len() != 2 {
		t.Errorf("Delete left the cell (Len %d)", c.Len())
	}
	c.Sweep(1000, nil)
	if c.Len() != 0 {
		t.Errorf("Len after every cell expired = %d", c.Len())
	}
}
