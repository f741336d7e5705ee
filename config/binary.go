package config

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
)

// ErrBinary is the error of UnmarshalBinary for data AppendBinary did not
// write.
var ErrBinary = errors.New("config: not a binary configuration")

// binaryVersion starts every binary form; a change of the layout changes it.
const binaryVersion = 3

// AppendBinary appends c in a compact binary form that UnmarshalBinary reads
// back into an equal Config (reflect.DeepEqual, nil and empty kept apart).
// It is a cache format, not an interchange one: the Worker parses its
// configuration once per isolate and keeps this form in the isolate's
// globals, because reading it back costs a small fraction of Parse (no JSON,
// no reflection, no validation) and the Worker builds its handler on every
// request. Map entries are written in key order, so equal Configs give equal
// bytes.
func (c *Config) AppendBinary(b []byte) ([]byte, error) {
	b = append(b, binaryVersion)
	b = appendLen(b, c.Plans == nil, len(c.Plans))
	for _, name := range slices.Sorted(maps.Keys(c.Plans)) {
		p := c.Plans[name]
		b = appendString(b, name)
		b = appendLimits(b, p.Limits)
		b = appendString(b, p.UpgradeURL)
	}
	b = appendString(b, c.DefaultPlan)
	b = appendLen(b, c.APIKeys == nil, len(c.APIKeys))
	for _, k := range slices.Sorted(maps.Keys(c.APIKeys)) {
		b = appendString(appendString(b, k), c.APIKeys[k])
	}
	b = appendStrings(b, c.Identity.Headers)
	b = appendStrings(b, c.Identity.TrustedProxies)
	b = binary.AppendVarint(b, int64(c.Identity.IPv6Prefix))
	b = appendString(b, c.Identity.UnlistedKeys)
	b = appendLimits(b, c.IPLimits)
	b = appendLen(b, c.Costs == nil, len(c.Costs))
	for _, k := range c.Costs {
		b = appendString(appendString(b, k.Method), k.PathPrefix)
		b = binary.AppendVarint(b, k.Cost)
	}
	b = appendBool(appendBool(b, c.CountDenied), c.Shadow)
	b = appendString(b, c.OnStoreError)
	b = appendString(b, c.StoreTimeout)
	b = appendString(b, c.CheckToken)
	return appendStrings(b, c.CORSOrigins), nil
}

// UnmarshalBinary sets c from data that AppendBinary wrote, or returns an
// error wrapping ErrBinary. It does not validate: the form is only ever
// written from a Config that was.
func (c *Config) UnmarshalBinary(data []byte) error {
	r := binReader{b: data}
	if r.byte() != binaryVersion {
		return fmt.Errorf("%w: version", ErrBinary)
	}
	var d Config
	if n, ok := r.len(); ok {
		d.Plans = make(map[string]Plan, n)
		for range n {
			name := r.string()
			d.Plans[name] = Plan{Limits: r.limits(), UpgradeURL: r.string()}
		}
	}
	d.DefaultPlan = r.string()
	if n, ok := r.len(); ok {
		d.APIKeys = make(map[string]string, n)
		for range n {
			k := r.string()
			d.APIKeys[k] = r.string()
		}
	}
	d.Identity.Headers = r.strings()
	d.Identity.TrustedProxies = r.strings()
	d.Identity.IPv6Prefix = int(r.varint())
	d.Identity.UnlistedKeys = r.string()
	d.IPLimits = r.limits()
	if n, ok := r.len(); ok {
		d.Costs = make([]Cost, n)
		for i := range d.Costs {
			d.Costs[i] = Cost{Method: r.string(), PathPrefix: r.string(), Cost: r.varint()}
		}
	}
	d.CountDenied, d.Shadow = r.bool(), r.bool()
	d.OnStoreError, d.StoreTimeout, d.CheckToken = r.string(), r.string(), r.string()
	d.CORSOrigins = r.strings()
	if r.err != nil {
		return r.err
	}
	if len(r.b) != 0 {
		return fmt.Errorf("%w: %d bytes after the end", ErrBinary, len(r.b))
	}
	*c = d
	return nil
}

// appendLen writes a length, 0 for nil: nil and empty stay apart.
//
// appendLen and appendString are not inlined: AppendBinary calls them at
// about twenty places, and a copy of AppendUvarint's loop at each took
// 3.7 KB of the Worker's gzipped bundle, for a form written once per
// isolate.
//
//go:noinline
func appendLen(b []byte, isNil bool, n int) []byte {
	if isNil {
		return binary.AppendUvarint(b, 0)
	}
	return binary.AppendUvarint(b, uint64(n)+1)
}

// appendString writes a string after its length.
//
//go:noinline
func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

func appendStrings(b []byte, ss []string) []byte {
	b = appendLen(b, ss == nil, len(ss))
	for _, s := range ss {
		b = appendString(b, s)
	}
	return b
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

func appendLimits(b []byte, ls []Limit) []byte {
	b = appendLen(b, ls == nil, len(ls))
	for _, l := range ls {
		b = appendString(b, l.Name)
		b = binary.AppendVarint(b, l.Limit)
		b = appendString(appendString(b, l.Window), l.Scope)
	}
	return b
}

// binReader reads what AppendBinary wrote; the first error sticks, and
// every read after it returns a zero value.
type binReader struct {
	b   []byte
	err error
}

func (r *binReader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: truncated or malformed %s", ErrBinary, what)
	}
	r.b = nil
}

func (r *binReader) byte() byte {
	if len(r.b) == 0 {
		r.fail("data")
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *binReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("integer")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *binReader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail("integer")
		return 0
	}
	r.b = r.b[n:]
	return v
}

// len reads a length that appendLen wrote: ok is false for nil. A length
// longer than the data left is malformed (each element takes a byte at
// least), which bounds what a make can ask for.
func (r *binReader) len() (int, bool) {
	v := r.uvarint()
	if v == 0 {
		return 0, false
	}
	if v-1 > uint64(len(r.b)) {
		r.fail("length")
		return 0, false
	}
	return int(v - 1), true
}

func (r *binReader) string() string {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.fail("string")
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

func (r *binReader) strings() []string {
	n, ok := r.len()
	if !ok {
		return nil
	}
	ss := make([]string, n)
	for i := range ss {
		ss[i] = r.string()
	}
	return ss
}

func (r *binReader) bool() bool {
	switch r.byte() {
	case 0:
		return false
	case 1:
		return true
	}
	r.fail("bool")
	return false
}

func (r *binReader) limits() []Limit {
	n, ok := r.len()
	if !ok {
		return nil
	}
	ls := make([]Limit, n)
	for i := range ls {
		ls[i] = Limit{Name: r.string(), Limit: r.varint(), Window: r.string(), Scope: r.string()}
	}
	return ls
}
