//go:build js

package limiter

import (
	"context"

	"github.com/slidegate/slidegate/kvstore"
)

// memory is the store of an Options field left nil. The Worker, the one
// js build, passes both of its stores; linking the memory store for a
// default it never takes cost its bundle 11.8 KB of gzip.
func memory() kvstore.Conditional { return noStore{} }

// oneRule is false: no store of the Worker decides a rule under its lock
// (a kvstore.RuleUpdater; the memory store, which js builds leave out, is
// the one that does), and the general path decides what Limiter.one
// would. Left out, one and its deny cache and clock code came to 1.5 KB
// of the bundle's gzip.
const oneRule = false

// noStore fails every call with ErrNoStore.
type noStore struct{}

func (noStore) Load(context.Context, string, []kvstore.Slot, []int64) error { return ErrNoStore }
func (noStore) Add(context.Context, string, []kvstore.Slot, []int64) error  { return ErrNoStore }
func (noStore) AddIf(context.Context, string, []kvstore.Cond, []int64) (bool, error) {
	return false, ErrNoStore
}
