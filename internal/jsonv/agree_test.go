package jsonv_test

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"reflect"
	"strconv"
	"testing"

	"github.com/slidegate/slidegate/internal/jsonv"
)

// FuzzParsersAgree holds Parse (JSON.parse under GOOS=js, where make test
// runs it in Node) to encoding/json: the same value for every document, or
// an error from both. Natively Parse is encoding/json, so the test checks
// the Number conversion and the depth and text checks alone.
func FuzzParsersAgree(f *testing.F) {
	for _, s := range []string{`{"a":[1,2.5e3,"x\u00e9\n",true,null,{}]}`, `{"a":1,"a":2}`, `"\x"`, "\"\x01\"", `01`, `1.`, `-`, `[1,]`, `{"a":1}x`, `nan`, `Infinity`, `"\ud800"`, `"\ud83d\ude00"`, "\"\xff\"", `1e999`, `1e2`, `-0`, `123456789012345678901234567890`, ` [ ] `, `{"":0}`, `{"__proto__":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, gerr := jsonv.Parse(data)
		want, werr := reference(data)
		if (gerr == nil) != (werr == nil) {
			t.Fatalf("%q: Parse: %v; encoding/json: %v", data, gerr, werr)
		}
		if gerr != nil {
			return
		}
		if !sameValue(got, want) {
			t.Fatalf("%q: Parse %#v, encoding/json %#v", data, got, want)
		}
	})
}

// reference is Parse done with encoding/json alone.
func reference(data []byte) (any, error) {
	if !jsonv.ValidText(data) {
		return nil, io.ErrUnexpectedEOF // Parse rejects these on every platform
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, io.ErrUnexpectedEOF
	}
	if depth(v) > jsonv.MaxDepth {
		return nil, io.ErrUnexpectedEOF
	}
	return v, nil
}

func depth(v any) int {
	d := 0
	switch v := v.(type) {
	case map[string]any:
		for _, e := range v {
			d = max(d, depth(e))
		}
	case []any:
		for _, e := range v {
			d = max(d, depth(e))
		}
	}
	return d + 1
}

// sameValue compares a Parse value with an encoding/json one: numbers by
// value (JSON.parse keeps a float64, not the literal).
func sameValue(got, want any) bool {
	switch w := want.(type) {
	case json.Number:
		g, ok := got.(jsonv.Number)
		if !ok {
			return false
		}
		gi, gerr := g.Int64()
		wi, wok := integer(string(w))
		if (gerr == nil) != wok {
			return false
		}
		if wok {
			return gi == wi
		}
		gf, _ := strconv.ParseFloat(string(g), 64)
		wf, _ := strconv.ParseFloat(string(w), 64)
		return gf == wf
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for k, e := range w {
			if ge, ok := g[k]; !ok || !sameValue(ge, e) {
				return false
			}
		}
		return true
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for i := range w {
			if !sameValue(g[i], w[i]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(got, want)
}

// integer is Number.Int64 as documented, done with strconv alone.
func integer(s string) (int64, bool) {
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return i, true
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f != math.Trunc(f) || math.Abs(f) >= 1<<53 {
		return 0, false
	}
	return int64(f), true
}
