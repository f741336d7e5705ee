package workerskv

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate/kvstore"
	"github.com/slidegate/slidegate/limiter"
	"github.com/slidegate/slidegate/window"
)

// requestLife is how long the Worker keeps a request's background work:
// 30 s after its response, which the tests put at the request's start.
const requestLife = 30 * time.Second

// written returns what KV holds for the isolate's counter of sl.
func written(kv *fakeKV, id string, sl kvstore.Slot, iso string) int64 {
	return kv.latest(SlotPrefix(id, sl))[SlotPrefix(id, sl)+iso]
}

// TestSteadyLoadOutlivesARequest: 10 requests a second on one key for a
// whole minute bucket, each its own Store (own Go instance, own 30 s of
// background work) over the isolate's globals. The writes must move to
// newer requests, so that every count reaches KV once the bucket closes,
// with no key written twice in a second. Without a handoff the writes die
// with the first request's background work, after about 30 s.
func TestSteadyLoadOutlivesARequest(t *testing.T) {
	tests := []struct {
		name   string
		during bool // a request arrives while each put is awaited
	}{
		{"fast puts", false},
		{"a request during every put", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC) // a bucket's start
			s := newSim(start)
			fk := newFakeKV(s.Now, 0)
			g := NewMemGlobals("iso-a")
			sl := minute(start)
			end := start.Add(59 * time.Second)
			var total int64
			var kv KV = fk
			add := func() {
				if err := s.request(t, kv, g, requestLife).Add(context.Background(), "id", []kvstore.Slot{sl}, []int64{1}); err != nil {
					t.Fatal(err)
				}
				total++
			}
			if tt.during {
				kv = slowKV{fakeKV: fk, during: func() {
					if s.Now().Before(end) {
						add()
					}
				}}
			}
			for s.Now().Before(end) {
				add()
				s.advance(100 * time.Millisecond)
			}
			s.drain(t)
			if got := written(fk, "id", sl, "iso-a"); got != total {
				t.Errorf("KV holds %d of the isolate's %d counts of the closed bucket", got, total)
			}
			puts := fk.putLog()
			if last := puts[len(puts)-1].at.Sub(start); last < 55*time.Second {
				t.Errorf("last write %s into the bucket, want near its end (59 s)", last)
			}
			if most := maxPutsPerSecond(puts); most != 1 {
				t.Errorf("most writes of one key within a second = %d, want 1", most)
			}
			if s.dropped != 0 {
				t.Errorf("%d tasks scheduled past their request's end", s.dropped)
			}
		})
	}
}

// TestBusyClientsShareAWriter: 20 clients each send a request every 0.5 s
// to one isolate. A request keeps its Go instance (about 5 MB of the
// isolate's 128 MB) alive while it has background work, and each client's
// writes ran in a request of that client until they caught up, then in its
// next one: 20 requests alive with none in flight, one per busy client. The
// isolate's sweep gathers them in the request that swept, where they linger
// for the next counts, and follow each counter into its next bucket: a
// bucket's end made every client's counter a new one, whose writes went
// back to the client's own requests until the next sweep (20 instances for
// up to 10 s of every minute). Every count still reaches KV, and no key is
// written twice in a second.
func TestBusyClientsShareAWriter(t *testing.T) {
	const clients, tick = 20, 25 * time.Millisecond
	tests := []struct {
		name string
		run  time.Duration // from t0, 50 s before the minute's end
	}{
		{"within a bucket", 40 * time.Second},
		{"across a bucket's end", 80 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			most := busyClients(t, clients, tick, tt.run, 15*time.Second, func(now time.Time) []kvstore.Slot { return []kvstore.Slot{minute(now)} })
			if most > 2 {
				t.Errorf("up to %d requests alive for their background work, want at most 2 for %d busy clients", most, clients)
			}
		})
	}
}

// TestSweepRestartsWritesOfADeadRequest: the request that was to write a
// counter's trailing count lost its background work (cancelled early), and
// the counter's bucket gets no more traffic. The isolate's next sweep, on a
// request for another client, writes the count.
func TestSweepRestartsWritesOfADeadRequest(t *testing.T) {
	s := newSim(t0)
	kv := newFakeKV(s.Now, 0)
	g := NewMemGlobals("iso-a")
	sl := minute(t0)
	ctx := context.Background()
	// The first Add writes at once; the second's trailing write is due
	// 1.05 s later, after the request's work was cancelled.
	for range 2 {
		if err := s.request(t, kv, g, 500*time.Millisecond).Add(ctx, "id", []kvstore.Slot{sl}, []int64{1}); err != nil {
			t.Fatal(err)
		}
		s.advance(100 * time.Millisecond)
	}
	s.drain(t)
	if got := written(kv, "id", sl, "iso-a"); got != 1 {
		t.Fatalf("KV holds %d before the restart, want 1 (the trailing write never ran)", got)
	}
	tests := []struct {
		after time.Duration // since the counter's writes started
		want  int64
	}{
		{5 * time.Second, 1},  // no sweep due yet, and too young for a handoff
		{15 * time.Second, 2}, // the next sweep, 10 s after the first
	}
	for _, tt := range tests {
		s.run(t0.Add(tt.after))
		other := s.request(t, kv, g, requestLife)
		if err := other.Add(ctx, "other", []kvstore.Slot{sl}, []int64{1}); err != nil {
			t.Fatal(err)
		}
		s.drain(t)
		if got := written(kv, "id", sl, "iso-a"); got != tt.want {
			t.Errorf("%s after: KV holds %d, want %d", tt.after, got, tt.want)
		}
	}
}

// TestFlushStopsWithinItsRequest: requests arrive only while a put is
// awaited, so none can take the writes over (a put is in flight). The
// owner's flush stops before its request's background work ends, scheduling
// nothing that would never run; the isolate's next sweep writes the rest.
func TestFlushStopsWithinItsRequest(t *testing.T) {
	s := newSim(t0)
	fk := newFakeKV(s.Now, 0)
	g := NewMemGlobals("iso-a")
	sl := minute(t0)
	ctx := context.Background()
	var total int64
	var kv slowKV
	add := func(id string) {
		if err := s.request(t, kv, g, requestLife).Add(ctx, id, []kvstore.Slot{sl}, []int64{1}); err != nil {
			t.Fatal(err)
		}
		if id == "id" {
			total++
		}
	}
	kv = slowKV{fakeKV: fk, during: func() {
		if s.Now().Before(t0.Add(40 * time.Second)) {
			add("id")
		}
	}}
	add("id")
	s.drain(t)
	puts := fk.putLog()
	if last := puts[len(puts)-1].at.Sub(t0); last > time.Duration(flushBudget)*time.Millisecond {
		t.Errorf("last write %s after its request started, want within %s", last, time.Duration(flushBudget)*time.Millisecond)
	}
	if s.dropped != 0 {
		t.Errorf("%d tasks scheduled past their request's end", s.dropped)
	}
	if got := written(fk, "id", sl, "iso-a"); got >= total {
		t.Fatalf("KV holds %d of %d: the flush did not stop", got, total)
	}
	s.run(t0.Add(30 * time.Second))
	add("other")
	s.drain(t)
	if got := written(fk, "id", sl, "iso-a"); got != total {
		t.Errorf("after the next sweep KV holds %d, want %d", got, total)
	}
	if most := maxPutsPerSecond(fk.putLog()); most != 1 {
		t.Errorf("most writes of one key within a second = %d, want 1", most)
	}
}

// TestSweepRestartsWritesBesideLocalRules: the isolate's sweep restarts a
// stopped flush also when every request passes local rules first (a local
// ip_limits flood guard, as in the shipped wrangler.toml). The local
// store's sweep runs first on each request; when it took the isolate's one
// sweep marker, the Store's sweep never came due, and a client that sent no
// more requests kept its counts out of KV for good.
func TestSweepRestartsWritesBesideLocalRules(t *testing.T) {
	s := newSim(t0)
	kv := newFakeKV(s.Now, 0)
	kv.failPuts = maxPutFailures // the first flush stops with the count unwritten
	iso := newIsolate(t, s, kv, "iso-a", Options{})
	lim := limiter.New(limiter.Options{Store: iso.store, Local: NewLocal(iso.g, s.Now), DisableDenyCache: true})
	rules := []limiter.Rule{
		{Rule: window.Rule{Name: "ip-second", Limit: 50, Period: time.Second}, Local: true},
		{Rule: window.Rule{Name: "minute", Limit: 100, Period: time.Minute}},
	}
	check := func(id string) {
		t.Helper()
		if res, err := lim.Check(context.Background(), s.Now(), id, rules, 1); err != nil || !res.Allowed {
			t.Fatalf("check of %s: allowed %t, %v", id, res.Allowed, err)
		}
	}
	sl := minute(t0)
	check("id")
	s.drain(t)
	if got := written(kv, "id", sl, "iso-a"); got != 0 {
		t.Fatalf("KV holds %d after three failed writes, want 0", got)
	}
	// Other clients keep the isolate busy; "id" sends nothing more.
	for range 3 {
		s.advance(time.Duration(sweepEvery) * time.Millisecond)
		check("other")
		s.drain(t)
	}
	if got := written(kv, "id", sl, "iso-a"); got != 1 {
		t.Errorf("KV holds %d for the quiet client after 30 s of other traffic, want its 1", got)
	}
}

// TestSweepRestartsEveryStoppedFlush: Workers KV refuses every write while
// 300 clients of one isolate count once each, 10 s before their minute
// ends, and send nothing more: each flush stops after three failed writes.
// KV recovers, and another client keeps the isolate busy with a request a
// second. Every stopped count must reach KV before its counter expires
// (the end of the next minute). A sweep takes on at most maxAdopt
// counters, and one every 10 s restarted 30 stopped flushes: 210 of the
// 300 in the 70 s left, the rest lost though the isolate served requests
// all along.
func TestSweepRestartsEveryStoppedFlush(t *testing.T) {
	const quiet = 300
	start := t0.Add(40 * time.Second) // 12:00:50
	s := newSim(start)
	kv := newFakeKV(s.Now, 0)
	kv.failPuts = quiet * maxPutFailures
	g := NewMemGlobals("iso-a")
	ctx := context.Background()
	sl := minute(start)
	for c := range quiet {
		if err := s.request(t, kv, g, requestLife).Add(ctx, fmt.Sprint("quiet-", c), []kvstore.Slot{sl}, []int64{1}); err != nil {
			t.Fatal(err)
		}
	}
	end := sl.Expires()
	for s.Now().Before(end) {
		s.advance(time.Second)
		if err := s.request(t, kv, g, requestLife).Add(ctx, "busy", []kvstore.Slot{minute(s.Now())}, []int64{1}); err != nil {
			t.Fatal(err)
		}
	}
	s.drain(t)
	if lost := unwritten(kv, quiet, sl, 1); lost > 0 {
		t.Errorf("%d of %d stopped counts never reached KV before they expired", lost, quiet)
	}
	if n := maxPutsPerSecond(kv.putLog()); n != 1 {
		t.Errorf("most writes of one key within a second = %d, want 1", n)
	}
}

// TestManyBusyClientsShareFewWriters: more busy counters than one sweep
// takes on (maxAdopt). 60 clients, each with a minute and a day rule
// (wrangler.toml's plans) and a request every 0.5 s: 120 counters. One
// sweep every 10 s took 30 of them, the same 30 each time, and each client
// whose counters were left out kept the request that counted last alive
// for its writes: 73 to 92 Go instances of about 5 MB with no
// request in flight (24 to 34 for 30 such clients; the order of the map
// decides), where Cloudflare resets an isolate past 128 MB, unwritten
// counts and all. The next request now sweeps again a second later for
// those left out, a sweep leaves alone the counters a sweep of the last
// 10 s took on and takes those of older sweeps first, and it takes on a
// counter written a moment ago too (between two writes of a busy client,
// no request runs them): about one instance per 30 busy counters, 7 to 9
// here.
func TestManyBusyClientsShareFewWriters(t *testing.T) {
	const clients = 60
	most := busyClients(t, clients, 5*time.Millisecond, 80*time.Second, 15*time.Second, func(now time.Time) []kvstore.Slot { // across the minute's end
		return []kvstore.Slot{minute(now), {Name: "day", Length: 24 * time.Hour, Bucket: window.Index(now, 24*time.Hour)}}
	})
	if most > 12 {
		t.Errorf("up to %d requests alive for their background work, want at most 12 for %d busy counters", most, 2*clients)
	}
}

// TestHundredBusyClientsShareFewWriters: 100 busy clients of two rules,
// 200 counters, which the sweeps take on 30 a second, in 7 sweeps. The
// sweep after the last of them came 10 s later, and took the counters of
// the first sweeps (aged) last: those waited 17 to 24 s in the first
// sweeps' requests, whose writes stop at flushBudget (25 s), and went back
// to each client's own requests: 37 to 51 instances alive every 16 s. The
// next sweep now comes as the oldest sweep's counters age, and takes them:
// 10 to 14 instances (37 to 51 before).
func TestHundredBusyClientsShareFewWriters(t *testing.T) {
	const clients = 100
	most := busyClients(t, clients, 5*time.Millisecond, 130*time.Second, 20*time.Second, func(now time.Time) []kvstore.Slot { // across two minutes' ends
		return []kvstore.Slot{minute(now), {Name: "day", Length: 24 * time.Hour, Bucket: window.Index(now, 24*time.Hour)}}
	})
	if most > 20 {
		t.Errorf("up to %d requests alive for their background work, want at most 20 for %d busy counters", most, 2*clients)
	}
}

// busyClients runs clients, each counting the slots of its time once every
// 0.5 s for run, each request its own Store, ticking by tick. It returns
// the most requests alive for their background work after settle (the
// first sweeps), and checks that every count reached KV, no key was
// written twice within a second and no task was dropped.
func busyClients(t *testing.T, clients int, tick, run, settle time.Duration, slots func(time.Time) []kvstore.Slot) int {
	t.Helper()
	s := newSim(t0)
	kv := newFakeKV(s.Now, 0)
	g := NewMemGlobals("iso-a")
	ctx := context.Background()
	type counter struct {
		client int
		sl     kvstore.Slot
	}
	counted := map[counter]int64{}
	most := 0
	for i := range run / tick {
		if c := int(i % (500 * time.Millisecond / tick)); c < clients {
			sls := slots(s.Now())
			costs := make([]int64, len(sls))
			for k, sl := range sls {
				costs[k] = 1
				counted[counter{c, sl}]++
			}
			if err := s.request(t, kv, g, requestLife).Add(ctx, fmt.Sprint("client-", c), sls, costs); err != nil {
				t.Fatal(err)
			}
		}
		s.advance(tick)
		if i*tick >= settle {
			most = max(most, s.live())
		}
	}
	s.drain(t)
	for k, n := range counted {
		if got := written(kv, fmt.Sprint("client-", k.client), k.sl, "iso-a"); got != n {
			t.Errorf("client %d, %s bucket %d: KV holds %d, want %d", k.client, k.sl.Name, k.sl.Bucket, got, n)
		}
	}
	if n := maxPutsPerSecond(kv.putLog()); n != 1 {
		t.Errorf("most writes of one key within a second = %d, want 1", n)
	}
	if s.dropped != 0 {
		t.Errorf("%d tasks scheduled past their request's end", s.dropped)
	}
	return most
}

// TestStepBackLeavesWrittenCountersAlone: 60 clients of a day rule counted
// twice each, were written, and send nothing more; then the clock steps
// back two minutes, and another client sends a request every 0.5 s. The
// sweep takes on a counter written within FlushInterval (a busy client
// between two writes), and a counter written "in the future" counted as
// one: each sweep took on 30 of the 60, which had nothing to write, kept
// its request alive 2.1 s for them, and, with more than maxAdopt left,
// had the next request sweep again a second later, reading every cell,
// until the clock caught up (1,485 take-overs in 30 s). As for eviction
// (bound), a write after now is not one of a moment ago.
func TestStepBackLeavesWrittenCountersAlone(t *testing.T) {
	s := newSim(t0)
	kv := newFakeKV(s.Now, 0)
	g := NewMemGlobals("iso-a")
	ctx := context.Background()
	day := []kvstore.Slot{{Name: "day", Length: 24 * time.Hour, Bucket: window.Index(t0, 24*time.Hour)}}
	for c := range 60 {
		if err := s.request(t, kv, g, requestLife).Add(ctx, fmt.Sprint("client-", c), day, []int64{2}); err != nil {
			t.Fatal(err)
		}
	}
	s.drain(t)
	s.mu.Lock()
	s.now = s.now.Add(-2 * time.Minute)
	s.mu.Unlock()
	other := SlotPrefix("other", day[0])
	taken := 0
	for range 60 {
		if err := s.request(t, kv, g, requestLife).Add(ctx, "other", day, []int64{1}); err != nil {
			t.Fatal(err)
		}
		g.Update(func(c Cells) {
			for key, cell := range c.(memCells) {
				if strings.HasPrefix(key, KeyPrefix) && !strings.HasPrefix(key, other) && cell.Owner != 0 {
					taken++
				}
			}
		})
		s.advance(500 * time.Millisecond)
	}
	s.drain(t)
	if taken != 0 {
		t.Errorf("the written counters of quiet clients were taken on %d times (summed over 60 requests), want 0", taken)
	}
	for c := range 60 {
		if got := written(kv, fmt.Sprint("client-", c), day[0], "iso-a"); got != 2 {
			t.Errorf("client %d: KV holds %d, want 2", c, got)
		}
	}
}
