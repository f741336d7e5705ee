package workerskv

import "testing"

// FuzzRev14DecodeAnyCell: a cell is read back from a JS Map that anything
// could have written (a previous version's six numbers cannot survive a
// deploy, which starts new isolates, but nothing guarantees the format):
// decodeCell answers false for what encodeCell did not write, never a
// panic, and what it accepts encodes back to the same cell.
func FuzzRev14DecodeAnyCell(f *testing.F) {
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
