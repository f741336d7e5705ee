package workerskv

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/slidegate/slidegate/kvstore"
)

// TestCutShortListIsLogged: a refresh lists at most maxListPages pages of a
// slot's keys. A slot with more keys (a day rule's client served by
// thousands of isolates over its day, each leaving a key) was summed from
// the first pages alone, and the other keys' counts were left out without
// a word: the client was counted short in every isolate. Now the cut is
// logged, naming the slot's prefix and the counts summed.
func TestCutShortListIsLogged(t *testing.T) {
	for _, tc := range []struct {
		name    string
		keys    int
		wantLog bool
	}{
		{"every page listed", maxListPages * 2, false},
		{"more pages than a refresh lists", maxListPages*2 + 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSim(t0)
			kv := newFakeKV(s.Now, 0)
			kv.pageSize = 2
			sl := minute(t0)
			for i := range tc.keys {
				if err := kv.Put(context.Background(), SlotPrefix("id", sl)+"iso-"+strconv.Itoa(1000+i), "1", 1, time.Minute); err != nil {
					t.Fatal(err)
				}
			}
			log := &warnLog{}
			iso := newIsolate(t, s, kv, "iso-a", Options{Logger: log})
			counts := make([]int64, 1)
			if err := iso.store.Load(context.Background(), "id", []kvstore.Slot{sl}, counts); err != nil {
				t.Fatal(err)
			}
			if got, want := counts[0], int64(min(tc.keys, 2*maxListPages)); got != want {
				t.Errorf("count %d, want %d", got, want)
			}
			var logged []string
			for _, l := range log.lines {
				logged = append(logged, fmt.Sprint(l.msg, l.args))
			}
			if got := len(logged) > 0; got != tc.wantLog {
				t.Errorf("logged %q, want a line: %v", logged, tc.wantLog)
			}
			if tc.wantLog && len(log.lines) > 0 && fmt.Sprint(log.lines[0].args) != fmt.Sprint([]any{"prefix", SlotPrefix("id", sl), "pages", maxListPages, "n", int64(2 * maxListPages)}) {
				t.Errorf("logged %v, want the prefix, the pages and the count summed", log.lines[0].args)
			}
		})
	}
}
