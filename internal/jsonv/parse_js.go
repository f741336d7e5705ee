//go:build js

package jsonv

func parse(data []byte) (any, error) { return scan(data) }
