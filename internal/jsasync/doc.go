// Package jsasync calls JavaScript from the Worker's Go code: it waits for
// promises without leaking callbacks and turns exceptions and rejections
// into errors. Everything but ErrJS builds only for js/wasm.
package jsasync

import "errors"

// ErrJS wraps every exception and rejection that comes from JavaScript.
var ErrJS = errors.New("javascript")
