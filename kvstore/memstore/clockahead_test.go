package memstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/slidegate/slidegate/kvstore/memstore"
	"github.com/slidegate/slidegate/limiter"
	"github.com/slidegate/slidegate/window"
)

// TestOneBucketAheadKeepsCurrentCounts pins what README's "Clocks" says of
// a clock that runs one bucket of a rule ahead and is then corrected: the
// current bucket's counts stay, and the previous bucket's are dropped (its
// counters expire at the time seen ahead), so the rule admits at most that
// bucket's weight more. A client used its minute (60 of 60) at 11:59:30
// and one more at 12:00:01; the clock then reads 12:01:59 for one request,
// the client's own or other clients' of its shard, and is corrected to
// 12:00:02 (a step back of over a minute: followed, not held).
func TestOneBucketAheadKeepsCurrentCounts(t *testing.T) {
	ctx := context.Background()
	minute := []limiter.Rule{{Rule: window.Rule{Name: "minute", Limit: 60, Period: time.Minute}}}
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	others := make([]string, 4000) // every shard, but with odds of 1e-7
	for i := range others {
		others[i] = fmt.Sprint("other-", i)
	}
	admitted := func(t *testing.T, ahead []string) int {
		t.Helper()
		l := limiter.New(limiter.Options{Store: memstore.New()})
		for range 60 {
			if d, err := l.Decide(ctx, t0.Add(-30*time.Second), "k", minute, 1); err != nil || !d.Allowed {
				t.Fatalf("at 11:59:30: %+v, %v", d, err)
			}
		}
		if d, err := l.Decide(ctx, t0.Add(time.Second), "k", minute, 1); err != nil || !d.Allowed {
			t.Fatalf("at 12:00:01: %+v, %v", d, err)
		}
		for _, id := range ahead {
			if _, err := l.Decide(ctx, t0.Add(119*time.Second), id, minute, 1); err != nil {
				t.Fatal(err)
			}
		}
		n := 0
		for ; n < 100; n++ {
			if d, err := l.Decide(ctx, t0.Add(2*time.Second), "k", minute, 1); err != nil || !d.Allowed {
				break
			}
		}
		return n
	}
	// At 12:00:02 11:59 weighs floor(60 × 58/60) = 58, plus 1 current: 1 more.
	if got := admitted(t, nil); got != 1 {
		t.Fatalf("without an excursion: %d admitted at 12:00:02, want 1", got)
	}
	for name, ahead := range map[string][]string{"the client itself": {"k"}, "other clients": others} {
		t.Run(name, func(t *testing.T) {
			// 11:59 dropped, 12:00's 1 kept: 59, not 60.
			if got := admitted(t, ahead); got != 59 {
				t.Errorf("after a clock one bucket ahead and corrected: %d admitted at 12:00:02, want 59 (the current bucket's count kept)", got)
			}
		})
	}
}
