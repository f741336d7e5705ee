package jsonv_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/slidegate/slidegate/internal/jsonv"
)

func TestRepeated(t *testing.T) {
	name := func(n string) jsonv.Step { return jsonv.Step{Name: n} }
	index := func(i int) jsonv.Step { return jsonv.Step{Index: i, InArray: true} }
	tests := []struct {
		name, doc string
		want      []jsonv.Step // nil: none repeated
	}{
		{"top level", `{"a": 1, "b": 2, "a": 3}`, []jsonv.Step{name("a")}},
		{"written with an escape", `{"key": 1, "k\u0065y": 2}`, []jsonv.Step{name("key")}},
		{"in an array's object", `{"l": [{"n": 1}, {"n": 2, "w": 3, "n": 4}]}`, []jsonv.Step{name("l"), index(1), name("n")}},
		{"after nested arrays", `{"i": {"h": [[1], ["}"]], "t": [], "h": []}}`, []jsonv.Step{name("i"), name("h")}},
		{"the first found", `{"a": {"x": 1, "x": 2}, "a": 3}`, []jsonv.Step{name("a"), name("x")}},
		{"empty name twice", `{"": 1, "": 2}`, []jsonv.Step{name("")}},
		{"same name in sibling objects", `{"p": {"f": [{"n": 1}]}, "q": {"f": [{"n": 1}]}}`, nil},
		{"same name at two depths", `{"i": {"i": 1}, "h": {"i": 2}}`, nil},
		{"names inside strings", `{"t": "\"a\": {,[", "a": true, "o": ["}", "\\", "a"]}`, nil},
		{"not an object", `"a"`, nil},
		{"array of scalars", `[1, "a", "a"]`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := jsonv.Repeated([]byte(tt.doc))
			if ok != (tt.want != nil) || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Repeated(%s) = %+v, %v; want %+v", tt.doc, got, ok, tt.want)
			}
		})
	}
}

// FuzzRepeated holds Repeated to the same search done with encoding/json's
// tokens, on every document Parse accepts.
func FuzzRepeated(f *testing.F) {
	for _, s := range []string{`{"a":1,"a":2}`, `{"a":[{"b":1},{"b":2,"b":3}]}`, `{"\u0061":1,"a":2}`, `["a","a"]`, `{"a":"\"a\"","b":{"a":1}}`, `{"a":{"b":1},"a":{"b":1,"b":2}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, err := jsonv.Parse(data); err != nil {
			return
		}
		got, ok := jsonv.Repeated(data)
		want, wok := repeatedTokens(data)
		if ok != wok || !reflect.DeepEqual(got, want) {
			t.Fatalf("Repeated(%q) = %+v, %v; encoding/json's tokens: %+v, %v", data, got, ok, want, wok)
		}
	})
}

// repeatedTokens is Repeated done with encoding/json's tokens.
func repeatedTokens(data []byte) ([]jsonv.Step, bool) {
	type container struct {
		step   jsonv.Step
		array  bool
		index  int
		name   string
		atName bool
		names  map[string]bool
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	var stack []*container
	// value notes that a value ended in the innermost container.
	value := func() {
		if len(stack) == 0 {
			return
		}
		if c := stack[len(stack)-1]; c.array {
			c.index++
		} else {
			c.atName = true
		}
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil, false
		}
		switch tok := tok.(type) {
		case json.Delim:
			switch tok {
			case '{', '[':
				var step jsonv.Step
				if len(stack) > 0 {
					if c := stack[len(stack)-1]; c.array {
						step = jsonv.Step{Index: c.index, InArray: true}
					} else {
						step = jsonv.Step{Name: c.name}
					}
				}
				stack = append(stack, &container{step: step, array: tok == '[', atName: tok == '{', names: map[string]bool{}})
			default:
				stack = stack[:len(stack)-1]
				value()
			}
		case string:
			if c := len(stack); c > 0 && stack[c-1].atName {
				top := stack[c-1]
				top.atName, top.name = false, tok
				if top.names[tok] {
					var path []jsonv.Step
					for _, o := range stack[1:] {
						path = append(path, o.step)
					}
					return append(path, jsonv.Step{Name: tok}), true
				}
				top.names[tok] = true
				continue
			}
			value()
		default:
			value()
		}
	}
}
