package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// MaxSize is the largest configuration Parse accepts, in bytes.
const MaxSize = 1 << 20

// Parse decodes and validates a JSON configuration and returns it with every
// default filled in. Unknown fields are errors; every error names the field
// path and the value (a *FieldError). Empty input (or only white space)
// yields Default().
func Parse(data []byte) (*Config, error) {
	if len(data) > MaxSize {
		return nil, &FieldError{Field: "(document)", Value: num(int64(len(data))) + " bytes", Err: because(ErrRange, "a configuration may have at most %d bytes", MaxSize)}
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return Default(), nil
	}
	// First pass: a generic tree, checked against the shape of Config so
	// that unknown fields and wrong types are reported with their path,
	// which encoding/json does not do.
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return nil, syntaxError(data, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &FieldError{Field: "(document)", Err: because(ErrSyntax, "invalid JSON: data after the top-level object")}
	}
	if _, ok := tree.(map[string]any); !ok {
		return nil, &FieldError{Field: "(document)", Value: describe(tree), Err: because(ErrType, "must be a JSON object")}
	}
	if err := checkShape("", tree, reflect.TypeFor[Config]()); err != nil {
		return nil, err
	}
	// Second pass: the real decode, strict as well.
	var c Config
	dec = json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c.fillDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// syntaxError turns a JSON decoding error into a FieldError with the line
// and column.
func syntaxError(data []byte, err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		line, col := position(data, se.Offset)
		return &FieldError{Field: fmt.Sprintf("line %d, column %d", line, col), Err: because(ErrSyntax, "invalid JSON: %v", err)}
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return &FieldError{Field: "(document)", Err: because(ErrSyntax, "invalid JSON: unexpected end of input")}
	}
	return &FieldError{Field: "(document)", Err: because(ErrSyntax, "invalid JSON: %v", err)}
}

func position(data []byte, off int64) (line, col int) {
	off = min(max(off, 0), int64(len(data)))
	before := data[:off]
	line = bytes.Count(before, []byte("\n")) + 1
	col = int(off) - bytes.LastIndexByte(before, '\n')
	return line, col
}

// checkShape reports the first field of v, in document order where JSON
// keeps one, that t does not have or whose JSON type does not fit.
func checkShape(path string, v any, t reflect.Type) error {
	if v == nil {
		return nil // null leaves the zero value, which validation judges
	}
	bad := func(want string) error {
		return &FieldError{Field: pathOr(path), Value: describe(v), Err: because(ErrType, "must be %s", want)}
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return bad("an object")
		}
		for _, k := range sortedKeys(m) {
			f, ok := fieldByTag(t, k)
			if !ok {
				return &FieldError{Field: join(path, k), Err: because(ErrUnknownField, "unknown field (known: %s)", strings.Join(tags(t), ", "))}
			}
			if err := checkShape(join(path, k), m[k], f.Type); err != nil {
				return err
			}
		}
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			return bad("an object")
		}
		for _, k := range sortedKeys(m) {
			at := join(path, k)
			if path == "api_keys" {
				at = keyField(k) // a raw key put there by mistake stays out of the error
			}
			if err := checkShape(at, m[k], t.Elem()); err != nil {
				return err
			}
		}
	case reflect.Slice:
		a, ok := v.([]any)
		if !ok {
			return bad("an array")
		}
		for i, e := range a {
			if err := checkShape(fmt.Sprintf("%s[%d]", path, i), e, t.Elem()); err != nil {
				return err
			}
		}
	case reflect.String:
		if _, ok := v.(string); !ok {
			return bad("a string")
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			return bad("true or false")
		}
	case reflect.Int, reflect.Int64:
		n, ok := v.(json.Number)
		if !ok {
			return bad("an integer")
		}
		if _, err := strconv.ParseInt(n.String(), 10, 64); err != nil {
			return bad("an integer between -9223372036854775808 and 9223372036854775807")
		}
	default:
		return bad(t.Kind().String())
	}
	return nil
}

func fieldByTag(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if tagName(f) == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func tags(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		if n := tagName(t.Field(i)); n != "" && n != "-" {
			out = append(out, n)
		}
	}
	return out
}

func tagName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	return name
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	// Deterministic: the same document always reports the same error.
	slices.Sort(keys)
	return keys
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func pathOr(path string) string {
	if path == "" {
		return "(document)"
	}
	return path
}

// describe formats a decoded JSON value for an error message.
func describe(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case string:
		return quote(v)
	case json.Number:
		return v.String()
	case bool:
		return strconv.FormatBool(v)
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprint(v)
}
