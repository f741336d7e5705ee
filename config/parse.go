package config

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/slidegate/slidegate/internal/jsonv"
)

// MaxSize is the largest configuration Parse accepts, in bytes.
const MaxSize = 1 << 20

// Parse decodes and validates a JSON configuration and returns it with every
// default filled in. Unknown fields, and a member given twice in one
// object, are errors; every error names the field path and the value (a
// *FieldError). Empty input (or only white space) yields Default(); a
// leading byte order mark is ignored.
//
// Field names match exactly (encoding/json would also take "PLANS"), and a
// number is an integer when it has an integral value (1, 1.0 and 1e0 are
// the same number, as in JSON itself).
func Parse(data []byte) (*Config, error) {
	if len(data) > MaxSize {
		return nil, tooLarge(num(int64(len(data))) + " bytes")
	}
	if Blank(data) {
		return Default(), nil
	}
	// A leading UTF-8 byte order mark is ignored (RFC 8259 section 8.1
	// allows it), as the check API ignores it: Windows editors and
	// PowerShell's Out-File -Encoding utf8 write one, and it was refused
	// as "invalid character 'ï'", a character no editor shows.
	data = bytes.TrimPrefix(data, []byte("\ufeff"))
	tree, err := jsonv.Parse(data)
	if err != nil {
		return nil, syntaxError(data, err)
	}
	if _, ok := tree.(map[string]any); !ok {
		return nil, &FieldError{Field: "(document)", Value: describe(tree), Err: because(ErrType, "must be a JSON object")}
	}
	if at, ok := repeatedMember(data); ok {
		return nil, &FieldError{Field: at, Err: because(ErrDuplicate, "appears more than once in its object (JSON keeps only the last, so the others would be ignored)")}
	}
	var c Config
	d := decoder{fields: map[reflect.Type]map[string]int{}}
	if err := d.decode("", tree, reflect.ValueOf(&c).Elem(), false); err != nil {
		return nil, err
	}
	// Validated before the defaults are filled in, so that it knows which
	// fields the document left out (Validate judges them as the defaults).
	if err := c.Validate(); err != nil {
		if fe, ok := err.(*FieldError); ok {
			if s := d.huge[fe.Field]; s != "" {
				fe.Value = s // as written, not the bound it was kept as
			}
		}
		return nil, err
	}
	c.fillDefaults()
	return &c, nil
}

// Blank reports whether data is the empty document, which Parse takes for
// the defaults: nothing, or white space and a leading byte order mark
// alone.
func Blank(data []byte) bool {
	return len(bytes.TrimSpace(bytes.TrimPrefix(data, []byte("\ufeff")))) == 0
}

// Read reads a JSON configuration from r and parses it as Parse does. It
// reads at most one byte more than MaxSize: a larger document is refused
// without being read to its end, so that a file named by mistake (a log, a
// device such as /dev/zero, a pipe that never ends) neither takes the
// process's memory nor keeps it reading for ever.
func Read(r io.Reader) (*Config, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxSize+1))
	if err != nil {
		return nil, fmt.Errorf("config: read: %w", err)
	}
	if len(data) > MaxSize {
		return nil, tooLarge("more than " + num(MaxSize) + " bytes")
	}
	return Parse(data)
}

func tooLarge(size string) error {
	return &FieldError{Field: "(document)", Value: size, Err: because(ErrRange, "a configuration may have at most %d bytes", MaxSize)}
}

// syntaxError turns a JSON syntax error into a FieldError with the line and
// column, where the parser gives an offset.
func syntaxError(data []byte, err error) error {
	se, ok := err.(*jsonv.SyntaxError) // not errors.As: it links reflectlite into the Worker
	if !ok {
		return &FieldError{Field: "(document)", Err: because(ErrSyntax, "invalid JSON: %v", err)}
	}
	switch {
	case se.Offset >= int64(len(data)):
		return &FieldError{Field: "(document)", Err: because(ErrSyntax, "invalid JSON: unexpected end of input")}
	case se.Msg == jsonv.Trailing:
		return &FieldError{Field: "(document)", Err: because(ErrSyntax, "invalid JSON: data after the top-level object")}
	case se.Offset >= 0:
		line, col := position(data, se.Offset)
		return &FieldError{Field: fmt.Sprintf("line %d, column %d", line, col), Err: because(ErrSyntax, "invalid JSON: %s", wholeRune(data, se))}
	}
	if at := invalidUTF8(data); at >= 0 {
		// jsonv names no place for it; in a file of hundreds of lines,
		// one character saved in Latin-1 or Windows-1252 ("Zürich"
		// written by an editor that does not save UTF-8) was a hunt.
		line, col := position(data, int64(at))
		return &FieldError{Field: fmt.Sprintf("line %d, column %d", line, col), Err: because(ErrSyntax, "invalid JSON: invalid UTF-8 (byte 0x%02X; save the configuration as UTF-8)", data[at])}
	}
	return &FieldError{Field: "(document)", Err: because(ErrSyntax, "invalid JSON: %s", se.Msg)}
}

// position returns the line and column of the byte at off, both from 1.
// The column counts characters, as editors do, not bytes.
func position(data []byte, off int64) (line, col int) {
	off = min(max(off, 0), int64(len(data)))
	before := data[:off]
	line = bytes.Count(before, []byte("\n")) + 1
	for _, b := range before[bytes.LastIndexByte(before, '\n')+1:] {
		if utf8.RuneStart(b) {
			col++
		}
	}
	col++
	return line, col
}

// invalidUTF8 returns the offset of the first byte of data that is not
// part of a UTF-8 character, or -1.
func invalidUTF8(data []byte) int {
	for i := 0; i < len(data); {
		r, n := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return -1
}

// wholeRune names the character a syntax error is about when it is not
// ASCII. Both parsers name the offending byte, so the first byte of a
// no-break space (U+00A0, which pages and chat tools put in pasted
// indentation, and editors show as a space) was reported as 'Â', a
// character the file does not hold.
func wholeRune(data []byte, se *jsonv.SyntaxError) string {
	if se.Offset >= int64(len(data)) || data[se.Offset] < utf8.RuneSelf || !utf8.RuneStart(data[se.Offset]) {
		return se.Msg
	}
	r, _ := utf8.DecodeRune(data[se.Offset:])
	byteAsRune := "invalid character " + strconv.QuoteRune(rune(data[se.Offset]))
	if !strings.HasPrefix(se.Msg, byteAsRune) {
		return se.Msg
	}
	return "invalid character " + strconv.QuoteRune(r) + se.Msg[len(byteAsRune):]
}

// decoder remembers, per struct type, which field each JSON name sets: the
// Worker parses its configuration on every request, and reading the tags
// again for every key was a fifth of the parse.
type decoder struct {
	fields map[reflect.Type]map[string]int
	// huge holds, by path, the integers too large for their field's
	// type as written ("1e30"); decode keeps them as the type's bound.
	huge map[string]string
}

func (d *decoder) field(t reflect.Type, name string) (int, bool) {
	m, ok := d.fields[t]
	if !ok {
		m = make(map[string]int, t.NumField())
		for i := range t.NumField() {
			if n := tagName(t.Field(i)); n != "" && n != "-" {
				m[n] = i
			}
		}
		d.fields[t] = m
	}
	i, ok := m[name]
	return i, ok
}

// decode stores the JSON value v in dst, checked against dst's type: the
// first field of v, in key order, that the type does not have or whose JSON
// type does not fit is reported with its path. optional says that v is a
// member that may be left out (for its default), which a null's error
// advises.
//
// A null is no value of any field. Read as the zero value, it was a
// reading the document does not say: "plans": null took the three
// default plans, "headers": null the default key headers where an empty
// list means none, "check_token": null left the check API open, and
// "limit": null was reported as the limit 0.
func (d *decoder) decode(path string, v any, dst reflect.Value, optional bool) error {
	bad := func(want string) error {
		val, why := describe(v), "must be %s"
		switch {
		case v == nil && optional:
			why = "must be %s, not null (leave the field out for its default)"
		case v == nil:
			why = "must be %s, not null"
		case secret(path):
			val = kind(v) // a misplaced secret stays out of the error and the logs it reaches
		}
		return &FieldError{Field: pathOr(path), Value: val, Err: because(ErrType, why, want)}
	}
	t := dst.Type()
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return bad("an object")
		}
		for _, k := range jsonv.SortedKeys(m) {
			i, ok := d.field(t, k)
			if !ok {
				return &FieldError{Field: join(path, k), Err: because(ErrUnknownField, "unknown field (known: %s)", strings.Join(tags(t), ", "))}
			}
			if err := d.decode(join(path, k), m[k], dst.Field(i), !required(k)); err != nil {
				return err
			}
		}
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			return bad("an object")
		}
		out := reflect.MakeMapWithSize(t, len(m))
		for _, k := range jsonv.SortedKeys(m) {
			at := join(path, k)
			if path == "api_keys" {
				at = keyField(k) // a raw key put there by mistake stays out of the error
			}
			e := reflect.New(t.Elem()).Elem()
			if err := d.decode(at, m[k], e, false); err != nil {
				return err
			}
			out.SetMapIndex(reflect.ValueOf(k), e)
		}
		dst.Set(out)
	case reflect.Slice:
		a, ok := v.([]any)
		if !ok {
			return bad("an array")
		}
		out := reflect.MakeSlice(t, len(a), len(a))
		for i, e := range a {
			if err := d.decode(path+"["+strconv.Itoa(i)+"]", e, out.Index(i), false); err != nil {
				return err
			}
		}
		dst.Set(out)
	case reflect.String:
		s, ok := v.(string)
		if !ok {
			return bad("a string")
		}
		dst.SetString(s)
	case reflect.Bool:
		b, ok := v.(bool)
		if !ok {
			return bad("true or false")
		}
		dst.SetBool(b)
	case reflect.Int, reflect.Int64:
		n, ok := v.(jsonv.Number)
		if !ok {
			return bad("an integer")
		}
		i, err := n.Int64()
		if err != nil {
			if f, _ := strconv.ParseFloat(string(n), 64); math.Abs(f) < 1<<53 {
				return bad("an integer") // 1.5; 1.0 and 1e3 are integers
			}
		}
		if err != nil || dst.OverflowInt(i) {
			// Beyond 2^53, however written (1e30, or in digits beyond
			// int64), a number is out of every integer field's range
			// (TestHugeIntegersOutOfFieldRange), which validation names:
			// "must be between 1 and 999999999999999" tells more than
			// the range of int64 did. Kept as the type's bound, which no
			// field takes, it is shown as written.
			i = math.MaxInt64
			if n[0] == '-' {
				i = math.MinInt64
			}
			if dst.OverflowInt(i) {
				i >>= 32 // an int of 32 bits
			}
			if d.huge == nil {
				d.huge = map[string]string{}
			}
			d.huge[path] = string(n)
		}
		dst.SetInt(i)
	default:
		return bad(t.Kind().String())
	}
	return nil
}

// required reports whether the member name, a known field's, is one that
// has no default (README: "—"), so that the error of its null does not
// advise leaving it out. The names are those of Plan, Limit and Cost; no
// other type has a field of the same name (TestNullRefusedEverywhere
// checks the advice against leaving each field out). Not a switch, whose
// string comparisons took 1 KB of the Worker's bundle.
func required(name string) bool {
	return strings.Contains(" limits name limit window path_prefix cost ", " "+name+" ")
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

// join appends a member's name to a path. A name of other characters than
// a field's or a plan's is quoted: shown as it is, a zero-width or
// no-break space pasted into "shadow" made "shadow: unknown field (known:
// ..., shadow, ...)", and "free " a plan named like free.
func join(path, key string) string {
	if !validName(key) {
		key = quote(key)
	}
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

// secret reports whether the field at path holds secrets (check_token) or
// is where a raw key may be pasted by mistake (api_keys): an error about a
// value of the wrong type there names the type, not the value.
func secret(path string) bool {
	return path == "check_token" || strings.HasPrefix(path, "api_keys")
}

// kind names the JSON type of a decoded value, with its article.
func kind(v any) string {
	t := jsonv.TypeName(v)
	if t == "array" || t == "object" {
		return "an " + t
	}
	return "a " + t
}

// describe formats a decoded JSON value for an error message.
func describe(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case string:
		return quote(v)
	case jsonv.Number:
		return string(v)
	case bool:
		return strconv.FormatBool(v)
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprint(v)
}
