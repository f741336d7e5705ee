//go:build !js

package limiter

import (
	"github.com/slidegate/slidegate/kvstore"
	"github.com/slidegate/slidegate/kvstore/memstore"
)

// memory is the store of an Options field left nil.
func memory() kvstore.Conditional { return memstore.New() }

// oneRule is whether a store may decide a rule under its lock (a
// kvstore.RuleUpdater, as the memory store does), for Limiter.one.
const oneRule = true
