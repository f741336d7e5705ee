package workerskv

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slidegate/slidegate/kvstore"
	"github.com/slidegate/slidegate/kvstore/storetest"
	"github.com/slidegate/slidegate/limiter"
	"github.com/slidegate/slidegate/window"
)

// t0 is 10 s into a minute bucket.
var t0 = time.Date(2026, 11, 22, 12, 0, 10, 0, time.UTC)

var minute = func(t time.Time) kvstore.Slot {
	return kvstore.Slot{Name: "minute", Bucket: window.Index(t, time.Minute), Length: time.Minute}
}

func TestConformance(t *testing.T) {
	// The suite's buckets are around 2026-11-22 12:00 UTC.
	t.Run("Store", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) kvstore.Store {
			s := newSim(t0)
			kv := newFakeKV(s.Now, 0)
			return newIsolate(t, s, kv, "iso-a", Options{}).store
		})
	})
	t.Run("Local", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) kvstore.Store {
			return NewLocal(NewMemGlobals(""), func() time.Time { return t0 })
		})
	})
}

func TestNewRequiresOptions(t *testing.T) {
	s := newSim(t0)
	kv, g, later := newFakeKV(s.Now, 0), NewMemGlobals("x"), s.later("x")
	tests := []struct {
		name string
		o    Options
		want error
	}{
		{"no KV", Options{Globals: g, Later: later}, ErrKV},
		{"no Globals", Options{KV: kv, Later: later}, ErrGlobals},
		{"no Later", Options{KV: kv, Globals: g}, ErrLater},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(tt.o); !errors.Is(err, tt.want) {
				t.Errorf("New = %v, want %v", err, tt.want)
			}
		})
	}
	if _, err := New(Options{KV: kv, Globals: g, Later: later}); err != nil {
		t.Errorf("New with every required option: %v", err)
	}
}

func TestLengthMismatchIsAnError(t *testing.T) {
	s := newSim(t0)
	iso := newIsolate(t, s, newFakeKV(s.Now, 0), "a", Options{})
	local := NewLocal(iso.g, s.Now)
	slots := []kvstore.Slot{minute(t0)}
	ctx := context.Background()
	for name, err := range map[string]error{
		"Store.Load": iso.store.Load(ctx, "id", slots, nil),
		"Store.Add":  iso.store.Add(ctx, "id", slots, nil),
		"Local.Load": local.Load(ctx, "id", slots, nil),
		"Local.Add":  local.Add(ctx, "id", slots, nil),
	} {
		if !errors.Is(err, ErrLength) {
			t.Errorf("%s = %v, want ErrLength", name, err)
		}
	}
	if _, err := local.AddIf(ctx, "id", []kvstore.Cond{{Slot: slots[0]}}, nil); !errors.Is(err, ErrLength) {
		t.Errorf("Local.AddIf = %v, want ErrLength", err)
	}
}

// TestPeekReadsMemoryOnly: Peek answers what Load would answer at once (this
// isolate's count plus the others' last listed sum) with no KV list and no
// new cell, for an identity the isolate knows and for one it has never
// seen.
func TestPeekReadsMemoryOnly(t *testing.T) {
	s := newSim(t0.Add(30 * time.Second))
	kv := newFakeKV(s.Now, 0)
	other := newIsolate(t, s, kv, "b", Options{})
	iso := newIsolate(t, s, kv, "a", Options{})
	ctx := context.Background()
	slots := []kvstore.Slot{minute(s.Now().Add(-time.Minute)), minute(s.Now())}
	for _, add := range []struct {
		st *Store
		n  int64
	}{{other.store, 4}, {iso.store, 3}} {
		if err := add.st.Add(ctx, "known", slots[1:], []int64{add.n}); err != nil {
			t.Fatal(err)
		}
	}
	s.drain(t)
	loaded := make([]int64, 2)
	if err := iso.store.Load(ctx, "known", slots, loaded); err != nil {
		t.Fatal(err)
	}
	s.drain(t)
	if err := iso.store.Load(ctx, "known", slots, loaded); err != nil || loaded[1] != 7 {
		t.Fatalf("Load = %v, %v; want the current minute at 3 + 4", loaded, err)
	}
	lists, cells := kv.listCount(), iso.g.Len()
	for id, want := range map[string][]int64{"known": loaded, "never-seen": {0, 0}} {
		got := make([]int64, 2)
		if err := iso.store.Peek(ctx, id, slots, got); err != nil || !slices.Equal(got, want) {
			t.Errorf("Peek(%s) = %v, %v; want %v", id, got, err, want)
		}
	}
	if got := kv.listCount(); got != lists {
		t.Errorf("Peek listed KV %d times", got-lists)
	}
	if got := iso.g.Len(); got != cells {
		t.Errorf("Peek left %d cells, %d before", got, cells)
	}
	if err := iso.store.Peek(ctx, "k", slots, nil); !errors.Is(err, ErrLength) {
		t.Errorf("Peek with no counts = %v, want ErrLength", err)
	}
}

// TestManyIsolatesLoseNothing drives three isolates with random traffic on
// one identity while KV shows writes 5 s late, and checks at every step
// that each isolate's estimate lies between its own exact count and the
// true global count, that no key is written more than once a second, and,
// once the background work is done, that KV holds every count.
func TestManyIsolatesLoseNothing(t *testing.T) {
	s := newSim(t0)
	kv := newFakeKV(s.Now, 5*time.Second)
	kv.pageSize = 2 // three isolates: the list needs two pages
	isos := []isolate{
		newIsolate(t, s, kv, "iso-a", Options{}),
		newIsolate(t, s, kv, "iso-b", Options{}),
		newIsolate(t, s, kv, "iso-c", Options{}),
	}
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	own := map[string]map[int64]int64{} // isolate → bucket → its count
	total := map[int64]int64{}          // bucket → count of all isolates
	end := t0.Add(3 * time.Minute)
	for s.Now().Before(end) {
		now := s.Now()
		i := rng.IntN(len(isos))
		iso := isos[i]
		sl := minute(now)
		cost := int64(1 + rng.IntN(3))
		if err := iso.store.Add(ctx, "k:abc", []kvstore.Slot{sl}, []int64{cost}); err != nil {
			t.Fatalf("Add: %v", err)
		}
		if own[iso.g.ID()] == nil {
			own[iso.g.ID()] = map[int64]int64{}
		}
		own[iso.g.ID()][sl.Bucket] += cost
		total[sl.Bucket] += cost

		prev := kvstore.Slot{Name: sl.Name, Bucket: sl.Bucket - 1, Length: sl.Length}
		counts := make([]int64, 2)
		if err := iso.store.Load(ctx, "k:abc", []kvstore.Slot{prev, sl}, counts); err != nil {
			t.Fatalf("Load: %v", err)
		}
		for k, b := range []int64{prev.Bucket, sl.Bucket} {
			if lo, hi := own[iso.g.ID()][b], total[b]; counts[k] < lo || counts[k] > hi {
				t.Fatalf("%s at %s: count of bucket %d = %d, want within [own %d, total %d]",
					iso.g.ID(), now.Format(time.TimeOnly), b, counts[k], lo, hi)
			}
		}
		s.advance(time.Duration(1+rng.IntN(40)) * time.Millisecond)
	}
	s.drain(t)

	for b, want := range total {
		sl := kvstore.Slot{Name: "minute", Bucket: b, Length: time.Minute}
		var got int64
		for _, n := range kv.latest(SlotPrefix("k:abc", sl)) {
			got += n
		}
		if got != want {
			t.Errorf("bucket %d: KV holds %d, isolates counted %d", b, got, want)
		}
	}
	if most := maxPutsPerSecond(kv.putLog()); most > 1 {
		t.Errorf("a key was written %d times within one second, want at most 1", most)
	}

	// Once the writes are visible, every isolate sees every count.
	s.advance(10 * time.Second)
	last := minute(end)
	for _, iso := range isos {
		counts := make([]int64, 1)
		for range 2 { // the first Load refreshes in the background
			if err := iso.store.Load(ctx, "k:abc", []kvstore.Slot{last}, counts); err != nil {
				t.Fatal(err)
			}
			s.run(s.Now())
		}
		if err := iso.store.Load(ctx, "k:abc", []kvstore.Slot{last}, counts); err != nil {
			t.Fatal(err)
		}
		if got, want := counts[0], total[last.Bucket]; got != want {
			t.Errorf("%s: settled count = %d, want %d", iso.g.ID(), got, want)
		}
	}
}

// TestSteadyLoadOneKey counts KV operations under 50 requests a second on
// one key for a minute: one write a second, one list of the current bucket
// per list interval.
func TestSteadyLoadOneKey(t *testing.T) {
	s := newSim(t0)
	kv := newFakeKV(s.Now, 0)
	iso := newIsolate(t, s, kv, "iso-a", Options{})
	ctx := context.Background()
	const rps, secs = 50, 60
	counts := make([]int64, 2)
	for range rps * secs {
		now := s.Now()
		cur := minute(now)
		prev := kvstore.Slot{Name: cur.Name, Bucket: cur.Bucket - 1, Length: cur.Length}
		if err := iso.store.Load(ctx, "ip:192.0.2.1", []kvstore.Slot{prev, cur}, counts); err != nil {
			t.Fatal(err)
		}
		if err := iso.store.Add(ctx, "ip:192.0.2.1", []kvstore.Slot{cur}, []int64{1}); err != nil {
			t.Fatal(err)
		}
		s.advance(time.Second / rps)
	}
	s.drain(t)
	puts, lists := len(kv.putLog()), kv.listCount()
	// One write every FlushInterval per key; the minute bucket rolls over
	// once, so two keys each start with a write and end with a trailing one.
	if want := int(secs * time.Second / FlushInterval); puts < want-1 || puts > want+4 {
		t.Errorf("%d writes in %d s of steady load, want about %d (one per %s)", puts, secs, want, FlushInterval)
	}
	if most := maxPutsPerSecond(kv.putLog()); most != 1 {
		t.Errorf("most writes of one key within a second = %d, want 1", most)
	}
	// Current bucket: every 2 s. Previous bucket: every 30 s plus once
	// when it settles. 60 s crosses one bucket boundary.
	if maxLists := secs/2 + secs/30 + 4; lists > maxLists {
		t.Errorf("%d lists in %d s, want at most %d", lists, secs, maxLists)
	}
	if lists < secs/2-2 {
		t.Errorf("%d lists in %d s: the cache is not being refreshed every 2 s", lists, secs)
	}
}

// TestBurstThenTrailingWrite: a burst inside one second writes the first
// count at once and the rest once, one second later, with no more traffic.
func TestBurstThenTrailingWrite(t *testing.T) {
	s := newSim(t0)
	kv := newFakeKV(s.Now, 0)
	iso := newIsolate(t, s, kv, "iso-a", Options{})
	sl := minute(t0)
	for range 200 {
		if err := iso.store.Add(context.Background(), "id", []kvstore.Slot{sl}, []int64{1}); err != nil {
			t.Fatal(err)
		}
		s.advance(time.Millisecond)
	}
	s.drain(t)
	puts := kv.putLog()
	if len(puts) != 2 {
		t.Fatalf("%d writes for a 200 ms burst, want 2 (first and trailing)", len(puts))
	}
	if got, want := puts[1].n, int64(200); got != want {
		t.Errorf("trailing write = %d, want %d", got, want)
	}
	if gap := puts[1].at.Sub(puts[0].at); gap != FlushInterval {
		t.Errorf("trailing write %s after the first, want %s", gap, FlushInterval)
	}
	if puts[1].ttl < MinTTL || !puts[1].at.Add(puts[1].ttl).After(sl.Expires().Add(-time.Second)) {
		t.Errorf("ttl %s at %s does not cover the slot until %s", puts[1].ttl, puts[1].at, sl.Expires())
	}
}

// TestEvictedIsolateLosesAtMostOneSecond evicts an isolate (its background
// work never runs) in the middle of steady traffic.
func TestEvictedIsolateLosesAtMostOneSecond(t *testing.T) {
	s := newSim(t0)
	kv := newFakeKV(s.Now, 0)
	iso := newIsolate(t, s, kv, "iso-a", Options{})
	sl := minute(t0)
	const perMs = 1
	added := map[time.Time]int64{}
	var total int64
	for range 2500 { // 2.5 s, one a millisecond
		if err := iso.store.Add(context.Background(), "id", []kvstore.Slot{sl}, []int64{perMs}); err != nil {
			t.Fatal(err)
		}
		added[s.Now()] = perMs
		total += perMs
		s.advance(time.Millisecond)
	}
	s.drop("iso-a")
	s.drain(t)
	var written int64
	for _, n := range kv.latest(SlotPrefix("id", sl)) {
		written = n
	}
	lost := total - written
	if most := int64(FlushInterval/time.Millisecond) * perMs; lost < 0 || lost > most {
		t.Errorf("eviction lost %d counts, want between 0 and one flush interval's %d", lost, most)
	}
}

// TestWriteFailuresAreRetried: a failed write is retried a second later;
// after three failures in a row the flush stops, and the isolate's next
// sweep (on a request for any client, at most 10 s later) or the counter's
// next Add starts it again.
func TestWriteFailuresAreRetried(t *testing.T) {
	tests := []struct {
		name      string
		failures  int
		wantFinal int64 // what KV holds before more traffic
	}{
		{"one failure", 1, 10},
		{"two failures", 2, 10},
		{"stops after three", 3, 0},
		{"stops after three, fails again", 4, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSim(t0)
			kv := newFakeKV(s.Now, 0)
			kv.failPuts = tt.failures
			iso := newIsolate(t, s, kv, "iso-a", Options{})
			sl := minute(t0)
			add := func(id string, n int64) {
				t.Helper()
				if err := iso.store.Add(context.Background(), id, []kvstore.Slot{sl}, []int64{n}); err != nil {
					t.Fatal(err)
				}
			}
			held := func() int64 { return written(kv, "id", sl, "iso-a") }
			add("id", 10)
			s.drain(t)
			if got := held(); got != tt.wantFinal {
				t.Errorf("KV holds %d, want %d", got, tt.wantFinal)
			}
			// Another client's request after a sweep interval restarts the
			// stopped flush: the closed bucket's count is not lost.
			s.advance(10 * time.Second)
			add("other", 1)
			s.drain(t)
			if got := held(); got != 10 {
				t.Errorf("after the next sweep KV holds %d, want 10", got)
			}
			add("id", 1)
			s.drain(t)
			if got := held(); got != 11 {
				t.Errorf("after one more add KV holds %d, want 11", got)
			}
			if most := maxPutsPerSecond(kv.putLog()); most > 1 {
				t.Errorf("retries wrote one key %d times within a second", most)
			}
		})
	}
}

// TestColdStartListsOnce: 20 concurrent first requests of an isolate for an
// identity run one list per slot, not twenty.
func TestColdStartListsOnce(t *testing.T) {
	s := newSim(t0)
	kv := newFakeKV(s.Now, 0)
	// Another isolate has counted 7 in the previous bucket.
	other := newIsolate(t, s, kv, "iso-other", Options{})
	cur := minute(t0)
	prev := kvstore.Slot{Name: cur.Name, Bucket: cur.Bucket - 1, Length: cur.Length}
	if err := other.store.Add(context.Background(), "id", []kvstore.Slot{prev}, []int64{7}); err != nil {
		t.Fatal(err)
	}
	s.drain(t)

	iso := newIsolate(t, s, kv, "iso-a", Options{})
	gate := make(chan struct{})
	kv.mu.Lock()
	kv.gate = gate
	kv.mu.Unlock()
	before := kv.listCount()
	const n = 20
	results := make([][]int64, n)
	errs := make([]error, n)
	finished := make(chan int, n)
	for i := range results {
		results[i] = make([]int64, 2)
		go func() {
			errs[i] = iso.store.Load(context.Background(), "id", []kvstore.Slot{prev, cur}, results[i])
			finished <- i
		}()
	}
	// One Load lists (and waits at the gate); the others must not wait.
	for range n - 1 {
		select {
		case <-finished:
		case <-time.After(10 * time.Second):
			t.Fatal("more than one of 20 concurrent cold loads is waiting for a list")
		}
	}
	close(gate)
	<-finished
	s.drain(t)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Load %d: %v", i, err)
		}
	}
	// prev (old enough) is listed in the request, cur (10 s old) too.
	if got := kv.listCount() - before; got != 2 {
		t.Errorf("20 concurrent cold loads ran %d lists, want 2 (one per slot)", got)
	}
	listed := 0
	for _, r := range results {
		if r[0] == 7 {
			listed++
		} else if r[0] != 0 {
			t.Errorf("previous bucket count %d, want 7 (listed) or 0 (still listing)", r[0])
		}
	}
	if listed != 1 {
		t.Errorf("%d cold loads saw the listed previous bucket, want exactly the one that listed", listed)
	}
}

// TestNewBucketIsNotListedInTheRequest: a bucket younger than the list
// interval has nothing of other isolates worth waiting for.
func TestNewBucketIsNotListedInTheRequest(t *testing.T) {
	start := window.Start(window.Index(t0, time.Minute)+1, time.Minute) // a bucket's first instant
	s := newSim(start)
	kv := newFakeKV(s.Now, 0)
	iso := newIsolate(t, s, kv, "iso-a", Options{})
	if err := iso.store.Load(context.Background(), "id", []kvstore.Slot{minute(start)}, make([]int64, 1)); err != nil {
		t.Fatal(err)
	}
	if got := kv.listCount(); got != 0 {
		t.Errorf("Load of a new bucket listed %d times in the request, want 0", got)
	}
	s.run(start)
	if got := kv.listCount(); got != 1 {
		t.Errorf("background lists = %d, want 1", got)
	}
}

func TestListFailures(t *testing.T) {
	s := newSim(t0)
	kv := newFakeKV(s.Now, 0)
	kv.failList = 1
	iso := newIsolate(t, s, kv, "iso-a", Options{})
	cur := minute(t0)
	if err := iso.store.Add(context.Background(), "id", []kvstore.Slot{cur}, []int64{3}); err != nil {
		t.Fatal(err)
	}
	counts := make([]int64, 1)
	err := iso.store.Load(context.Background(), "id", []kvstore.Slot{cur}, counts)
	if !errors.Is(err, errFake) || !strings.HasPrefix(err.Error(), "workerskv: ") {
		t.Errorf("cold Load with a failing list = %v, want a workerskv error wrapping the KV's", err)
	}
	if counts[0] != 3 {
		t.Errorf("count on a failed list = %d, want the own count 3", counts[0])
	}
	// The next Load does not wait on KV again, and lists in the background
	// once a list interval has passed since the failure
	// (TestFailedListsWaitTheListInterval).
	lists := kv.listCount()
	if err := iso.store.Load(context.Background(), "id", []kvstore.Slot{cur}, counts); err != nil {
		t.Errorf("Load after the failure: %v", err)
	}
	if got := kv.listCount(); got != lists {
		t.Errorf("Load after a failed cold list listed %d times in the request, want 0", got-lists)
	}
	s.advance(DefaultListInterval)
	if err := iso.store.Load(context.Background(), "id", []kvstore.Slot{cur}, counts); err != nil {
		t.Errorf("Load a list interval after the failure: %v", err)
	}
	s.run(s.Now())
	if got := kv.listCount(); got != lists+1 {
		t.Errorf("background lists after a failed cold list = %d, want 1", got-lists)
	}
	// A background refresh failure keeps the last sum and reports nothing.
	kv.failList = 1
	s.advance(DefaultListInterval)
	if err := iso.store.Load(context.Background(), "id", []kvstore.Slot{cur}, counts); err != nil {
		t.Errorf("Load with a stale sum: %v", err)
	}
	s.run(s.Now())
	if err := iso.store.Load(context.Background(), "id", []kvstore.Slot{cur}, counts); err != nil || counts[0] != 3 {
		t.Errorf("Load after a failed refresh = %d, %v; want 3, nil", counts[0], err)
	}
}

// TestFailedListsWaitTheListInterval: while KV refuses every list (the
// Free plan's 1,000 lists a day used up, an outage), a slot is listed again
// no sooner than a list interval after its last failure, as a listed sum
// is refreshed. Each request listed each slot again (both buckets of every
// shared rule: 120 failed lists for 60 requests over 6 s, each logged).
func TestFailedListsWaitTheListInterval(t *testing.T) {
	for _, listedBefore := range []bool{false, true} {
		t.Run(fmt.Sprintf("listed before %v", listedBefore), func(t *testing.T) {
			s := newSim(t0)
			kv := &listLog{KV: newFakeKV(s.Now, 0), now: s.Now}
			iso := newIsolate(t, s, kv, "iso-a", Options{})
			prev, cur := minute(t0), minute(t0)
			prev.Bucket--
			slots, counts := []kvstore.Slot{prev, cur}, make([]int64, 2)
			from := 0
			if listedBefore {
				_ = iso.store.Load(context.Background(), "id", slots, counts)
				s.run(s.Now())
			}
			kv.mu.Lock()
			kv.fail, from = true, len(kv.lists)
			kv.mu.Unlock()
			for range 60 { // a request every 100 ms
				_ = iso.store.Load(context.Background(), "id", slots, counts)
				s.advance(100 * time.Millisecond)
			}
			last, early := map[string]time.Time{}, 0
			for _, l := range kv.lists[from:] {
				if at, ok := last[l.prefix]; ok && l.at.Sub(at) < DefaultListInterval {
					if early++; early == 1 {
						t.Errorf("%s listed again %v after a failed list, want at least %v", l.prefix, l.at.Sub(at), DefaultListInterval)
					}
				}
				last[l.prefix] = l.at
			}
			if early > 0 {
				t.Errorf("%d of %d lists came early", early, len(kv.lists)-from)
			}
			if len(last) == 0 {
				t.Error("no list in 6 s of failures, want retries")
			}
		})
	}
}

// TestTimedOutListIsListedAgainAtOnce: a cold list cut off by the
// request's store_timeout says nothing against KV: the next request lists
// the slot in the background at once (with no deadline), not a list
// interval later as after KV's own failure.
func TestTimedOutListIsListedAgainAtOnce(t *testing.T) {
	s := newSim(t0)
	kv := newFakeKV(s.Now, 0)
	kv.gate = make(chan struct{}) // lists answer only when the caller gives up
	iso := newIsolate(t, s, kv, "iso-a", Options{})
	slots, counts := []kvstore.Slot{minute(t0)}, make([]int64, 1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := iso.store.Load(ctx, "id", slots, counts); !errors.Is(err, context.Canceled) {
		t.Fatalf("cold Load past its deadline = %v, want context.Canceled", err)
	}
	kv.mu.Lock()
	kv.gate = nil
	kv.mu.Unlock()
	lists := kv.listCount()
	_ = iso.store.Load(context.Background(), "id", slots, counts)
	s.run(s.Now())
	if got := kv.listCount() - lists; got != 1 {
		t.Errorf("lists at the next request after a timed-out one = %d, want 1 (in the background)", got)
	}
}

// listLog is a KV that records when each list was made, and fails them
// all once fail is set.
type listLog struct {
	KV
	now   func() time.Time
	mu    sync.Mutex
	fail  bool
	lists []listed
}

type listed struct {
	prefix string
	at     time.Time
}

func (k *listLog) List(ctx context.Context, prefix, cursor string) (Page, error) {
	k.mu.Lock()
	k.lists = append(k.lists, listed{prefix, k.now()})
	fail := k.fail
	k.mu.Unlock()
	if fail {
		return Page{}, errFake
	}
	return k.KV.List(ctx, prefix, cursor)
}

func TestConcurrentAddsAreExact(t *testing.T) {
	s := newSim(t0)
	kv := newFakeKV(s.Now, 0)
	iso := newIsolate(t, s, kv, "iso-a", Options{})
	local := NewLocal(iso.g, s.Now)
	sl := minute(t0)
	var wg sync.WaitGroup
	for range 100 {
		wg.Go(func() {
			for range 40 {
				_ = iso.store.Add(context.Background(), "id", []kvstore.Slot{sl}, []int64{1})
				_ = local.Add(context.Background(), "id", []kvstore.Slot{sl}, []int64{1})
			}
		})
	}
	wg.Wait()
	s.drain(t)
	if got := kv.latest(SlotPrefix("id", sl))[SlotPrefix("id", sl)+"iso-a"]; got != 4000 {
		t.Errorf("KV holds %d after 4,000 concurrent adds", got)
	}
	counts := make([]int64, 1)
	if err := local.Load(context.Background(), "id", []kvstore.Slot{sl}, counts); err != nil || counts[0] != 4000 {
		t.Errorf("local count = %d, %v; want 4000", counts[0], err)
	}
}

func TestExpiredCellsAreSwept(t *testing.T) {
	s := newSim(t0)
	kv := newFakeKV(s.Now, 0)
	iso := newIsolate(t, s, kv, "iso-a", Options{})
	local := NewLocal(iso.g, s.Now)
	for i := range 50 {
		id := fmt.Sprint("id-", i)
		if err := iso.store.Add(context.Background(), id, []kvstore.Slot{minute(t0)}, []int64{1}); err != nil {
			t.Fatal(err)
		}
		if err := local.Add(context.Background(), id, []kvstore.Slot{minute(t0)}, []int64{1}); err != nil {
			t.Fatal(err)
		}
	}
	s.drain(t)
	if n := iso.g.Len(); n < 100 {
		t.Fatalf("%d cells after 100 adds", n)
	}
	s.run(minute(t0).Expires())
	if err := local.Add(context.Background(), "fresh", []kvstore.Slot{minute(s.Now())}, []int64{1}); err != nil {
		t.Fatal(err)
	}
	if n := iso.g.Len(); n != 3 { // the fresh counter and the two sweep markers
		t.Errorf("%d cells after the slots expired, want 3", n)
	}
}

func TestClockBackwardsStillSweepsAndCounts(t *testing.T) {
	now := t0
	g := NewMemGlobals("x")
	local := NewLocal(g, func() time.Time { return now })
	sl := minute(t0)
	if err := local.Add(context.Background(), "id", []kvstore.Slot{sl}, []int64{2}); err != nil {
		t.Fatal(err)
	}
	now = t0.Add(-time.Hour)
	if err := local.Add(context.Background(), "id", []kvstore.Slot{sl}, []int64{3}); err != nil {
		t.Fatal(err)
	}
	counts := make([]int64, 1)
	if err := local.Load(context.Background(), "id", []kvstore.Slot{sl}, counts); err != nil || counts[0] != 5 {
		t.Errorf("count across a clock step back = %d, %v; want 5", counts[0], err)
	}
}

func TestSlotPrefix(t *testing.T) {
	sl := kvstore.Slot{Name: "minute", Bucket: 29876543, Length: time.Minute}
	p := SlotPrefix("k:secret-api-key", sl)
	if strings.Contains(p, "secret") {
		t.Errorf("prefix %q holds the raw identity", p)
	}
	if !strings.HasPrefix(p, KeyPrefix+"minute:") || !strings.HasSuffix(p, ":60000:29876543:") {
		t.Errorf("prefix %q is not sg:{rule}:{hash}:{length ms}:{bucket}:", p)
	}
	// No two distinct slots share a prefix, and none is a prefix of another.
	distinct := []string{
		SlotPrefix("a", kvstore.Slot{Name: "r", Bucket: 1, Length: time.Minute}),
		SlotPrefix("a", kvstore.Slot{Name: "r", Bucket: 11, Length: time.Minute}),
		SlotPrefix("a", kvstore.Slot{Name: "r", Bucket: 1, Length: time.Hour}),
		SlotPrefix("a", kvstore.Slot{Name: "r:1", Bucket: 1, Length: time.Minute}),
		SlotPrefix("a:1", kvstore.Slot{Name: "r", Bucket: 1, Length: time.Minute}),
		SlotPrefix("b", kvstore.Slot{Name: "r", Bucket: 1, Length: time.Minute}),
	}
	for i, a := range distinct {
		for j, b := range distinct {
			if i != j && strings.HasPrefix(a, b) {
				t.Errorf("%q starts with %q", a, b)
			}
		}
	}
}

func TestTTL(t *testing.T) {
	tests := []struct {
		name   string
		length time.Duration
		at     time.Duration // into the bucket
		want   time.Duration
	}{
		{"minute, start", time.Minute, 0, 2 * time.Minute},
		{"minute, late", time.Minute, 59*time.Second + 500*time.Millisecond, 61 * time.Second},
		{"second rule: at least 60 s", time.Second, 0, MinTTL},
		{"hour", time.Hour, 30 * time.Minute, 90 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := window.Index(t0, tt.length)
			sl := kvstore.Slot{Name: "r", Bucket: b, Length: tt.length}
			if got := ttl(sl.Expires(), window.Start(b, tt.length).Add(tt.at)); got != tt.want {
				t.Errorf("ttl = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestLocalAddIfIsAtomicAcrossStores(t *testing.T) {
	// Two Local values over one Globals are two requests of one isolate.
	g := NewMemGlobals("")
	a, b := NewLocal(g, nil), NewLocal(g, nil)
	sl := minute(t0)
	var admitted sync.Map
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Go(func() {
			l := a
			if i%2 == 1 {
				l = b
			}
			ok, err := l.AddIf(context.Background(), "id", []kvstore.Cond{{Slot: sl, Max: 9, Add: 1}}, make([]int64, 1))
			if err == nil && ok {
				admitted.Store(i, true)
			}
		})
	}
	wg.Wait()
	n := 0
	admitted.Range(func(any, any) bool { n++; return true })
	if n != 10 {
		t.Errorf("admitted %d of 100 against a limit of 10", n)
	}
}

// limitAdmitter admits while every count plus one stays within max.
type limitAdmitter struct{ max int64 }

func (a limitAdmitter) Admit(counts []int64) bool {
	for _, c := range counts {
		if c+1 > a.max {
			return false
		}
	}
	return true
}

func TestLocalUpdate(t *testing.T) {
	g := NewMemGlobals("")
	l := NewLocal(g, func() time.Time { return t0 })
	slots := []kvstore.Slot{minute(t0), {Name: "hour", Bucket: window.Index(t0, time.Hour), Length: time.Hour}}
	var wg sync.WaitGroup
	var mu sync.Mutex
	admitted := 0
	for range 50 {
		wg.Go(func() {
			counts := make([]int64, 2)
			ok, err := l.Update(context.Background(), "id", slots, counts, []int64{1, 1}, limitAdmitter{max: 20})
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				admitted++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if admitted != 20 {
		t.Errorf("Update admitted %d of 50 against 20", admitted)
	}
	counts := make([]int64, 2)
	if err := l.Load(context.Background(), "id", slots, counts); err != nil || counts[0] != 20 || counts[1] != 20 {
		t.Errorf("counts after = %v, %v; want [20 20]", counts, err)
	}
	if _, err := l.Update(context.Background(), "id", slots, counts, nil, limitAdmitter{}); !errors.Is(err, ErrLength) {
		t.Errorf("Update with missing costs = %v, want ErrLength", err)
	}
}

// TestHugeCountsSaturate: counts listed from KV that are out of any limit's
// range (a key written by something else, or corrupted; the Worker reads
// 1e300 in metadata as math.MaxInt64) make the slot's count saturate at
// math.MaxInt64, so the client is denied. Summed with wrap-around they
// came out negative, which the window reads as zero: every request admitted.
func TestHugeCountsSaturate(t *testing.T) {
	const huge = math.MaxInt64
	tests := []struct {
		name   string
		others []int64 // the other isolates' counts in KV
		own    int64
		want   int64
	}{
		{"one huge key and an own count", []int64{huge}, 5, huge},
		{"two keys past the range together", []int64{huge/2 + 1, huge/2 + 1}, 0, huge},
		{"huge after a negative", []int64{-3, huge, 2}, 1, huge},
		{"ordinary counts", []int64{4, 2, -1}, 3, 9},
	}
	rule := window.Rule{Name: "minute", Limit: 100, Period: time.Minute}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSim(t0)
			kv := newFakeKV(s.Now, 0)
			cur := minute(t0)
			for i, n := range tt.others {
				key := SlotPrefix("id", cur) + fmt.Sprint("other-", i)
				if err := kv.Put(context.Background(), key, fmt.Sprint(n), n, MinTTL); err != nil {
					t.Fatal(err)
				}
			}
			iso := newIsolate(t, s, kv, "iso-a", Options{})
			if tt.own != 0 {
				if err := iso.store.Add(context.Background(), "id", []kvstore.Slot{cur}, []int64{tt.own}); err != nil {
					t.Fatal(err)
				}
			}
			counts := make([]int64, 1)
			if err := iso.store.Load(context.Background(), "id", []kvstore.Slot{cur}, counts); err != nil {
				t.Fatal(err)
			}
			if counts[0] != tt.want {
				t.Errorf("count = %d, want %d", counts[0], tt.want)
			}
			if d := rule.Decide(s.Now(), 0, counts[0], 1); d.Allowed != (tt.want < rule.Limit) {
				t.Errorf("decision on %d: allowed %t", counts[0], d.Allowed)
			}
		})
	}
}

// gatedKV holds every List until gate closes, telling entered first.
type gatedKV struct {
	KV
	entered chan struct{}
	gate    chan struct{}
}

func (g gatedKV) List(ctx context.Context, prefix, cursor string) (Page, error) {
	g.entered <- struct{}{}
	<-g.gate
	return g.KV.List(ctx, prefix, cursor)
}

// TestColdLoadRereadsEverySlot: a client's first request in an isolate
// waits for the list of its previous bucket, while its current bucket, 2 s
// young, is not listed in the request. Requests of the client that arrive
// meanwhile are decided and counted on the isolate's own count. The waiting
// request must decide on the count as it is after its wait, or the isolate
// admits past the limit: Load read the current bucket before the wait and
// re-read only the slots it listed, and the sixth request of a limit of 5
// was admitted.
func TestColdLoadRereadsEverySlot(t *testing.T) {
	start := window.Start(window.Index(t0, time.Minute)+1, time.Minute).Add(500 * time.Millisecond)
	s := newSim(start)
	kv := gatedKV{KV: newFakeKV(s.Now, 0), entered: make(chan struct{}, 1), gate: make(chan struct{})}
	iso := newIsolate(t, s, kv, "iso-a", Options{})
	lim := limiter.New(limiter.Options{Store: iso.store, DisableDenyCache: true})
	const limit = 5
	rules := []limiter.Rule{{Rule: window.Rule{Name: "minute", Limit: limit, Period: time.Minute}}}
	ctx := context.Background()
	first := make(chan bool, 1)
	go func() {
		res, err := lim.Check(ctx, start, "id", rules, 1)
		if err != nil {
			t.Error(err)
		}
		first <- res.Allowed
	}()
	<-kv.entered // the first request waits for its list
	for i := range limit {
		res, err := lim.Check(ctx, start, "id", rules, 1)
		if err != nil || !res.Allowed {
			t.Fatalf("request %d while the first lists: allowed %t, %v", i+2, res.Allowed, err)
		}
	}
	close(kv.gate)
	if <-first {
		t.Errorf("the first request, decided after %d others were admitted, was admitted too: %d in all against %d", limit, limit+1, limit)
	}
	counts := make([]int64, 1)
	if err := iso.store.Load(ctx, "id", []kvstore.Slot{minute(start)}, counts); err != nil || counts[0] != limit {
		t.Errorf("count = %d, %v; want %d", counts[0], err, limit)
	}
}
