package workerskv

import (
	"context"
	"math"
	"testing"

	"github.com/slidegate/slidegate/kvstore"
)

// TestAddsSaturate: with count_denied at the largest cost and limit, the
// limiter caps a punitive add by the count it read, but two requests of an
// isolate may both read before either adds (the isolate runs requests
// concurrently), and an isolate's counter then went past math.MaxInt64,
// wrapped negative and read as empty: the client admitted again. Both the
// Local and the Store's isolate counters stop at math.MaxInt64, as the
// memory store's do; a take-back still subtracts.
func TestAddsSaturate(t *testing.T) {
	ctx := context.Background()
	s := newSim(t0)
	iso := newIsolate(t, s, &putKV{}, "iso-a", Options{})
	for _, st := range []struct {
		name string
		kvstore.Store
	}{{"local", NewLocal(iso.g, s.Now)}, {"store", iso.store}} {
		t.Run(st.name, func(t *testing.T) {
			sl := []kvstore.Slot{minute(s.Now())}
			id := "punished-" + st.name
			for range 2 {
				if err := st.Add(ctx, id, sl, []int64{math.MaxInt64 - 1}); err != nil {
					t.Fatal(err)
				}
			}
			counts := make([]int64, 1)
			if err := st.Load(ctx, id, sl, counts); err != nil {
				t.Fatal(err)
			}
			if counts[0] != math.MaxInt64 {
				t.Errorf("two adds of MaxInt64-1 read %d, want math.MaxInt64", counts[0])
			}
			if err := st.Add(ctx, id, sl, []int64{-5}); err != nil {
				t.Fatal(err)
			}
			if err := st.Load(ctx, id, sl, counts); err != nil {
				t.Fatal(err)
			}
			if counts[0] != math.MaxInt64-5 {
				t.Errorf("a take-back of 5 read %d, want %d", counts[0], int64(math.MaxInt64-5))
			}
		})
	}
}
