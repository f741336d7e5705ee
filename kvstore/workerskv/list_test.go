package workerskv

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/slidegate/slidegate/kvstore"
	"github.com/slidegate/slidegate/window"
)

// unfinishedKV answers every list with one page that says it is not the
// last but gives no cursor to the next.
type unfinishedKV struct {
	keys  []Key
	lists int
}

func (k *unfinishedKV) Put(context.Context, string, string, int64, time.Duration) error {
	return nil
}

func (k *unfinishedKV) List(context.Context, string, string) (Page, error) {
	k.lists++
	return Page{Keys: k.keys}, nil
}

// TestListPageWithoutCursorCountsOnce: a list page not marked done but
// without a cursor ends the list. Followed with the empty cursor, the
// first page came back again and its counts were added up to ten times:
// a client with 5 requests elsewhere was taken for 50, and refused.
func TestListPageWithoutCursorCountsOnce(t *testing.T) {
	now := t0
	sl := minute(now)
	kv := &unfinishedKV{keys: []Key{{Name: SlotPrefix("id", sl) + "other-isolate", N: 5}}}
	s, err := New(Options{KV: kv, Globals: NewMemGlobals("iso-a"), Now: func() time.Time { return now },
		Later: func(time.Duration, func(context.Context)) {}})
	if err != nil {
		t.Fatal(err)
	}
	counts := make([]int64, 1)
	if err := s.Load(context.Background(), "id", []kvstore.Slot{sl}, counts); err != nil {
		t.Fatal(err)
	}
	if counts[0] != 5 || kv.lists != 1 {
		t.Errorf("count %d after %d lists, want 5 after 1", counts[0], kv.lists)
	}
}

// TestClosedBucketListedOnceSettled: the other isolates' sum of a bucket
// listed shortly before it ended is listed again once its last writes
// have landed (a flush and a list interval past its end), not only after
// PrevInterval (30 s): for that half minute the previous bucket, which
// weighs most just after the boundary, missed the other isolates' last
// second of counts.
func TestClosedBucketListedOnceSettled(t *testing.T) {
	s, err := New(Options{KV: newFakeKV(time.Now, 0), Globals: NewMemGlobals("iso-a"), Later: func(time.Duration, func(context.Context)) {}})
	if err != nil {
		t.Fatal(err)
	}
	sl := minute(t0)
	end := window.Start(sl.Bucket+1, sl.Length)
	at := end.Add(-time.Second).UnixMilli() // listed a second before the bucket ended
	settled := end.Add(FlushInterval + DefaultListInterval)
	for _, tc := range []struct {
		now  time.Time
		want bool
	}{
		{end.Add(time.Second), false},
		{settled.Add(-time.Millisecond), false},
		{settled, true},
		{settled.Add(time.Second), true},
	} {
		if got := s.stale(sl, tc.now, at); got != tc.want {
			t.Errorf("stale at end+%s = %v, want %v", tc.now.Sub(end), got, tc.want)
		}
	}
}

// TestSweepAdoptsAtMostMaxAdopt: a sweep that finds more stopped flushes
// than maxAdopt takes on maxAdopt of them, so that the request stays
// within Cloudflare's 1,000 KV operations per invocation; the rest wait
// for the next sweep, which comes due a flush interval later.
func TestSweepAdoptsAtMostMaxAdopt(t *testing.T) {
	g := NewMemGlobals("iso-a")
	s, err := New(Options{KV: newFakeKV(time.Now, 0), Globals: g, Later: func(time.Duration, func(context.Context)) {}})
	if err != nil {
		t.Fatal(err)
	}
	sl := minute(t0)
	ms := t0.UnixMilli()
	const stopped = maxAdopt + 10
	g.Update(func(c Cells) {
		for i := range stopped {
			c.Set(SlotPrefix(fmt.Sprint("client-", i), sl)+"iso-a", Cell{N: 1, Expires: math.MaxInt64})
		}
	})
	var adopted []string
	g.Update(func(c Cells) { adopted = s.sweep(c, ms) })
	owned := 0
	g.Update(func(c Cells) {
		for i := range stopped {
			if cell, _ := c.Get(SlotPrefix(fmt.Sprint("client-", i), sl) + "iso-a"); cell.Owner == ms {
				owned++
			}
		}
	})
	if len(adopted) != maxAdopt || owned != maxAdopt {
		t.Errorf("a sweep took on %d counters (%d owned), want %d", len(adopted), owned, maxAdopt)
	}
}

// TestClockStepBackHandsOverAndSweeps: after the isolate's clock stepped
// back, a counter whose flushes a request "from the future" runs (its
// Owner is later than now: that request is no evidence of life) is taken
// over by the next request that counts, and the sweep runs at once rather
// than when the clock gets back to the last sweep; either way waiting, the
// isolate's counts reached KV only once the clock caught up.
func TestClockStepBackHandsOverAndSweeps(t *testing.T) {
	const ms = int64(1_795_176_000_000)
	if !canTakeOver(Cell{N: 2, Flushed: 1, Owner: ms + 5_000}, ms) {
		t.Error("a counter owned by a request 5 s in the future is not taken over")
	}
	if canTakeOver(Cell{N: 2, Flushed: 1, Owner: ms - 5_000}, ms) {
		t.Error("a counter owned by a request 5 s old is taken over")
	}
	g := NewMemGlobals("iso-a")
	g.Update(func(c Cells) {
		c.Set("marker", Cell{At: ms + 5_000, Expires: math.MaxInt64}) // swept 5 s "later"
		c.Set("old", Cell{N: 1, Expires: ms - 1})
		sweep(c, "marker", ms, nil)
		if _, ok := c.Get("old"); ok {
			t.Error("after the clock stepped back, no sweep: an expired cell is kept")
		}
	})
}

// slowListKV lists nothing, and each list takes d of the store's clock.
type slowListKV struct {
	now *time.Time
	d   time.Duration
}

func (k slowListKV) Put(context.Context, string, string, int64, time.Duration) error { return nil }

func (k slowListKV) List(context.Context, string, string) (Page, error) {
	*k.now = k.now.Add(k.d)
	return Page{Done: true}, nil
}

// TestListAcrossSettledIsListedAgain: a list of a closed bucket that
// started before its last writes had landed (settled) and ended after does
// not count as the settled list: the sum is dated from the list's start,
// and the next Load lists again, instead of serving for PrevInterval (30 s)
// a sum that may lack the other isolates' last counts.
func TestListAcrossSettledIsListedAgain(t *testing.T) {
	sl := minute(t0)
	end := window.Start(sl.Bucket+1, sl.Length)
	settled := end.Add(FlushInterval + DefaultListInterval)
	now := settled.Add(-100 * time.Millisecond)
	g := NewMemGlobals("iso-a")
	s, err := New(Options{KV: slowListKV{&now, 300 * time.Millisecond}, Globals: g, Now: func() time.Time { return now },
		Later: func(time.Duration, func(context.Context)) {}})
	if err != nil {
		t.Fatal(err)
	}
	p := SlotPrefix("id", sl)
	if err := s.refresh(context.Background(), p, sl); err != nil {
		t.Fatal(err)
	}
	var at int64
	g.Update(func(c Cells) { cell, _ := c.Get(sumKey(p)); at = cell.At })
	if !s.stale(sl, now, at) {
		t.Errorf("at %s past the bucket's end, a sum listed from %s to %s is not stale, want a new list",
			now.Sub(end), settled.Add(-100*time.Millisecond).Sub(end), now.Sub(end))
	}
}

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

// TestClockStepBackListsAgain: after the isolate's clock stepped back, a
// sum listed, or a list started, "in the future" (its time later than now)
// is no reason to wait: the next Load lists the slot again, as a stale sum
// is listed, and the other isolates' counts are seen within a list
// interval, not once the clock has caught up with the step. Before, a sum
// listed at 12:00:40 was served as it was until 12:00:42 by a clock that
// stepped back to 12:00:20, and a list whose request died (its Busy never
// cleared) held the slot until 12:01:15, past its bucket's end: the
// isolate admitted the client on its own counts alone for that long.
func TestClockStepBackListsAgain(t *testing.T) {
	for _, dead := range []bool{false, true} {
		t.Run(fmt.Sprintf("dead list %v", dead), func(t *testing.T) {
			s := newSim(t0) // 12:00:10
			kv := newFakeKV(s.Now, 0)
			a := newIsolate(t, s, kv, "iso-a", Options{})
			b := newIsolate(t, s, kv, "iso-b", Options{})
			sl, counts := minute(t0), make([]int64, 1)
			load := func(st *Store) {
				t.Helper()
				if err := st.Load(context.Background(), "id", []kvstore.Slot{sl}, counts); err != nil {
					t.Fatal(err)
				}
			}
			s.run(t0.Add(30 * time.Second))
			load(a.store) // listed at 12:00:40: nothing
			s.drain(t)
			if dead {
				// A refresh whose request's background work was
				// cancelled before it ran: its Busy stays.
				s.run(t0.Add(35 * time.Second))
				st, err := New(Options{KV: kv, Globals: a.g, Now: s.Now,
					Later: func(time.Duration, func(context.Context)) {}})
				if err != nil {
					t.Fatal(err)
				}
				load(st)
			}
			s.mu.Lock()
			s.now = t0.Add(10 * time.Second) // the clock steps back to 12:00:20
			s.mu.Unlock()
			if err := b.store.Add(context.Background(), "id", []kvstore.Slot{sl}, []int64{7}); err != nil {
				t.Fatal(err)
			}
			s.drain(t)
			load(a.store)
			s.drain(t)
			s.advance(DefaultListInterval)
			load(a.store)
			if counts[0] != 7 {
				t.Errorf("count a list interval after the clock stepped back = %d, want the other isolate's 7", counts[0])
			}
		})
	}
}

// TestFailedListWaitsALongListInterval: a ListInterval longer than
// staleBusy keeps a failed list's slot from being listed again for that
// interval, as a shorter one does (TestFailedListsWaitTheListInterval),
// though the Busy that says so is then later than the list's start.
func TestFailedListWaitsALongListInterval(t *testing.T) {
	const interval = 45 * time.Second
	s := newSim(t0)
	kv := newFakeKV(s.Now, 0)
	iso := newIsolate(t, s, kv, "iso-a", Options{ListInterval: interval})
	slots, counts := []kvstore.Slot{minute(t0)}, make([]int64, 1)
	s.run(t0.Add(interval)) // the bucket is old enough for a cold list
	kv.failList = 1
	_ = iso.store.Load(context.Background(), "id", slots, counts)
	lists := kv.listCount()
	for _, d := range []time.Duration{time.Second, 30 * time.Second, interval - time.Second} {
		s.run(t0.Add(interval + d))
		_ = iso.store.Load(context.Background(), "id", slots, counts)
		s.drain(t)
		if got := kv.listCount(); got != lists {
			t.Fatalf("%v after a failed list: %d lists, want none before %v", d, got-lists, interval)
		}
	}
	s.run(t0.Add(2 * interval))
	_ = iso.store.Load(context.Background(), "id", slots, counts)
	s.drain(t)
	if got := kv.listCount(); got != lists+1 {
		t.Errorf("%v after a failed list: %d lists, want 1", interval, got-lists)
	}
}

// TestSmallClockStepBackListsNoMore: a step back smaller than a list
// interval (requests of an isolate that read the clock a moment apart)
// neither takes a fresh sum for a stale one nor a list in flight for a
// dead one: the slot is listed no more often than without it.
func TestSmallClockStepBackListsNoMore(t *testing.T) {
	const back = time.Second // less than DefaultListInterval
	s := newSim(t0.Add(30 * time.Second))
	kv := newFakeKV(s.Now, 0)
	iso := newIsolate(t, s, kv, "iso-a", Options{})
	slots, counts := []kvstore.Slot{minute(t0)}, make([]int64, 1)
	step := func(what string) {
		t.Helper()
		lists := kv.listCount()
		s.mu.Lock()
		s.now = s.now.Add(-back)
		s.mu.Unlock()
		_ = iso.store.Load(context.Background(), "id", slots, counts)
		s.drain(t)
		if got := kv.listCount(); got != lists {
			t.Errorf("%v after %s: %d more lists, want none", -back, what, got-lists)
		}
	}
	_ = iso.store.Load(context.Background(), "id", slots, counts) // cold: listed now
	s.drain(t)
	step("a list")
	s.advance(5 * time.Second)
	dead, err := New(Options{KV: kv, Globals: iso.g, Now: s.Now,
		Later: func(time.Duration, func(context.Context)) {}})
	if err != nil {
		t.Fatal(err)
	}
	_ = dead.Load(context.Background(), "id", slots, counts) // stale: a list starts, and never ends
	step("a list started")
}
