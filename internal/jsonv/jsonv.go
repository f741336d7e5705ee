// Package jsonv reads JSON documents into plain Go values and writes JSON
// objects, without package encoding/json in the Worker's Wasm build.
//
// Parse uses encoding/json natively and a small parser of its own (scan)
// under GOOS=js, where encoding/json (and its reflection tables) would add
// about a tenth to the Worker bundle. Both yield the same values
// (FuzzParsersAgree): map[string]any, []any, string, Number, bool and nil.
// Validation (which fields exist, which types they take) belongs to the
// caller, which can then name the field path of every error.
package jsonv

import (
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxDepth is how deeply Parse lets arrays and objects nest.
const MaxDepth = 64

// Number is a JSON number as written, so that integers keep every digit.
type Number string

// Int64 returns n as an integer, or an error when it is not one or does not
// fit. Integral numbers written with a fraction or an exponent (1.0, 1e3)
// are integers too, below 2^53 in magnitude, as they are to JavaScript.
func (n Number) Int64() (int64, error) {
	i, err := strconv.ParseInt(string(n), 10, 64)
	if err == nil {
		return i, nil
	}
	if i, ok := integral(n); ok {
		return i, nil
	}
	return 0, err
}

// Trailing is the Msg of a SyntaxError for data after the top-level value.
const Trailing = "data after the top-level value"

// SyntaxError is a document that is not one JSON value.
type SyntaxError struct {
	// Offset is the byte offset at which the error was found, or -1 when
	// there is no one place.
	Offset int64
	Msg    string
}

func (e *SyntaxError) Error() string { return e.Msg }

// Parse decodes data, which must hold exactly one JSON value (surrounded by
// white space at most) nested at most MaxDepth deep. Errors are
// *SyntaxError, never wrapped. The document must be UTF-8, and a \u escape
// of a UTF-16 surrogate must be one of a pair: the two parsers would make
// different strings of either.
func Parse(data []byte) (any, error) {
	if err := checkText(data); err != nil {
		return nil, err
	}
	return parse(data)
}

// tooDeep is the error of a document nested more than MaxDepth deep.
var tooDeep = "nested more than " + strconv.Itoa(MaxDepth) + " levels deep"

// SortedKeys returns the keys of a parsed object in order, so that a
// document with several faults always reports the same one first.
func SortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// TypeName names the JSON type of a parsed value: "string", "number",
// "boolean", "array", "object" or "null".
func TypeName(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case Number:
		return "number"
	case bool:
		return "boolean"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "null"
}

// checkText rejects invalid UTF-8 and lone surrogate escapes. Outside
// strings a valid document has no backslash, so the scan need not track
// where strings are.
func checkText(data []byte) error {
	if !utf8.Valid(data) {
		return &SyntaxError{Offset: -1, Msg: "invalid UTF-8"}
	}
	for i := 0; i < len(data); i++ {
		if data[i] != '\\' {
			continue
		}
		r, ok := escapedRune(data, i)
		if !ok || !utf16.IsSurrogate(r) {
			i++ // skip the escaped character
			continue
		}
		low, ok := escapedRune(data, i+6)
		if r < 0xdc00 && ok && low >= 0xdc00 && low <= 0xdfff {
			i += 11 // a pair
			continue
		}
		return &SyntaxError{Offset: int64(i), Msg: "lone UTF-16 surrogate escape " + string(data[i:i+6])}
	}
	return nil
}

// escapedRune reads a \uXXXX escape at data[i:].
func escapedRune(data []byte, i int) (rune, bool) {
	if i+6 > len(data) || data[i] != '\\' || data[i+1] != 'u' {
		return 0, false
	}
	n, err := strconv.ParseUint(string(data[i+2:i+6]), 16, 16)
	return rune(n), err == nil
}
