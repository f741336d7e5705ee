//go:build js && wasm

package workerskv

import (
	"context"
	"fmt"
	"syscall/js"
)

type settled struct {
	v   js.Value
	err error
}

// await waits for promise p to settle. Both callbacks are released once it
// has settled, also when ctx ends first (then in the background: releasing
// a callback that JS may still call would crash the Go instance).
func await(ctx context.Context, p js.Value) (js.Value, error) {
	ch := make(chan settled, 1)
	onValue := js.FuncOf(func(_ js.Value, args []js.Value) any {
		ch <- settled{v: arg0(args)}
		return nil
	})
	onError := js.FuncOf(func(_ js.Value, args []js.Value) any {
		ch <- settled{err: jsError(arg0(args))}
		return nil
	})
	release := func() {
		onValue.Release()
		onError.Release()
	}
	if _, err := call(p, "then", onValue, onError); err != nil {
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

// call calls method m of v, turning a JS exception into an error.
func call(v js.Value, m string, args ...any) (res js.Value, err error) {
	defer func() {
		if r := recover(); r != nil {
			if je, ok := r.(js.Error); ok {
				err = jsError(je.Value)
				return
			}
			panic(r)
		}
	}()
	return v.Call(m, args...), nil
}

// jsError turns a thrown or rejected JS value into an error wrapping ErrJS.
func jsError(v js.Value) error {
	msg := "unknown error"
	switch {
	case v.Type() == js.TypeObject && v.Get("message").Type() == js.TypeString:
		msg = v.Get("message").String()
	case v.Type() != js.TypeUndefined:
		msg = js.Global().Get("String").Invoke(v).String()
	}
	return fmt.Errorf("%w: %s", ErrJS, msg)
}
