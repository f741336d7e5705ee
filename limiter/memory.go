//go:build !js

package limiter

import (
	"github.com/slidegate/slidegate/kvstore"
	"github.com/slidegate/slidegate/kvstore/memstore"
)

// memory is the store of an Options field left nil.
func memory() kvstore.Conditional { return memstore.New() }
