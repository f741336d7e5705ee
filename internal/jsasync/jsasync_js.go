//go:build js && wasm

package jsasync

import (
	"context"
	"fmt"
	"syscall/js"
)

type settled struct {
	v   js.Value
	err error
}

// Await waits for promise p to settle. Both callbacks are released once it
// has settled, also when ctx ends first (then in the background: releasing
// a callback that JS may still call would crash the Go instance).
func Await(ctx context.Context, p js.Value) (js.Value, error) {
	ch := make(chan settled, 1)
	onValue := js.FuncOf(func(_ js.Value, args []js.Value) any {
		ch <- settled{v: arg0(args)}
		return nil
	})
	onError := js.FuncOf(func(_ js.Value, args []js.Value) any {
		ch <- settled{err: Error(arg0(args))}
		return nil
	})
	release := func() {
		onValue.Release()
		onError.Release()
	}
	if _, err := Call(p, "then", onValue, onError); err != nil {
		release()
		return js.Value{}, err
	}
	select {
	case s := <-ch:
		release()
		return s.v, s.err
	case <-ctx.Done():
		go func() {
			<-ch
			release()
		}()
		return js.Value{}, ctx.Err()
	}
}

func arg0(args []js.Value) js.Value {
	if len(args) == 0 {
		return js.Undefined()
	}
	return args[0]
}

// Call calls method m of v, turning a JS exception into an error.
func Call(v js.Value, m string, args ...any) (res js.Value, err error) {
	defer catch(&err)
	return v.Call(m, args...), nil
}

// catch, deferred, turns a JS exception the call panicked with into *err.
func catch(err *error) {
	if r := recover(); r != nil {
		if je, ok := r.(js.Error); ok {
			*err = Error(je.Value)
			return
		}
		panic(r)
	}
}

// Error turns a thrown or rejected JS value into an error wrapping ErrJS.
func Error(v js.Value) error {
	msg := "unknown error"
	switch {
	case v.Type() == js.TypeObject && v.Get("message").Type() == js.TypeString:
		msg = v.Get("message").String()
	case v.Type() != js.TypeUndefined:
		msg = js.Global().Get("String").Invoke(v).String()
	}
	return fmt.Errorf("%w: %s", ErrJS, msg)
}

// Bytes waits for promise p of an ArrayBuffer and copies its bytes.
func Bytes(ctx context.Context, p js.Value) ([]byte, error) {
	ab, err := Await(ctx, p)
	if err != nil {
		return nil, err
	}
	u := js.Global().Get("Uint8Array").New(ab)
	b := make([]byte, u.Length())
	js.CopyBytesToGo(b, u)
	return b, nil
}

// New calls constructor c, turning a JS exception into an error.
func New(c js.Value, args ...any) (res js.Value, err error) {
	defer catch(&err)
	return c.New(args...), nil
}
