package main

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"slices"
)

// Errors of Pack. Each wraps with the offset and what was found.
var (
	ErrNotWasm     = errors.New("not a WebAssembly 1.0 binary module")
	ErrMalformed   = errors.New("malformed module")
	ErrUnsupported = errors.New("unsupported data section")
)

// Section ids (WebAssembly core specification, 5.5.2).
const (
	sectionData      = 11
	sectionDataCount = 12
)

var header = []byte{0x00, 'a', 's', 'm', 0x01, 0x00, 0x00, 0x00}

// Stats describes what Pack did.
type Stats struct {
	SegmentsBefore, SegmentsAfter int
	BytesBefore, BytesAfter       int // the whole module
}

// segment is an active data segment of memory 0 at a constant offset: the
// only kind the Go linker writes.
type segment struct {
	off  uint32
	data []byte
}

func (s segment) end() uint64 { return uint64(s.off) + uint64(len(s.data)) }

// Pack returns mod with its data segments merged wherever two consecutive
// segments are at most gap bytes apart: the bytes between them are zero in
// a new memory, and Pack writes those zeros into the merged segment. Every
// other section is copied unchanged. The initial memory image stays the
// same byte for byte.
//
// Segments may come in any order but must not overlap; a module with
// overlapping segments, with any other data section (passive segments, an
// offset that is not a constant, a second memory), or with a data count
// section (its code may name segments by index) gets ErrUnsupported.
func Pack(mod []byte, gap int) ([]byte, Stats, error) {
	st := Stats{BytesBefore: len(mod)}
	secs, err := sections(mod)
	if err != nil {
		return nil, st, err
	}
	var out bytes.Buffer
	out.Grow(len(mod) + len(mod)/4)
	out.Write(header)
	var merged []segment
	for _, s := range secs {
		if s.id == sectionDataCount {
			// Only code that names data segments by index (memory.init,
			// data.drop) needs this section, and merging renumbers them.
			// The Go linker writes neither.
			return nil, st, fmt.Errorf("%w: a data count section at %d: the code may name data segments by index, which merging would change", ErrUnsupported, s.at)
		}
		if s.id != sectionData {
			continue
		}
		segs, err := dataSegments(s)
		if err != nil {
			return nil, st, err
		}
		st.SegmentsBefore = len(segs)
		if merged, err = merge(segs, gap); err != nil {
			return nil, st, err
		}
		st.SegmentsAfter = len(merged)
	}
	for _, s := range secs {
		switch s.id {
		case sectionData:
			writeSection(&out, sectionData, encodeData(merged))
		default:
			out.Write(s.raw)
		}
	}
	st.BytesAfter = out.Len()
	return out.Bytes(), st, nil
}

// nonZero returns the runs of non-zero bytes that mod's data segments
// write, in address order: the initial memory image without its zeros, so
// that comparing two images costs their data, not their address range.
// Adjacent runs from different segments are joined.
func nonZero(mod []byte) ([]segment, error) {
	secs, err := sections(mod)
	if err != nil {
		return nil, err
	}
	var runs []segment
	for _, s := range secs {
		if s.id != sectionData {
			continue
		}
		segs, err := dataSegments(s)
		if err != nil {
			return nil, err
		}
		// merge with gap 0 sorts and refuses overlaps; it copies, so
		// joining runs below cannot write into mod.
		if segs, err = merge(segs, 0); err != nil {
			return nil, err
		}
		for _, sg := range segs {
			for i := 0; i < len(sg.data); {
				if sg.data[i] == 0 {
					i++
					continue
				}
				j := i
				for j < len(sg.data) && sg.data[j] != 0 {
					j++
				}
				off := sg.off + uint32(i)
				if n := len(runs); n > 0 && runs[n-1].end() == uint64(off) {
					runs[n-1].data = append(runs[n-1].data, sg.data[i:j]...)
				} else {
					runs = append(runs, segment{off: off, data: sg.data[i:j:j]})
				}
				i = j
			}
		}
	}
	return runs, nil
}

// merge sorts the segments by offset and joins those at most gap bytes
// apart. Segments that do not overlap write each byte at most once, so
// their order does not matter; overlapping ones (where the later segment
// wins) are refused.
func merge(segs []segment, gap int) ([]segment, error) {
	sorted := slices.Clone(segs)
	slices.SortStableFunc(sorted, func(a, b segment) int { return cmp.Compare(a.off, b.off) })
	var out []segment
	for i, s := range sorted {
		if i > 0 && uint64(s.off) < sorted[i-1].end() {
			return nil, fmt.Errorf("%w: the segments at %d (%d bytes) and %d overlap",
				ErrUnsupported, sorted[i-1].off, len(sorted[i-1].data), s.off)
		}
		if n := len(out); n > 0 && uint64(s.off)-out[n-1].end() <= uint64(gap) {
			last := &out[n-1]
			last.data = append(last.data, make([]byte, uint64(s.off)-last.end())...)
			last.data = append(last.data, s.data...)
			continue
		}
		// A copy: the merged segment grows, and must not write into mod.
		out = append(out, segment{off: s.off, data: append([]byte(nil), s.data...)})
	}
	return out, nil
}

func encodeData(segs []segment) []byte {
	n := 5
	for _, s := range segs {
		n += len(s.data) + 16
	}
	b := make([]byte, 0, n)
	b = appendUleb(b, uint64(len(segs)))
	for _, s := range segs {
		b = append(b, 0x00, 0x41) // active, memory 0; i32.const
		b = appendSleb(b, int64(int32(s.off)))
		b = append(b, 0x0b) // end
		b = appendUleb(b, uint64(len(s.data)))
		b = append(b, s.data...)
	}
	return b
}

func writeSection(out *bytes.Buffer, id byte, body []byte) {
	out.WriteByte(id)
	out.Write(appendUleb(nil, uint64(len(body))))
	out.Write(body)
}

// section is one section of a module: its id, its body, and its raw bytes
// (id and size included), which Pack copies unchanged.
type section struct {
	id   byte
	at   int // offset of the body in the module
	body []byte
	raw  []byte
}

func sections(mod []byte) ([]section, error) {
	if !bytes.HasPrefix(mod, header) {
		return nil, ErrNotWasm
	}
	var secs []section
	r := reader{b: mod, pos: len(header)}
	data := false
	for r.pos < len(mod) {
		start := r.pos
		id := r.byte()
		size := r.uleb(32)
		if r.err != nil {
			return nil, r.err
		}
		if size > uint64(len(mod)-r.pos) {
			return nil, fmt.Errorf("%w: section %d at %d: size %d runs past the end", ErrMalformed, id, start, size)
		}
		end := r.pos + int(size)
		if id == sectionData {
			if data {
				return nil, fmt.Errorf("%w: a second data section at %d", ErrMalformed, start)
			}
			data = true
		}
		secs = append(secs, section{id: id, at: r.pos, body: mod[r.pos:end], raw: mod[start:end]})
		r.pos = end
	}
	return secs, nil
}

func dataSegments(s section) ([]segment, error) {
	r := reader{b: s.body}
	n := r.uleb(32)
	if r.err != nil {
		return nil, r.fail(s, "segment count")
	}
	if n > uint64(len(s.body)) { // each segment takes at least one byte
		return nil, fmt.Errorf("%w: data section at %d: %d segments in %d bytes", ErrMalformed, s.at, n, len(s.body))
	}
	segs := make([]segment, 0, n)
	for i := range n {
		at := r.pos
		switch kind := r.uleb(32); {
		case r.err != nil:
			return nil, r.fail(s, fmt.Sprintf("segment %d", i))
		case kind == 2: // active with a memory index: only memory 0 here
			if m := r.uleb(32); r.err == nil && m != 0 {
				return nil, fmt.Errorf("%w: segment %d at %d: memory %d", ErrUnsupported, i, s.at+at, m)
			}
		case kind != 0:
			return nil, fmt.Errorf("%w: segment %d at %d: kind %d (only active segments with a constant offset)", ErrUnsupported, i, s.at+at, kind)
		}
		if op := r.byte(); r.err == nil && op != 0x41 {
			return nil, fmt.Errorf("%w: segment %d at %d: offset is not i32.const (opcode %#x)", ErrUnsupported, i, s.at+at, op)
		}
		off := r.sleb(32)
		if end := r.byte(); r.err == nil && end != 0x0b {
			return nil, fmt.Errorf("%w: segment %d at %d: offset expression has more than i32.const", ErrUnsupported, i, s.at+at)
		}
		size := r.uleb(32)
		if r.err != nil {
			return nil, r.fail(s, fmt.Sprintf("segment %d", i))
		}
		if size > uint64(len(s.body)-r.pos) {
			return nil, fmt.Errorf("%w: segment %d at %d: %d bytes run past the section", ErrMalformed, i, s.at+at, size)
		}
		segs = append(segs, segment{off: uint32(int32(off)), data: s.body[r.pos : r.pos+int(size)]})
		r.pos += int(size)
	}
	if r.pos != len(s.body) {
		return nil, fmt.Errorf("%w: data section at %d: %d bytes after the last segment", ErrMalformed, s.at, len(s.body)-r.pos)
	}
	return segs, nil
}

// reader decodes the module's integers; the first error sticks.
type reader struct {
	b   []byte
	pos int
	err error
}

func (r *reader) fail(s section, what string) error {
	return fmt.Errorf("data section at %d: %s: %w", s.at, what, r.err)
}

func (r *reader) byte() byte {
	if r.err != nil {
		return 0
	}
	if r.pos >= len(r.b) {
		r.err = fmt.Errorf("%w: unexpected end at %d", ErrMalformed, r.pos)
		return 0
	}
	c := r.b[r.pos]
	r.pos++
	return c
}

// uleb reads an unsigned LEB128 integer of at most bits bits.
func (r *reader) uleb(bits uint) uint64 {
	var v uint64
	for shift := uint(0); ; shift += 7 {
		start := r.pos
		c := r.byte()
		if r.err != nil {
			return 0
		}
		if shift >= bits || (shift+7 > bits && c&0x7f>>(bits-shift) != 0) {
			r.err = fmt.Errorf("%w: integer too large at %d", ErrMalformed, start)
			return 0
		}
		v |= uint64(c&0x7f) << shift
		if c&0x80 == 0 {
			return v
		}
	}
}

// sleb reads a signed LEB128 integer of at most bits bits.
func (r *reader) sleb(bits uint) int64 {
	var v int64
	for shift := uint(0); ; shift += 7 {
		start := r.pos
		c := r.byte()
		if r.err != nil {
			return 0
		}
		if shift >= bits {
			r.err = fmt.Errorf("%w: integer too large at %d", ErrMalformed, start)
			return 0
		}
		v |= int64(c&0x7f) << shift
		if c&0x80 == 0 {
			if shift+7 < 64 && c&0x40 != 0 {
				v |= -1 << (shift + 7)
			}
			if v < -1<<(bits-1) || v >= 1<<(bits-1) {
				r.err = fmt.Errorf("%w: integer too large at %d", ErrMalformed, start)
				return 0
			}
			return v
		}
	}
}

func appendUleb(b []byte, v uint64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v == 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func appendSleb(b []byte, v int64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}
