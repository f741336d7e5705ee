package parity

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/slidegate/slidegate/httpapi"
	"github.com/slidegate/slidegate/kvstore"
	"github.com/slidegate/slidegate/kvstore/memstore"
)

// peekOnly is a store that is a kvstore.Peeker and nothing more, as the
// Worker's is.
type peekOnly struct{ kvstore.Store }

func (p peekOnly) Peek(ctx context.Context, id string, slots []kvstore.Slot, counts []int64) error {
	return p.Load(ctx, id, slots, counts)
}

// TestFailing: a store in an outage fails every call but a peek for
// OutageKey's identity, and for every identity in a second that is a
// multiple of 5, whatever calls came before; it keeps the Conditional path
// of a store that has one, is a Peeker, and never Immediate.
func TestFailing(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 9, 47, 31, 0, time.UTC) // second 31: no outage of every identity
	slots := []kvstore.Slot{{Name: "minute", Bucket: 1, Length: time.Minute}}
	for _, tc := range []struct {
		name  string
		store kvstore.Store
		cond  bool
	}{
		{"memory", memstore.New(), true},
		{"peeker", peekOnly{memstore.New()}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := NewClock(t0)
			st := Failing(tc.store, clock)
			c, isCond := st.(kvstore.Conditional)
			p, isPeeker := st.(kvstore.Peeker)
			_, immediate := st.(kvstore.Immediate)
			if isCond != tc.cond || !isPeeker || immediate {
				t.Fatalf("Conditional %v, Peeker %v, Immediate %v; want %v, true, false", isCond, isPeeker, immediate, tc.cond)
			}
			ctx, counts := context.Background(), []int64{0}
			calls := func(id string) []error {
				errs := []error{st.Load(ctx, id, slots, counts), st.Add(ctx, id, slots, []int64{1})}
				if isCond {
					_, err := c.AddIf(ctx, id, []kvstore.Cond{{Slot: slots[0], Max: 10, Add: 1}}, counts)
					errs = append(errs, err)
				}
				return errs
			}
			for _, step := range []struct {
				at    time.Duration
				id    string
				fails bool
			}{
				{0, "ip:127.0.0.2", false},
				{0, "k:" + httpapi.HashKey(OutageKey), true},
				{0, "k:" + httpapi.HashKey(OutageKey+"x"), false},
				{4 * time.Second, "ip:127.0.0.2", true}, // 9:47:35
				{5 * time.Second, "ip:127.0.0.2", false},
			} {
				clock.Advance(t0.Add(step.at).Sub(clock.Now()))
				for i, err := range calls(step.id) {
					if got := errors.Is(err, ErrOutage); got != step.fails || !got && err != nil {
						t.Errorf("at +%s, %s: call %d answered %v, want failing %v", step.at, step.id, i, err, step.fails)
					}
				}
				if err := p.Peek(ctx, step.id, slots, counts); err != nil {
					t.Errorf("at +%s, %s: Peek: %v", step.at, step.id, err)
				}
			}
		})
	}
}
