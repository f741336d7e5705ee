package jsonv_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/slidegate/slidegate/internal/jsonv"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in   string
		want any
	}{
		{`{}`, map[string]any{}},
		{` {"a": [1, -2.5, "x", true, false, null, {}]} `, map[string]any{"a": []any{jsonv.Number("1"), jsonv.Number("-2.5"), "x", true, false, nil, map[string]any{}}}},
		{`"é\u00e9\n"`, "éé\n"},
		{`"\ud83d\ude00 \\ud800"`, "😀 \\ud800"},
		{`[]`, []any{}},
		{`{"a": 1, "a": 2}`, map[string]any{"a": jsonv.Number("2")}}, // the last duplicate wins, as in JSON.parse
		{`999999999999999`, jsonv.Number("999999999999999")},
		{`null`, nil},
	}
	for _, tt := range tests {
		got, err := jsonv.Parse([]byte(tt.in))
		if err != nil {
			t.Errorf("Parse(%s): %v", tt.in, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Parse(%s) = %#v, want %#v", tt.in, got, tt.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	deep := strings.Repeat("[", jsonv.MaxDepth+1) + strings.Repeat("]", jsonv.MaxDepth+1)
	for _, in := range []string{"\"\xff\"", `"\ud800"`, `"\udc00\ud800"`, `["\ud83d"]`, ``, ` `, `{`, `{"a":}`, `{"a":1}x`, `{} {}`, `nul`, `'a'`, `{a:1}`, `[1,]`, deep} {
		v, err := jsonv.Parse([]byte(in))
		var se *jsonv.SyntaxError
		if !errors.As(err, &se) || se.Msg == "" {
			t.Errorf("Parse(%q) = %#v, %v; want a *SyntaxError", in, v, err)
		}
	}
	ok := strings.Repeat("[", jsonv.MaxDepth) + strings.Repeat("]", jsonv.MaxDepth)
	if _, err := jsonv.Parse([]byte(ok)); err != nil {
		t.Errorf("Parse(%d levels): %v", jsonv.MaxDepth, err)
	}
}

// TestNumberInt64 reads numbers as Parse returns them, which under GOOS=js
// is JSON.parse's float64 written back as text.
func TestNumberInt64(t *testing.T) {
	tests := []struct {
		n    string
		want int64
		ok   bool
	}{
		{"0", 0, true},
		{"-0", 0, true},
		{"42", 42, true},
		{"1.0", 1, true},
		{"1e3", 1000, true},
		{"9007199254740991", 1<<53 - 1, true},
		{"-9007199254740991", -(1<<53 - 1), true},
		{"9223372036854775808", 0, false},
		{"1.5", 0, false},
		{"25e-1", 0, false},
		{"1.50e1", 15, true},
		{"-0.0", 0, true},
		{"0e999", 0, true},
		{"1e-999", 0, false},
		{"123e-2", 0, false},
		{"9007199254740991.000", 1<<53 - 1, true},
		{"1e300", 0, false},
		{"18014398509481984.0", 0, false}, // 2^54: beyond exact float integers
	}
	for _, tt := range tests {
		v, err := jsonv.Parse([]byte(tt.n))
		if err != nil {
			t.Fatal(err)
		}
		got, err := v.(jsonv.Number).Int64()
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("Number(%s).Int64() = %d, %v; want %d, ok %v", tt.n, got, err, tt.want, tt.ok)
		}
	}
}

func TestEncoder(t *testing.T) {
	var e jsonv.Encoder
	e.BeginObject()
	e.String("type", "about:blank")
	e.Int("status", 429)
	e.Bool("allowed", false)
	e.Strings("violated", []string{"minute", "day"})
	e.Strings("none", nil)
	e.Key("rules")
	e.BeginArray()
	for _, name := range []string{"a", "b"} {
		e.BeginObject()
		e.String("name", name)
		e.Key("x")
		e.NullValue()
		e.EndObject()
	}
	e.EndArray()
	e.Key("n")
	e.IntValue(-7)
	e.EndObject()
	const want = `{"type":"about:blank","status":429,"allowed":false,"violated":["minute","day"],"none":[],"rules":[{"name":"a","x":null},{"name":"b","x":null}],"n":-7}`
	if got := string(e.Bytes()); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	e.Reset()
	e.BeginArray()
	e.EndArray()
	if got := string(e.Bytes()); got != "[]" {
		t.Errorf("after Reset: %s", got)
	}
}

// TestAppendStringLikeEncodingJSON pins the escaping to encoding/json's, so
// bodies read the same on every platform.
func TestAppendStringLikeEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "plain", `q"b\s`, "\x00\x01\x1f\x7f\b\f\n\r\t", "<a&b>", "\u2028\u2029", "\xff\xfe", "é漢字🙂", "a\xc3"} {
		checkString(t, s)
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "a\"b", "\u2028<&>", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(checkString)
}

func checkString(t *testing.T, s string) {
	want, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if got := jsonv.AppendString(nil, s); string(got) != string(want) {
		t.Errorf("AppendString(%q) = %s, want %s", s, got, want)
	}
}

func TestSyntaxErrorOffset(t *testing.T) {
	// Both parsers place an error at the offending byte, counted from 0:
	// encoding/json counts that byte in its own Offset, and after the
	// value it reads on past white space. They say the same of it (the
	// check API's 400 quotes it).
	for _, c := range []struct {
		doc  string
		want int64
	}{
		{`{"shadow": 1]`, 12}, // the last byte: not "unexpected end"
		{`{,}`, 1},
		{`[1,]`, 3},
		{`[1 2]`, 3},
		{`{"a" 1}`, 5},
		{"\"a\x01\"", 2},
		{`{"a":1}x`, 7},
		{`{"a":1} {`, 8},
		{`01`, 1},
		{`"\`, 2}, // cut short after a backslash: the end, not the backslash
		{`{"key": "a\"\`, 13},
	} {
		_, perr := jsonv.Parse([]byte(c.doc))
		for name, parse := range map[string]func([]byte) (any, error){"Parse": jsonv.Parse, "scan": jsonv.Scan} {
			_, err := parse([]byte(c.doc))
			se, ok := err.(*jsonv.SyntaxError)
			if !ok || se.Offset != c.want {
				t.Errorf("%s(%q) = %#v, want a SyntaxError at offset %d", name, c.doc, err, c.want)
			}
			if pe, _ := perr.(*jsonv.SyntaxError); ok && pe != nil && se.Msg != pe.Msg {
				t.Errorf("%s(%q) says %q, Parse %q", name, c.doc, se.Msg, pe.Msg)
			}
		}
	}
}
