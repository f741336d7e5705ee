package parity

import (
	"context"
	"errors"

	"github.com/slidegate/slidegate/httpapi"
	"github.com/slidegate/slidegate/kvstore"
)

// OutageKey is the API key whose identity the shared store of an Outage
// configuration always fails for: its requests' ip_limits are counted
// and then its plan's store fails, so that what they counted is taken
// back (or, with count_denied, kept).
const OutageKey = "u1"

// ErrOutage is what a store in an outage answers.
var ErrOutage = errors.New("parity: store outage")

// outageID is OutageKey's storage identity.
var outageID = "k:" + httpapi.HashKey(OutageKey)

// Failing returns st failing, with ErrOutage, every Load, Add and AddIf
// for OutageKey's identity, and every one at an instant of clock whose
// Unix second is a multiple of 5 (an outage of every identity, a fifth of
// the time). Which call fails depends on the identity and the clock
// alone, never on how many calls a platform's store gets: both sides of a
// run fail the same requests.
//
// The result is a kvstore.Peeker whose peeks never fail: a remote store's
// read from memory (DynamoDB's cache, a Worker isolate's counts), which
// is what the limiter reads a refused request's other rules with. Load
// fails as a read of the backend does (DynamoDB's GetItem for a check that
// counts nothing, a Worker's KV list). The result is a
// kvstore.Conditional when st is one (the memory store, standing in for
// DynamoDB), so that each platform's limiter takes its own path, and not
// kvstore.Immediate: a store that fails is a remote one, run under
// store_timeout.
func Failing(st kvstore.Store, clock *Clock) kvstore.Store {
	o := outage{st: st, clock: clock}
	if c, ok := st.(kvstore.Conditional); ok {
		return outageCond{o, c}
	}
	return o
}

type outage struct {
	st    kvstore.Store
	clock *Clock
}

func (o outage) fails(id string) bool {
	return id == outageID || o.clock.Now().Unix()%5 == 0
}

func (o outage) Load(ctx context.Context, id string, slots []kvstore.Slot, counts []int64) error {
	if o.fails(id) {
		return ErrOutage
	}
	return o.st.Load(ctx, id, slots, counts)
}

func (o outage) Add(ctx context.Context, id string, slots []kvstore.Slot, costs []int64) error {
	if o.fails(id) {
		return ErrOutage
	}
	return o.st.Add(ctx, id, slots, costs)
}

// Peek reads st's memory: st's Peek, or the memory store's Load.
func (o outage) Peek(ctx context.Context, id string, slots []kvstore.Slot, counts []int64) error {
	if p, ok := o.st.(kvstore.Peeker); ok {
		return p.Peek(ctx, id, slots, counts)
	}
	return o.st.Load(ctx, id, slots, counts)
}

type outageCond struct {
	outage
	c kvstore.Conditional
}

func (o outageCond) AddIf(ctx context.Context, id string, conds []kvstore.Cond, counts []int64) (bool, error) {
	if o.fails(id) {
		return false, ErrOutage
	}
	return o.c.AddIf(ctx, id, conds, counts)
}
