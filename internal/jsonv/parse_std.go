//go:build !js

package jsonv

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
)

func parse(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		var se *json.SyntaxError
		switch {
		case errors.As(err, &se):
			// encoding/json counts the offending byte in its Offset.
			return nil, &SyntaxError{Offset: se.Offset - 1, Msg: se.Error()}
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			return nil, &SyntaxError{Offset: int64(len(data)), Msg: "unexpected end of JSON input"}
		}
		return nil, &SyntaxError{Offset: -1, Msg: err.Error()}
	}
	end := dec.InputOffset()
	if _, err := dec.Token(); err != io.EOF {
		// At the first byte after the value and its white space, where
		// scan stops too (Token has read on).
		rest := data[end:]
		return nil, &SyntaxError{Offset: end + int64(len(rest)-len(bytes.TrimLeft(rest, " \t\r\n"))), Msg: Trailing}
	}
	if depth(v, 1) > MaxDepth { // scan checks as it goes; encoding/json allows 10,000
		return nil, &SyntaxError{Offset: -1, Msg: tooDeep}
	}
	return numbers(v), nil
}

// depth is how deeply v nests, stopping once past MaxDepth.
func depth(v any, d int) int {
	if d > MaxDepth {
		return d
	}
	most := d
	switch v := v.(type) {
	case map[string]any:
		for _, e := range v {
			most = max(most, depth(e, d+1))
		}
	case []any:
		for _, e := range v {
			most = max(most, depth(e, d+1))
		}
	}
	return most
}

// numbers replaces every json.Number in v with a Number.
func numbers(v any) any {
	switch v := v.(type) {
	case json.Number:
		return Number(v)
	case map[string]any:
		for k, e := range v {
			v[k] = numbers(e)
		}
	case []any:
		for i, e := range v {
			v[i] = numbers(e)
		}
	}
	return v
}
