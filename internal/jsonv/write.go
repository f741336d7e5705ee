package jsonv

import (
	"strconv"
	"unicode/utf8"
)

// Encoder writes one JSON document into a byte slice, in the order its
// methods are called; it puts the commas and colons. Its strings are
// escaped exactly as encoding/json escapes them.
//
//	var e jsonv.Encoder
//	e.BeginObject()
//	e.String("title", "Too Many Requests")
//	e.Int("status", 429)
//	e.EndObject()
//	body := e.Bytes()
//
// Its methods are marked noinline: inlined, each call site would carry its
// own copy of the separator logic, 3.5 KB of the Worker's gzip size.
type Encoder struct {
	buf   []byte
	comma bool // a value was written at this level: the next needs a comma
}

// Bytes returns the document written so far.
func (e *Encoder) Bytes() []byte { return e.buf }

// Reset empties e, keeping its buffer.
func (e *Encoder) Reset() { e.buf, e.comma = e.buf[:0], false }

// Key writes an object key; the next call writes its value.
//
//go:noinline
func (e *Encoder) Key(k string) {
	e.sep()
	e.buf = AppendString(e.buf, k)
	e.buf = append(e.buf, ':')
	e.comma = false
}

// BeginObject starts an object, as a value.
//
//go:noinline
func (e *Encoder) BeginObject() { e.sep(); e.buf = append(e.buf, '{'); e.comma = false }

// EndObject ends the innermost object.
//
//go:noinline
func (e *Encoder) EndObject() { e.buf = append(e.buf, '}'); e.comma = true }

// BeginArray starts an array, as a value.
//
//go:noinline
func (e *Encoder) BeginArray() { e.sep(); e.buf = append(e.buf, '['); e.comma = false }

// EndArray ends the innermost array.
//
//go:noinline
func (e *Encoder) EndArray() { e.buf = append(e.buf, ']'); e.comma = true }

// StringValue writes a string value.
//
//go:noinline
func (e *Encoder) StringValue(s string) { e.sep(); e.buf = AppendString(e.buf, s); e.comma = true }

// IntValue writes an integer value.
//
//go:noinline
func (e *Encoder) IntValue(n int64) { e.sep(); e.buf = strconv.AppendInt(e.buf, n, 10); e.comma = true }

// BoolValue writes true or false.
//
//go:noinline
func (e *Encoder) BoolValue(b bool) { e.sep(); e.buf = strconv.AppendBool(e.buf, b); e.comma = true }

// NullValue writes null.
//
//go:noinline
func (e *Encoder) NullValue() { e.sep(); e.buf = append(e.buf, "null"...); e.comma = true }

// String writes the member k: s.
//
//go:noinline
func (e *Encoder) String(k, s string) { e.Key(k); e.StringValue(s) }

// Int writes the member k: n.
//
//go:noinline
func (e *Encoder) Int(k string, n int64) { e.Key(k); e.IntValue(n) }

// Bool writes the member k: b.
//
//go:noinline
func (e *Encoder) Bool(k string, b bool) { e.Key(k); e.BoolValue(b) }

// Strings writes the member k: an array of ss (an empty array for none).
func (e *Encoder) Strings(k string, ss []string) {
	e.Key(k)
	e.BeginArray()
	for _, s := range ss {
		e.StringValue(s)
	}
	e.EndArray()
}

func (e *Encoder) sep() {
	if e.comma {
		e.buf = append(e.buf, ',')
	}
}

const hex = "0123456789abcdef"

// AppendString appends s as a JSON string, escaped as encoding/json
// escapes it by default: control characters, quote and backslash; <, >
// and & (so the output is safe inside HTML); U+2028 and U+2029; invalid
// UTF-8 becomes U+FFFD.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
