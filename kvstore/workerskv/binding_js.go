//go:build js && wasm

package workerskv

import (
	"context"
	"fmt"
	"syscall/js"
	"time"

	"github.com/slidegate/slidegate/internal/jsasync"
)

// Binding is KV over a Workers KV namespace binding, called through
// syscall/js: syumai's kv package has no metadata. It is safe for concurrent
// use by the goroutines of one Go instance.
type Binding struct{ ns js.Value }

var _ KV = (*Binding)(nil)

// NewBinding wraps the namespace ns (cloudflare.GetBinding(name)); name
// only labels the error. A binding without KV's methods (an R2 bucket,
// whose put took the counts and whose list, answered without keys,
// crashed the Go instance) is refused.
func NewBinding(ns js.Value, name string) (*Binding, error) {
	if ns.Type() != js.TypeObject {
		return nil, fmt.Errorf("%w: %q", ErrBinding, name)
	}
	for _, m := range [...]string{"put", "list", "getWithMetadata"} {
		if ns.Get(m).Type() != js.TypeFunction {
			return nil, fmt.Errorf("%w: %q is not a KV namespace (it has no %s)", ErrBinding, name, m)
		}
	}
	return &Binding{ns: ns}, nil
}

func object() js.Value { return js.Global().Get("Object").New() }

// Put implements KV: put(key, value, {expirationTtl, metadata: {n}}).
func (b *Binding) Put(ctx context.Context, key, value string, n int64, ttl time.Duration) error {
	opts, md := object(), object()
	md.Set("n", n)
	opts.Set("metadata", md)
	opts.Set("expirationTtl", int64(max(ttl, MinTTL)/time.Second))
	p, err := jsasync.Call(b.ns, "put", key, value, opts)
	if err == nil {
		_, err = jsasync.Await(ctx, p)
	}
	if err != nil {
		return fmt.Errorf("workerskv: put %q: %w", key, err)
	}
	return nil
}

// List implements KV: list({prefix, cursor}), reading n from each key's
// metadata (0 when missing).
func (b *Binding) List(ctx context.Context, prefix, cursor string) (Page, error) {
	opts := object()
	opts.Set("prefix", prefix)
	if cursor != "" {
		opts.Set("cursor", cursor)
	}
	p, err := jsasync.Call(b.ns, "list", opts)
	var res js.Value
	if err == nil {
		res, err = jsasync.Await(ctx, p)
	}
	if err != nil {
		return Page{}, fmt.Errorf("workerskv: list %q: %w", prefix, err)
	}
	var keys js.Value
	if res.Type() == js.TypeObject {
		keys = res.Get("keys")
	}
	if keys.Type() != js.TypeObject {
		return Page{}, fmt.Errorf("workerskv: list %q: %w: an answer without keys", prefix, ErrJS)
	}
	page := Page{Keys: make([]Key, 0, keys.Length()), Done: res.Get("list_complete").Truthy()}
	for i, l := 0, keys.Length(); i < l; i++ {
		k := keys.Index(i)
		key := Key{Name: k.Get("name").String()}
		if md := k.Get("metadata"); md.Type() == js.TypeObject {
			if v := md.Get("n"); v.Type() == js.TypeNumber {
				key.N = int64(v.Float())
			}
		}
		page.Keys = append(page.Keys, key)
	}
	if c := res.Get("cursor"); !page.Done && c.Type() == js.TypeString {
		page.Cursor = c.String()
	}
	return page, nil
}

// Get returns the value of key, and false when it does not exist.
func (b *Binding) Get(ctx context.Context, key string) (string, bool, error) {
	p, err := jsasync.Call(b.ns, "get", key)
	var v js.Value
	if err == nil {
		v, err = jsasync.Await(ctx, p)
	}
	if err != nil {
		return "", false, fmt.Errorf("workerskv: get %q: %w", key, err)
	}
	if v.Type() != js.TypeString {
		return "", false, nil
	}
	return v.String(), true, nil
}
