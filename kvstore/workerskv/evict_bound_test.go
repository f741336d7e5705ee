package workerskv

import (
	"strconv"
	"testing"
	"time"

	"github.com/slidegate/slidegate/kvstore"
)

// TestBoundExactly: bound on the cells alone, at the edges that hand
// mutations moved unseen. A full isolate (maxCells) keeps every cell; one
// more, and exactly a tenth goes (evictTo left). Of cells of one rate, the
// one that expires first goes first. Without a logger (Local's calls), a
// count not yet in KV is never evicted, however full the isolate; with
// one, its eviction logs the part not yet in KV.
func TestBoundExactly(t *testing.T) {
	const ms = int64(1_700_000_000_000)
	slot := kvstore.Slot{Name: "minute", Length: time.Minute, Bucket: ms / 60_000}
	fill := func(n int) memCells {
		c := memCells{}
		for i := range n {
			c[localKey("c-"+strconv.Itoa(i), slot)] = Cell{N: 2, Expires: ms + 120_000}
		}
		return c
	}
	t.Run("full", func(t *testing.T) {
		c := fill(maxCells)
		bound(c, ms, nil)
		if c.Len() != maxCells {
			t.Errorf("%d cells after bound, want %d (full, not over)", c.Len(), maxCells)
		}
	})
	t.Run("over", func(t *testing.T) {
		c := fill(maxCells)
		soon, late := localKey("soon", slot), localKey("late", slot)
		delete(c, localKey("c-0", slot))
		c[soon] = Cell{N: 2, Expires: ms + 60_000}
		c[late] = Cell{N: 2, Expires: ms + 180_000}
		bound(c, ms, nil)
		if want := maxCells - maxCells/10; c.Len() != want {
			t.Errorf("%d cells after bound, want %d (a tenth evicted)", c.Len(), want)
		}
		if _, ok := c.Get(soon); ok {
			t.Error("the cell that expires first was kept")
		}
		if _, ok := c.Get(late); !ok {
			t.Error("the cell of the same rate that expires later was evicted")
		}
	})
	t.Run("unwritten, no logger", func(t *testing.T) {
		c := memCells{}
		for i := range maxCells + 1 {
			c[SlotPrefix("c-"+strconv.Itoa(i), slot)+"iso-a"] = Cell{N: 2, Expires: ms + 120_000}
		}
		bound(c, ms, nil)
		if c.Len() != maxCells+1 {
			t.Errorf("%d cells after bound, want %d (no unwritten count evicted)", c.Len(), maxCells+1)
		}
	})
	t.Run("unwritten, logged", func(t *testing.T) {
		c := memCells{}
		for i := range maxCells + 1 {
			c[SlotPrefix("c-"+strconv.Itoa(i), slot)+"iso-a"] = Cell{N: 5, Flushed: 2, Expires: ms + 120_000}
		}
		log := &warnLog{}
		bound(c, ms, log)
		if want := maxCells + 1 - (maxCells - maxCells/10); len(log.lines) != want {
			t.Fatalf("%d log lines, want %d (one per evicted cell)", len(log.lines), want)
		}
		for _, l := range log.lines {
			if len(l.args) != 4 || l.args[3] != int64(3) {
				t.Fatalf("log line %v, want n 3 (5 counted, 2 in KV)", l.args)
			}
		}
	})
}
