package jsonv_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math/big"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/slidegate/slidegate/internal/jsonv"
)

// FuzzParsersAgree holds the Worker's parser (scan) and Parse to
// encoding/json: the same value for every document, or an error from all.
func FuzzParsersAgree(f *testing.F) {
	for _, s := range []string{`{"a":[1,2.5e3,"x\u00e9\n",true,null,{}]}`, `{"a":1,"a":2}`, `"\x"`, "\"\x01\"", `01`, `1.`, `-`, `[1,]`, `{"a":1}x`, `nan`, `Infinity`, `"\ud800"`, `"\ud83d\ude00"`, "\"\xff\"", `1e999`, `1e2`, `-0`, `123456789012345678901234567890`, ` [ ] `, `{"":0}`, `{"__proto__":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		want, werr := reference(data)
		for name, parse := range map[string]func([]byte) (any, error){"Parse": jsonv.Parse, "scan": scanChecked} {
			got, gerr := parse(data)
			if (gerr == nil) != (werr == nil) {
				t.Fatalf("%q: %s: %v; encoding/json: %v", data, name, gerr, werr)
			}
			if gerr == nil && !sameValue(got, want) {
				t.Fatalf("%q: %s %#v, encoding/json %#v", data, name, got, want)
			}
		}
	})
}

// scanChecked is scan behind Parse's text check.
func scanChecked(data []byte) (any, error) {
	if !jsonv.ValidText(data) {
		return nil, io.ErrUnexpectedEOF
	}
	return jsonv.Scan(data)
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

// integer is Number.Int64 as documented, exactly, with math/big.
func integer(s string) (int64, bool) {
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return i, true
	}
	mant, exp := s, 0
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.Atoi(s[i+1:])
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return 0, false
		}
		mant, exp = s[:i], e
	}
	var r big.Rat
	if _, ok := r.SetString(mant); !ok {
		return 0, false
	}
	if r.Sign() == 0 {
		return 0, true
	}
	if exp > 10000 || exp < -10000 {
		return 0, false // beyond 2^53, or a fraction: the mantissa is short
	}
	r.Mul(&r, new(big.Rat).SetFrac(pow10(max(exp, 0)), pow10(max(-exp, 0))))
	if !r.IsInt() || r.Num().CmpAbs(big.NewInt(1<<53)) >= 0 {
		return 0, false
	}
	return r.Num().Int64(), true
}

func pow10(n int) *big.Int { return new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(n)), nil) }
