package workerskv

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/slidegate/slidegate/kvstore"
	"github.com/slidegate/slidegate/window"
)

// putKV is a KV whose puts succeed, or fail while fail is set, and whose
// lists find nothing: the isolate's own cells are what is measured.
type putKV struct {
	mu   sync.Mutex
	fail bool
	puts int
}

func (k *putKV) Put(context.Context, string, string, int64, time.Duration) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.puts++
	if k.fail {
		return errFake
	}
	return nil
}

func (k *putKV) List(context.Context, string, string) (Page, error) { return Page{Done: true}, nil }

// warnLog records what a Store logs.
type warnLog struct {
	mu    sync.Mutex
	lines []warnLine
}

type warnLine struct {
	msg  string
	args []any
}

func (l *warnLog) Warn(msg string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, warnLine{msg, args})
}

var day = func(t time.Time) kvstore.Slot {
	return kvstore.Slot{Name: "day", Bucket: window.Index(t, 24*time.Hour), Length: 24 * time.Hour}
}

// TestIsolateCellsAreBounded: a client per made-up key (or IPv6 network)
// left a day rule's cells in the isolate for up to two days, with no bound:
// at about 170 bytes a cell, some 250,000 such clients filled an isolate's
// 128 MB. The isolate now holds at most maxCells, and evicts the clients
// that count least first.
func TestIsolateCellsAreBounded(t *testing.T) {
	for _, tc := range scopes {
		t.Run(tc.name, func(t *testing.T) {
			s := newSim(t0)
			iso := newIsolate(t, s, &putKV{}, "iso-a", Options{Logger: &warnLog{}})
			add, count := counters(t, iso, s, tc.local)
			add("busy", day(s.Now()), 500)
			for i := range maxCells + maxCells/2 {
				add("made-up-"+strconv.Itoa(i), day(s.Now()), 1)
				if i%1000 == 0 {
					s.advance(time.Second)
				}
			}
			s.drain(t)
			if n := iso.g.Len(); n > maxCells+3 {
				t.Errorf("%d cells after %d clients, want at most %d", n, maxCells+maxCells/2, maxCells)
			}
			if got, want := count("busy", day(s.Now())), int64(500); got != want {
				t.Errorf("the busy client's count = %d after the flood, want %d (evicted before clients counted once)", got, want)
			}
		})
	}
}

// TestEvictedUnwrittenCountsAreLogged: while KV refuses every write, a full
// isolate evicts counters whose counts never reached KV only as the last
// resort, and names each with the counts lost; Local's requests leave them
// to the Store's.
func TestEvictedUnwrittenCountsAreLogged(t *testing.T) {
	ctx := context.Background()
	s := newSim(t0)
	kv := &putKV{fail: true}
	log := &warnLog{}
	iso := newIsolate(t, s, kv, "iso-a", Options{Logger: log})
	local := NewLocal(iso.g, s.Now)
	total := maxCells + maxCells/5
	for i := range total {
		id := "c-" + strconv.Itoa(i)
		if err := iso.store.Add(ctx, id, []kvstore.Slot{day(s.Now())}, []int64{2}); err != nil {
			t.Fatal(err)
		}
		if i%1000 == 0 {
			s.advance(time.Second)
		}
	}
	if err := local.Add(ctx, "ip:198.51.100.7", []kvstore.Slot{minute(s.Now())}, []int64{1}); err != nil {
		t.Fatal(err)
	}
	var lost int64
	for _, l := range log.lines {
		if l.msg != "workerskv: isolate full, unwritten counts evicted" {
			continue
		}
		if fmt.Sprint(l.args[0]) != "key" || fmt.Sprint(l.args[2]) != "n" {
			t.Fatalf("log line %v: want key and n", l.args)
		}
		lost += l.args[3].(int64)
	}
	var kept int64
	iso.g.Update(func(c Cells) {
		c.Sweep(s.Now().UnixMilli(), func(key string, cell Cell) {
			if len(key) > len(KeyPrefix) && key[:len(KeyPrefix)] == KeyPrefix {
				kept += cell.N - cell.Flushed
			}
		})
	})
	if lost == 0 {
		t.Errorf("no eviction of unwritten counts logged after %d clients", total)
	}
	if got, want := lost+kept, int64(2*total); got != want {
		t.Errorf("unwritten counts kept %d + logged as evicted %d = %d, want %d", kept, lost, got, want)
	}
	if n := iso.g.Len(); n > maxCells+4 {
		t.Errorf("%d cells, want at most %d", n, maxCells)
	}
}

func TestCellLength(t *testing.T) {
	sl := kvstore.Slot{Name: "a:b|c", Bucket: 7, Length: 90 * time.Second}
	for _, tc := range []struct {
		key  string
		want int64
	}{
		{SlotPrefix("k:x", sl) + "iso", 90000},
		{sumKey(SlotPrefix("ip:2001:db8::/64", sl)), 90000},
		{localKey("ip:2001:db8::/64", sl), 90000},
		{localKey("a|b", sl), 90000},
		{clockKey, 0},
		{sweepKey, 0},
		{localSweepKey, 0},
		{"sg:x", 0},
		{"l|x|-5|1|id", 0},
	} {
		t.Run(tc.key, func(t *testing.T) {
			if got := cellLength(tc.key); got != tc.want {
				t.Errorf("cellLength(%q) = %d, want %d", tc.key, got, tc.want)
			}
		})
	}
}

// valueKV is putKV that keeps the last value written to each key.
type valueKV struct {
	putKV
	last map[string]int64
}

func (k *valueKV) Put(ctx context.Context, key, v string, n int64, ttl time.Duration) error {
	k.mu.Lock()
	if k.last == nil {
		k.last = map[string]int64{}
	}
	k.last[key] = n
	k.mu.Unlock()
	return k.putKV.Put(ctx, key, v, n, ttl)
}

// TestTakeBackAfterEvictionGivesNoCredit: the handler takes a request's ip
// rules count back when the plan denies it (settleIP), and the plan's own
// check may run the isolate's eviction first. Taking back from a counter
// evicted since created it at minus the cost: the IP's next request in the
// isolate was free, and a shared rule wrote -1 to the IP's KV key. As
// memstore does, a take-back from a counter the isolate no longer holds
// does nothing.
func TestTakeBackAfterEvictionGivesNoCredit(t *testing.T) {
	hour := func(t time.Time) kvstore.Slot {
		return kvstore.Slot{Name: "ip-hour", Bucket: window.Index(t, time.Hour), Length: time.Hour}
	}
	for _, tc := range scopes {
		t.Run(tc.name, func(t *testing.T) {
			s := newSim(t0)
			kv := &valueKV{}
			iso := newIsolate(t, s, kv, "iso-a", Options{})
			add, count := counters(t, iso, s, tc.local)
			const ip = "ip:203.0.113.9"
			add(ip, hour(s.Now()), 1) // the ip rules admit the request
			s.drain(t)                // and its count is written
			s.advance(2 * time.Second)
			// Other clients fill the isolate: its eviction drops the IP's
			// counter, the least count per unit of time.
			for i := range maxCells + 1 {
				add("c-"+strconv.Itoa(i), minute(s.Now()), 2)
			}
			s.drain(t)
			if got := count(ip, hour(s.Now())); got != 0 {
				t.Fatalf("the IP's count before the take-back = %d, want 0 (evicted)", got)
			}
			add(ip, hour(s.Now()), -1) // the plan denied it: taken back
			s.drain(t)
			if got := count(ip, hour(s.Now())); got != 0 {
				t.Errorf("the IP's count after taking back from its evicted counter = %d, want 0", got)
			}
			if n := kv.last[SlotPrefix(ip, hour(s.Now()))+"iso-a"]; n < 0 {
				t.Errorf("KV holds %d for the IP's counter, want no negative count", n)
			}
			add(ip, hour(s.Now()), 1)
			if got := count(ip, hour(s.Now())); got != 1 {
				t.Errorf("the IP's count after its next request = %d, want 1", got)
			}
		})
	}
}

// scopes are the two stores of an isolate's counters that evict.
var scopes = []struct {
	name  string
	local bool
}{{"Store", false}, {"Local", true}}

// counters returns add, which counts n for id in sl, and count, which reads
// id's count of sl, through the isolate's Store, or its Local when local.
func counters(t *testing.T, iso isolate, s *sim, local bool) (add func(id string, sl kvstore.Slot, n int64), count func(id string, sl kvstore.Slot) int64) {
	ctx := context.Background()
	l := NewLocal(iso.g, s.Now)
	add = func(id string, sl kvstore.Slot, n int64) {
		t.Helper()
		var err error
		if local {
			err = l.Add(ctx, id, []kvstore.Slot{sl}, []int64{n})
		} else {
			err = iso.store.Add(ctx, id, []kvstore.Slot{sl}, []int64{n})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	count = func(id string, sl kvstore.Slot) int64 {
		t.Helper()
		counts := make([]int64, 1)
		var err error
		if local {
			err = l.Load(ctx, id, []kvstore.Slot{sl}, counts)
		} else {
			err = iso.store.Peek(ctx, id, []kvstore.Slot{sl}, counts)
		}
		if err != nil {
			t.Fatal(err)
		}
		return counts[0]
	}
	return add, count
}

// hookKV is fakeKV that runs during, once, while the first put of key is
// awaited.
type hookKV struct {
	*fakeKV
	key    string
	during func()
}

func (k *hookKV) Put(ctx context.Context, key, v string, n int64, ttl time.Duration) error {
	err := k.fakeKV.Put(ctx, key, v, n, ttl)
	if f := k.during; key == k.key && f != nil {
		k.during = nil
		f()
	}
	return err
}

// TestEvictionSparesCountersBeingWritten: the eviction dropped a counter
// whose write had just started, or was still awaited, and the client's
// next count a moment later made a new counter that wrote the key at once:
// two writes of one KV key within a second, which KV refuses, and when the
// first was still awaited, its counts were logged as lost though they were
// being written. A counter written within FlushInterval, or with a write in
// flight, is now not evicted.
func TestEvictionSparesCountersBeingWritten(t *testing.T) {
	ctx := context.Background()
	hour := func(t time.Time) kvstore.Slot {
		return kvstore.Slot{Name: "hour", Bucket: window.Index(t, time.Hour), Length: time.Hour}
	}
	for _, tc := range []struct {
		name     string
		inFlight bool // the flood comes while the client's first write is awaited
	}{{"written a moment ago", false}, {"write awaited", true}} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSim(t0)
			fk := newFakeKV(s.Now, 0)
			const id = "client"
			kv := &hookKV{fakeKV: fk, key: SlotPrefix(id, hour(t0)) + "iso-a"}
			log := &warnLog{}
			iso := newIsolate(t, s, kv, "iso-a", Options{Logger: log})
			add := func(id string, sl kvstore.Slot, n int64) {
				t.Helper()
				if err := iso.store.Add(ctx, id, []kvstore.Slot{sl}, []int64{n}); err != nil {
					t.Fatal(err)
				}
			}
			flood := func() {
				// Other clients fill the isolate; the client's counter
				// counts least per unit of time.
				for i := range maxCells + 1 {
					add("c-"+strconv.Itoa(i), minute(s.Now()), 2)
				}
				s.advance(300 * time.Millisecond)
				add(id, hour(s.Now()), 1) // the client's next request
			}
			add(id, hour(s.Now()), 3)
			if tc.inFlight {
				kv.during = flood
				s.drain(t)
			} else {
				s.drain(t)
				flood()
			}
			s.drain(t)
			var puts []putRecord
			for _, p := range fk.putLog() {
				if p.key == kv.key {
					puts = append(puts, p)
				}
			}
			if most := maxPutsPerSecond(puts); most != 1 {
				t.Errorf("%d writes of the client's key within a second, want 1: %v", most, puts)
			}
			if got, want := puts[len(puts)-1].n, int64(4); got != want {
				t.Errorf("KV holds %d for the client, want %d", got, want)
			}
			for _, l := range log.lines {
				if l.msg == "workerskv: isolate full, unwritten counts evicted" && l.args[1] == kv.key {
					t.Errorf("the client's counts logged as evicted: %v", l.args)
				}
			}
		})
	}
}
