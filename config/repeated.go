package config

import (
	"bytes"
	"strconv"

	"github.com/slidegate/slidegate/internal/jsonv"
)

// repeatedMember returns the path, as decode names it, of the first member
// that an object of data (a valid JSON document) holds more than once.
// jsonv keeps the last of such members, as encoding/json does, so the
// others would be dropped without a word: a "shadow": true added above a
// configuration that already says "shadow": false (the README's and
// examples/config.json set every field) enforced the limits it was meant
// to try, and an api_keys hash listed twice got the plan of its last line.
func repeatedMember(data []byte) (string, bool) {
	type container struct {
		path   string
		array  bool
		index  int             // of the element being read, in an array
		name   string          // of the member being read, in an object
		atName bool            // the next string is a member name
		names  map[string]bool // the names read so far, in an object
	}
	var stack []container
	// valuePath is the path of the value being read in the innermost
	// container.
	valuePath := func() string {
		if len(stack) == 0 {
			return ""
		}
		c := &stack[len(stack)-1]
		switch {
		case c.array:
			return c.path + "[" + strconv.Itoa(c.index) + "]"
		case c.path == "api_keys":
			return keyField(c.name) // a raw key put there by mistake stays out of the error
		}
		return join(c.path, c.name)
	}
	for i := 0; i < len(data); i++ {
		switch b := data[i]; b {
		case '{', '[':
			stack = append(stack, container{path: valuePath(), array: b == '[', atName: b == '{'})
		case '}', ']':
			stack = stack[:len(stack)-1]
		case ',':
			if c := &stack[len(stack)-1]; c.array {
				c.index++
			} else {
				c.atName = true
			}
		case '"':
			j := i + 1
			for data[j] != '"' {
				if data[j] == '\\' {
					j++
				}
				j++
			}
			if c := &stack[len(stack)-1]; c.atName {
				c.atName = false
				c.name = string(data[i+1 : j])
				if bytes.IndexByte(data[i+1:j], '\\') >= 0 {
					v, _ := jsonv.Parse(data[i : j+1]) // "\u0073hadow" is "shadow"
					c.name, _ = v.(string)
				}
				if c.names[c.name] {
					return valuePath(), true
				}
				if c.names == nil {
					c.names = map[string]bool{}
				}
				c.names[c.name] = true
			}
			i = j
		}
	}
	return "", false
}
