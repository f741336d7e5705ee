package jsonv

import "bytes"

// Step is one step of a path into a document: the member Name of an
// object, or, when InArray is set, the element Index of an array.
type Step struct {
	Name    string
	Index   int
	InArray bool
}

// Repeated returns the path of the first member that an object of data
// holds more than once: the steps from the top-level value, the repeated
// member last. data must be a valid JSON document (Parse it first). Parse
// keeps the last of such members, as encoding/json does; a caller that
// must not drop the others without a word refuses the document.
func Repeated(data []byte) ([]Step, bool) {
	type container struct {
		step   Step // how the container is reached from its parent
		array  bool
		index  int             // of the element being read, in an array
		name   string          // of the member being read, in an object
		atName bool            // the next string is a member name
		names  map[string]bool // the names read so far, in an object
	}
	var stack []container
	// here is the step to the value being read in the innermost container.
	here := func() Step {
		c := &stack[len(stack)-1]
		if c.array {
			return Step{Index: c.index, InArray: true}
		}
		return Step{Name: c.name}
	}
	for i := 0; i < len(data); i++ {
		switch b := data[i]; b {
		case '{', '[':
			var step Step
			if len(stack) > 0 {
				step = here()
			}
			stack = append(stack, container{step: step, array: b == '[', atName: b == '{'})
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
			if len(stack) > 0 && stack[len(stack)-1].atName {
				c := &stack[len(stack)-1]
				c.atName = false
				c.name = string(data[i+1 : j])
				if bytes.IndexByte(data[i+1:j], '\\') >= 0 {
					v, _ := Parse(data[i : j+1]) // "\u0073hadow" is "shadow"
					c.name, _ = v.(string)
				}
				if c.names[c.name] {
					path := make([]Step, 0, len(stack))
					for _, o := range stack[1:] {
						path = append(path, o.step)
					}
					return append(path, Step{Name: c.name}), true
				}
				if c.names == nil {
					c.names = map[string]bool{}
				}
				c.names[c.name] = true
			}
			i = j
		}
	}
	return nil, false
}
