package workerskv

import (
	"math"
	"testing"
)

func TestCellCodec(t *testing.T) {
	cells := []Cell{
		{},
		{N: 12, Flushed: 10, At: 1795000000000, Busy: 1795000000500, Expires: 1795000120000, Owner: 1794999990000, Gen: 1795000000700},
		{N: -3, Expires: math.MaxInt64},
	}
	for _, c := range cells {
		got, ok := decodeCell(encodeCell(c))
		if !ok || got != c {
			t.Errorf("decode(encode(%+v)) = %+v, %v", c, got, ok)
		}
	}
	for _, bad := range []string{"", "1,2,3,4,5,6", "1,2,3,4,5,6,7,8", "1,2,x,4,5,6,7", "1,,3,4,5,6,7", "undefined"} {
		if c, ok := decodeCell(bad); ok {
			t.Errorf("decodeCell(%q) = %+v, true; want false", bad, c)
		}
	}
}

func FuzzCellCodec(f *testing.F) {
	f.Add(int64(1), int64(2), int64(3), int64(4), int64(5), int64(6), int64(7))
	f.Fuzz(func(t *testing.T, n, fl, at, busy, exp, owner, gen int64) {
		c := Cell{N: n, Flushed: fl, At: at, Busy: busy, Expires: exp, Owner: owner, Gen: gen}
		if got, ok := decodeCell(encodeCell(c)); !ok || got != c {
			t.Errorf("round trip of %+v = %+v, %v", c, got, ok)
		}
	})
}

// FuzzDecodeAnyCell: a cell is read back from a JS Map that anything
// could have written (a previous version's six numbers cannot survive a
// deploy, which starts new isolates, but nothing guarantees the format):
// decodeCell answers false for what encodeCell did not write, never a
// panic, and what it accepts encodes back to the same cell.
func FuzzDecodeAnyCell(f *testing.F) {
	for _, s := range []string{"", "1,2,3,4,5,6", "1,2,3,4,5,6,7", "1,2,3,4,5,6,7,", ",,,,,,", "-0,+1,2,3,4,5,6", "99999999999999999999,0,0,0,0,0,0", "1,2,3,4,5,6,7\n", "undefined", "[object Object]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, ok := decodeCell(s)
		if !ok {
			if c != (Cell{}) {
				t.Errorf("decodeCell(%q) = %+v, false; want the zero cell", s, c)
			}
			return
		}
		if got, ok := decodeCell(encodeCell(c)); !ok || got != c {
			t.Errorf("decodeCell(%q) = %+v, which encodes to %q and decodes to %+v, %v", s, c, encodeCell(c), got, ok)
		}
	})
}
