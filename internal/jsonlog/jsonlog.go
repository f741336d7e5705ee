// Package jsonlog writes log records as JSON lines shaped like log/slog's
// JSONHandler output ({"time", "level", "msg", then the attributes}), for
// builds that leave log/slog and encoding/json out: the Worker's Wasm
// bundle. Elsewhere slidegate logs through *slog.Logger, which satisfies
// the same small interfaces.
package jsonlog

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/slidegate/slidegate/internal/jsonv"
)

// Logger writes one JSON line per record to its writer. It is safe for
// concurrent use.
type Logger struct {
	mu  sync.Mutex
	w   io.Writer
	now func() time.Time
	buf jsonv.Encoder
}

// New returns a Logger that writes to w and stamps records with now (nil:
// no "time" member, for platforms whose logs stamp every line).
func New(w io.Writer, now func() time.Time) *Logger { return &Logger{w: w, now: now} }

// Info logs at level INFO; args are alternating keys and values, as for
// slog.Logger.Info.
func (l *Logger) Info(msg string, args ...any) { l.log("INFO", msg, args) }

// Warn logs at level WARN.
func (l *Logger) Warn(msg string, args ...any) { l.log("WARN", msg, args) }

// Error logs at level ERROR.
func (l *Logger) Error(msg string, args ...any) { l.log("ERROR", msg, args) }

// InfoContext is Info; the context carries nothing this logger reads.
func (l *Logger) InfoContext(_ context.Context, msg string, args ...any) { l.log("INFO", msg, args) }

// WarnContext is Warn.
func (l *Logger) WarnContext(_ context.Context, msg string, args ...any) { l.log("WARN", msg, args) }

// ErrorContext is Error.
func (l *Logger) ErrorContext(_ context.Context, msg string, args ...any) { l.log("ERROR", msg, args) }

func (l *Logger) log(level, msg string, args []any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := &l.buf
	e.Reset()
	e.BeginObject()
	if l.now != nil {
		e.String("time", l.now().UTC().Format("2006-01-02T15:04:05.000Z07:00"))
	}
	e.String("level", level)
	e.String("msg", msg)
	for len(args) > 0 {
		key, ok := args[0].(string)
		if !ok || len(args) == 1 {
			// slog's convention for a value without a key.
			e.Key("!BADKEY")
			value(e, args[0])
			args = args[1:]
			continue
		}
		e.Key(key)
		value(e, args[1])
		args = args[2:]
	}
	e.EndObject()
	_, _ = l.w.Write(append(e.Bytes(), '\n'))
}

// value writes v as slog's JSONHandler would: numbers and booleans as
// such, a Duration in nanoseconds, errors and Stringers as their text.
func value(e *jsonv.Encoder, v any) {
	switch v := v.(type) {
	case nil:
		e.NullValue()
	case string:
		e.StringValue(v)
	case bool:
		e.BoolValue(v)
	case int:
		e.IntValue(int64(v))
	case int64:
		e.IntValue(v)
	case int32:
		e.IntValue(int64(v))
	case time.Duration:
		e.IntValue(int64(v))
	case error:
		e.StringValue(v.Error())
	case fmt.Stringer:
		e.StringValue(v.String())
	default:
		e.StringValue(fmt.Sprint(v))
	}
}
