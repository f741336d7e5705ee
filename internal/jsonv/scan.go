package jsonv

import (
	"errors"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// scan is the Worker's parser (Parse under GOOS=js): RFC 8259 JSON into the
// values Parse returns, with numbers kept as written. The Worker parses its
// configuration on every request (the shim starts a fresh Go instance for
// each), so it must be small and quick. Measured alternatives:
// encoding/json adds about 100 KiB to the gzip bundle; fastjson about 29
// KiB, more than the bundle's margin; JSON.parse through syscall/js about 1
// ms of CPU per request in workerd, crossing into JavaScript for every
// value. FuzzParsersAgree holds scan to encoding/json. data has passed
// checkText: it is UTF-8 without lone surrogate escapes.
func scan(data []byte) (any, error) {
	s := scanner{data: data}
	s.space()
	v, err := s.value(0)
	if err != nil {
		return nil, err
	}
	if s.space(); s.i < len(data) {
		return nil, &SyntaxError{Offset: int64(s.i), Msg: Trailing}
	}
	return v, nil
}

type scanner struct {
	data []byte
	i    int
}

func (s *scanner) space() {
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) fail(what string) error {
	if s.i >= len(s.data) {
		return &SyntaxError{Offset: int64(len(s.data)), Msg: "unexpected end of JSON input"}
	}
	return &SyntaxError{Offset: int64(s.i), Msg: "invalid character " + strconv.QuoteRune(rune(s.data[s.i])) + " " + what}
}

func (s *scanner) value(depth int) (any, error) {
	if depth >= MaxDepth {
		return nil, &SyntaxError{Offset: int64(s.i), Msg: tooDeep}
	}
	if s.i >= len(s.data) {
		return nil, s.fail("")
	}
	switch c := s.data[s.i]; {
	case c == '{':
		return s.object(depth)
	case c == '[':
		return s.array(depth)
	case c == '"':
		return s.string()
	case c == '-' || c >= '0' && c <= '9':
		return s.number()
	}
	for _, lit := range [...]struct {
		text string
		v    any
	}{{"true", true}, {"false", false}, {"null", nil}} {
		if len(s.data)-s.i >= len(lit.text) && string(s.data[s.i:s.i+len(lit.text)]) == lit.text {
			s.i += len(lit.text)
			return lit.v, nil
		}
	}
	return nil, s.fail("looking for beginning of value")
}

func (s *scanner) object(depth int) (any, error) {
	s.i++ // {
	m := map[string]any{}
	s.space()
	if s.i < len(s.data) && s.data[s.i] == '}' {
		s.i++
		return m, nil
	}
	for {
		if s.i >= len(s.data) || s.data[s.i] != '"' {
			return nil, s.fail("looking for beginning of object key string")
		}
		k, err := s.string()
		if err != nil {
			return nil, err
		}
		if s.space(); s.i >= len(s.data) || s.data[s.i] != ':' {
			return nil, s.fail("after object key")
		}
		s.i++
		s.space()
		v, err := s.value(depth + 1)
		if err != nil {
			return nil, err
		}
		m[k.(string)] = v // the last of duplicate keys wins, as in encoding/json
		if s.space(); s.i < len(s.data) && s.data[s.i] == '}' {
			s.i++
			return m, nil
		}
		if s.i >= len(s.data) || s.data[s.i] != ',' {
			return nil, s.fail("after object key:value pair")
		}
		s.i++
		s.space()
	}
}

func (s *scanner) array(depth int) (any, error) {
	s.i++ // [
	a := []any{}
	s.space()
	if s.i < len(s.data) && s.data[s.i] == ']' {
		s.i++
		return a, nil
	}
	for {
		v, err := s.value(depth + 1)
		if err != nil {
			return nil, err
		}
		a = append(a, v)
		if s.space(); s.i < len(s.data) && s.data[s.i] == ']' {
			s.i++
			return a, nil
		}
		if s.i >= len(s.data) || s.data[s.i] != ',' {
			return nil, s.fail("after array element")
		}
		s.i++
		s.space()
	}
}

// string reads a string literal; it returns any to spare its callers a
// conversion.
func (s *scanner) string() (any, error) {
	s.i++ // "
	start := s.i
	for s.i < len(s.data) { // the common case: no escapes
		c := s.data[s.i]
		if c == '"' {
			s.i++
			return string(s.data[start : s.i-1]), nil
		}
		if c == '\\' || c < 0x20 {
			break
		}
		s.i++
	}
	buf := append([]byte(nil), s.data[start:s.i]...)
	for s.i < len(s.data) {
		c := s.data[s.i]
		switch {
		case c == '"':
			s.i++
			return string(buf), nil
		case c < 0x20:
			return nil, s.fail("in string literal")
		case c != '\\':
			buf = append(buf, c)
			s.i++
			continue
		}
		if s.i++; s.i >= len(s.data) {
			break // cut short after the backslash
		}
		switch e := s.data[s.i]; e {
		case '"', '\\', '/':
			buf = append(buf, e)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, ok := escapedRune(s.data, s.i-1)
			if !ok {
				return nil, s.fail("in \\u hexadecimal character escape")
			}
			s.i += 4
			if utf16.IsSurrogate(r) { // checkText let only pairs through
				low, _ := escapedRune(s.data, s.i+1)
				r = utf16.DecodeRune(r, low)
				s.i += 6
			}
			buf = utf8.AppendRune(buf, r)
		default:
			return nil, s.fail("in string escape code")
		}
		s.i++
	}
	return nil, s.fail("")
}

// number reads -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) number() (any, error) {
	start := s.i
	if s.data[s.i] == '-' {
		s.i++
	}
	switch {
	case s.i < len(s.data) && s.data[s.i] == '0':
		s.i++
	case s.digits() == 0:
		return nil, s.fail("in numeric literal")
	}
	if s.i < len(s.data) && s.data[s.i] == '.' {
		s.i++
		if s.digits() == 0 {
			return nil, s.fail("after decimal point in numeric literal")
		}
	}
	if s.i < len(s.data) && (s.data[s.i] == 'e' || s.data[s.i] == 'E') {
		s.i++
		if s.i < len(s.data) && (s.data[s.i] == '+' || s.data[s.i] == '-') {
			s.i++
		}
		if s.digits() == 0 {
			return nil, s.fail("in exponent of numeric literal")
		}
	}
	return Number(s.data[start:s.i]), nil
}

func (s *scanner) digits() int {
	n := 0
	for s.i < len(s.data) && s.data[s.i] >= '0' && s.data[s.i] <= '9' {
		s.i++
		n++
	}
	return n
}

// integral reads a number written with a fraction or an exponent that has
// an integral value below 2^53 in magnitude ("1.0", "25e-1" is not, "1.5e3"
// is), without floating point: the Worker's bundle has no float parser.
func integral(n Number) (int64, bool) {
	s := string(n)
	neg := len(s) > 0 && s[0] == '-'
	if neg {
		s = s[1:]
	}
	exp := 0
	for i := range len(s) {
		if s[i] == 'e' || s[i] == 'E' {
			e, err := strconv.Atoi(s[i+1:])
			switch {
			case errors.Is(err, strconv.ErrRange) && s[i+1] == '-':
				e = -1 << 30 // as good as minus infinity: 0 or a fraction
			case errors.Is(err, strconv.ErrRange):
				e = 1 << 30 // 0, or beyond 2^53
			case err != nil:
				return 0, false
			}
			exp, s = e, s[:i]
			break
		}
	}
	var digits []byte
	for i := range len(s) {
		switch {
		case s[i] == '.':
			exp -= len(s) - i - 1 // the fraction's digits
		case s[i] >= '0' && s[i] <= '9':
			digits = append(digits, s[i])
		default:
			return 0, false
		}
	}
	if strings.Trim(string(digits), "0") == "" {
		return 0, true // 0.0, 0e-2
	}
	for len(digits) > 0 && digits[len(digits)-1] == '0' && exp < 0 {
		digits, exp = digits[:len(digits)-1], exp+1 // 1.50 is 150e-2, 15e-1
	}
	if exp < 0 {
		return 0, false // a fraction remains
	}
	var v int64
	for _, d := range digits {
		if v = v*10 + int64(d-'0'); v >= 1<<53 {
			return 0, false
		}
	}
	for ; exp > 0 && v != 0; exp-- {
		if v *= 10; v >= 1<<53 {
			return 0, false
		}
	}
	if neg {
		v = -v
	}
	return v, true
}
