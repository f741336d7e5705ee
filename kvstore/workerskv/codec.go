package workerskv

import (
	"strconv"
	"strings"
)

// encodeCell writes a cell as one string, "N,Flushed,At,Busy,Expires,Owner,Gen":
// a JS Map holds it across requests, and one string crosses the Go/JS
// boundary in one call where seven numbers would take seven.
func encodeCell(c Cell) string {
	b := make([]byte, 0, 64)
	for i, v := range [7]int64{c.N, c.Flushed, c.At, c.Busy, c.Expires, c.Owner, c.Gen} {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, v, 10)
	}
	return string(b)
}

// decodeCell reads what encodeCell wrote; false for anything else.
func decodeCell(s string) (Cell, bool) {
	var v [7]int64
	for i := range v {
		field, rest, found := strings.Cut(s, ",")
		if found != (i < len(v)-1) {
			return Cell{}, false
		}
		n, err := strconv.ParseInt(field, 10, 64)
		if err != nil {
			return Cell{}, false
		}
		v[i], s = n, rest
	}
	return Cell{N: v[0], Flushed: v[1], At: v[2], Busy: v[3], Expires: v[4], Owner: v[5], Gen: v[6]}, true
}
