//go:build js

package jsonv

import (
	"math"
	"strconv"
	"strings"
	"syscall/js"
)

func parse(data []byte) (v any, err error) {
	defer func() {
		// JSON.parse throws a SyntaxError, which syscall/js raises as a
		// panic carrying a js.Error.
		if r := recover(); r != nil {
			je, ok := r.(js.Error)
			if !ok {
				panic(r)
			}
			msg := je.Get("message").String()
			v, err = nil, &SyntaxError{Offset: position(msg), Msg: msg}
		}
	}()
	parsed := js.Global().Get("JSON").Call("parse", string(data))
	return fromJS(parsed, 0)
}

// position reads the offset from a V8 message such as "Expected ',' or '}'
// after property value in JSON at position 34 (line 3 column 14)"; -1 when
// there is none. V8 counts UTF-16 code units, which are bytes in ASCII
// documents.
func position(msg string) int64 {
	_, after, ok := strings.Cut(msg, " at position ")
	if !ok {
		return -1
	}
	end := 0
	for end < len(after) && after[end] >= '0' && after[end] <= '9' {
		end++
	}
	n, err := strconv.ParseInt(after[:end], 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// integral: JSON.parse numbers reach Number as integer digits whenever they
// are integral and exact (fromJS), so there is nothing more to read.
func integral(Number) (int64, bool) { return 0, false }

var (
	jsString   = js.Global().Get("String")
	isArray    = js.Global().Get("Array").Get("isArray")
	objectKeys = js.Global().Get("Object").Get("keys")
)

// fromJS copies a value JSON.parse returned into Go values.
func fromJS(v js.Value, d int) (any, error) {
	if d >= MaxDepth {
		return nil, &SyntaxError{Offset: -1, Msg: "nested more than " + strconv.Itoa(MaxDepth) + " levels deep"}
	}
	switch v.Type() {
	case js.TypeNull:
		return nil, nil
	case js.TypeBoolean:
		return v.Bool(), nil
	case js.TypeNumber:
		// Integers as decimal digits, which Number.Int64 reads without
		// strconv's float code; other numbers as JavaScript writes them.
		f := v.Float()
		switch {
		case f == math.Trunc(f) && math.Abs(f) < 1<<53:
			return Number(strconv.FormatInt(int64(f), 10)), nil
		case math.IsInf(f, 1):
			return Number("1e999"), nil // beyond float64: any such literal will do
		case math.IsInf(f, -1):
			return Number("-1e999"), nil
		}
		s := jsString.Invoke(v).String() // 1.5, 1e+21
		if !strings.ContainsAny(s, ".eE") {
			// An integer beyond 2^53, which JSON.parse may have rounded:
			// not an exact integer, as natively.
			s += ".0"
		}
		return Number(s), nil
	case js.TypeString:
		return v.String(), nil
	case js.TypeObject:
		if isArray.Invoke(v).Bool() {
			out := make([]any, v.Length())
			for i := range out {
				e, err := fromJS(v.Index(i), d+1)
				if err != nil {
					return nil, err
				}
				out[i] = e
			}
			return out, nil
		}
		keys := objectKeys.Invoke(v)
		out := make(map[string]any, keys.Length())
		for i := range keys.Length() {
			k := keys.Index(i).String()
			e, err := fromJS(v.Get(k), d+1)
			if err != nil {
				return nil, err
			}
			out[k] = e
		}
		return out, nil
	}
	return nil, &SyntaxError{Offset: -1, Msg: "JSON.parse returned a " + v.Type().String()}
}
