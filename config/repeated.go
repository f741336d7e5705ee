package config

import (
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
	steps, ok := jsonv.Repeated(data)
	if !ok {
		return "", false
	}
	path := ""
	for i, s := range steps {
		switch {
		case s.InArray:
			path += "[" + strconv.Itoa(s.Index) + "]"
		case i == 1 && path == "api_keys":
			path = keyField(s.Name) // a raw key put there by mistake stays out of the error
		default:
			path = join(path, s.Name)
		}
	}
	return path, true
}
