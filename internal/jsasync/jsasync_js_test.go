//go:build js && wasm

package jsasync

import (
	"context"
	"errors"
	"strings"
	"syscall/js"
	"testing"
)

// These run under Node (make test: GOOS=js GOARCH=wasm go test -exec
// go_js_wasm_exec), the same V8 as workerd.

var global = js.Global()

func promise(method string, v any) js.Value { return global.Get("Promise").Call(method, v) }

func TestAwait(t *testing.T) {
	ctx := context.Background()
	v, err := Await(ctx, promise("resolve", 42))
	if err != nil || v.Int() != 42 {
		t.Errorf("resolved: %v, %v; want 42", v, err)
	}
	_, err = Await(ctx, promise("reject", global.Get("Error").New("boom")))
	if !errors.Is(err, ErrJS) || !strings.Contains(err.Error(), "boom") {
		t.Errorf("rejected with an Error: %v; want ErrJS with its message", err)
	}
	_, err = Await(ctx, promise("reject", "plain"))
	if !errors.Is(err, ErrJS) || !strings.Contains(err.Error(), "plain") {
		t.Errorf("rejected with a string: %v", err)
	}
	// A promise that never settles: the context ends the wait.
	never := global.Get("Promise").New(js.FuncOf(func(js.Value, []js.Value) any { return nil }))
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := Await(cctx, never); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v, want context.Canceled", err)
	}
}

func TestCallAndNewTurnExceptionsIntoErrors(t *testing.T) {
	if _, err := Call(global.Get("JSON"), "parse", "{"); !errors.Is(err, ErrJS) {
		t.Errorf("JSON.parse(\"{\"): %v, want ErrJS", err)
	}
	if v, err := Call(global.Get("Math"), "max", 1, 3); err != nil || v.Int() != 3 {
		t.Errorf("Math.max: %v, %v", v, err)
	}
	if _, err := New(global.Get("Array"), -1); !errors.Is(err, ErrJS) {
		t.Errorf("new Array(-1): %v, want ErrJS", err)
	}
	// A Response over a stream that a reader holds throws.
	stream := global.Get("Response").New("abc").Get("body")
	if _, err := New(global.Get("Response"), stream); err != nil {
		t.Fatal(err)
	}
	stream.Call("getReader")
	if _, err := New(global.Get("Response"), stream); !errors.Is(err, ErrJS) {
		t.Errorf("a Response over a locked stream: %v, want ErrJS", err)
	}
}

func TestBytes(t *testing.T) {
	res := global.Get("Response").New("héllo")
	p, err := Call(res, "arrayBuffer")
	if err != nil {
		t.Fatal(err)
	}
	b, err := Bytes(context.Background(), p)
	if err != nil || string(b) != "héllo" {
		t.Errorf("Bytes = %q, %v", b, err)
	}
	if _, err := Bytes(context.Background(), promise("reject", "gone")); !errors.Is(err, ErrJS) {
		t.Errorf("rejected: %v, want ErrJS", err)
	}
}
