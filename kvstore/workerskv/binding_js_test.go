//go:build js && wasm

package workerskv

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall/js"
	"testing"
	"time"

	"github.com/slidegate/slidegate/kvstore"
)

// jsObject evaluates a JavaScript expression (tests only).
func jsObject(t *testing.T, src string) js.Value {
	t.Helper()
	return js.Global().Get("Function").New("return (" + src + ")").Invoke()
}

// TestBindingOfAnotherKind: SLIDEGATE_KV bound to something that is no KV
// namespace (an R2 bucket, whose put takes the counts and whose list
// answers {objects, truncated}) was taken: the writes went to the bucket,
// and the first list read the length of the missing keys, a panic that
// took the Go instance down with the request. NewBinding now refuses any
// binding without KV's methods, naming it, and a list answer without keys
// is an error.
func TestBindingOfAnotherKind(t *testing.T) {
	r2 := jsObject(t, `{
		put: () => Promise.resolve({}), get: () => Promise.resolve(null), head: () => Promise.resolve(null),
		delete: () => Promise.resolve(), list: () => Promise.resolve({objects: [], truncated: false, delimitedPrefixes: []}),
	}`)
	if _, err := NewBinding(r2, "SLIDEGATE_KV"); !errors.Is(err, ErrBinding) {
		t.Errorf("NewBinding of an R2 bucket: %v, want ErrBinding", err)
	}
	// A KV namespace whose list answers without keys (not KV's answer).
	odd := jsObject(t, `{
		put: () => Promise.resolve(), get: () => Promise.resolve(null), getWithMetadata: () => Promise.resolve({value: null, metadata: null}),
		delete: () => Promise.resolve(), list: () => Promise.resolve({objects: [], list_complete: true}),
	}`)
	b, err := NewBinding(odd, "SLIDEGATE_KV")
	if err != nil {
		t.Fatalf("NewBinding of a KV namespace: %v", err)
	}
	if _, err := b.List(context.Background(), "sg:", ""); !errors.Is(err, ErrJS) {
		t.Errorf("List answered without keys: %v, want an error", err)
	}
	if err := b.Put(context.Background(), "sg:x", "1", 1, time.Minute); err != nil {
		t.Errorf("Put: %v", err)
	}
}

// TestListErrorNamedOnce: a failed list reached the log as
// `workerskv: load: workerskv: list "X": workerskv: list "X": ...`, the
// Binding and the Store's refresh each naming the prefix. The Binding
// names it; the Store adds no second copy.
func TestListErrorNamedOnce(t *testing.T) {
	failing := jsObject(t, `{
		put: () => Promise.resolve(), get: () => Promise.resolve(null), getWithMetadata: () => Promise.resolve({value: null, metadata: null}),
		delete: () => Promise.resolve(), list: () => Promise.reject(new Error("KV list failed: 503")),
	}`)
	b, err := NewBinding(failing, "SLIDEGATE_KV")
	if err != nil {
		t.Fatalf("NewBinding: %v", err)
	}
	now := t0
	s, err := New(Options{KV: b, Globals: NewMemGlobals("iso-a"), Now: func() time.Time { return now },
		Later: func(time.Duration, func(context.Context)) {}})
	if err != nil {
		t.Fatal(err)
	}
	sl := minute(now)
	err = s.Load(context.Background(), "id", []kvstore.Slot{sl}, make([]int64, 1))
	if err == nil {
		t.Fatal("Load over a failing list: no error")
	}
	msg := err.Error()
	named := fmt.Sprintf("list %q", SlotPrefix("id", sl))
	if strings.Count(msg, named) != 1 || !strings.Contains(msg, "KV list failed: 503") {
		t.Errorf("Load's error %q: want %s once, and the binding's reason", msg, named)
	}
}
