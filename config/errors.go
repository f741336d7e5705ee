package config

import (
	"errors"
	"fmt"
	"strconv"
)

// Errors wrapped by FieldError: match them with errors.Is.
var (
	ErrUnknownField = errors.New("unknown field")
	ErrType         = errors.New("wrong JSON type")
	ErrSyntax       = errors.New("invalid JSON")
	ErrEmpty        = errors.New("empty")
	ErrName         = errors.New("invalid name")
	ErrDuplicate    = errors.New("duplicate name")
	ErrRange        = errors.New("out of range")
	ErrDuration     = errors.New("invalid duration")
	ErrNoPlan       = errors.New("no such plan")
	ErrKeyHash      = errors.New("invalid key hash")
	ErrTooMany      = errors.New("too many limits")
	ErrValue        = errors.New("invalid value")
	ErrCost         = errors.New("cost above a limit")

	errZone       = errors.New("zone not allowed")
	errMappedBits = errors.New("IPv4-mapped prefix shorter than /96")
	errEveryone   = errors.New("prefix of every address")
	errHostBits   = errors.New("bits set past the prefix length")
)

// FieldError is a configuration error: the field's path
// ("plans.free.limits[1].window"), its value as written (quoted when a
// string), and what is wrong with it.
type FieldError struct {
	Field string
	Value string // empty when the error is about the field itself
	Err   error
}

func (e *FieldError) Error() string {
	if e.Value == "" {
		return fmt.Sprintf("config: %s: %v", e.Field, e.Err)
	}
	return fmt.Sprintf("config: %s: %s: %v", e.Field, e.Value, e.Err)
}

func (e *FieldError) Unwrap() error { return e.Err }

// reason is an error whose message is specific (names the bound that was
// broken) and which still matches its category with errors.Is.
type reason struct {
	// Not comparable, so that the Worker's bundle carries no equality
	// function for it (docs/edge.md, "Size").
	_ [0]func()

	kind error
	msg  string
}

func (r *reason) Error() string { return r.msg }
func (r *reason) Unwrap() error { return r.kind }

// because returns an error of the given kind with a formatted message.
// It is not inlined: the configuration's checks call it at about fifty
// places, and a copy of its body (the allocation and the Sprintf call) at
// each took 2 KB of the Worker's gzipped bundle.
//
//go:noinline
func because(kind error, format string, args ...any) error {
	return &reason{kind: kind, msg: fmt.Sprintf(format, args...)}
}

// quote formats a string value for a FieldError.
func quote(s string) string { return strconv.Quote(s) }

// num formats an integer value for a FieldError.
func num(n int64) string { return strconv.FormatInt(n, 10) }
