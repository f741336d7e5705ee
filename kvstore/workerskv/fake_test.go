package workerskv

import (
	"container/heap"
	"context"
	"errors"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// sim is a discrete-event scheduler on a virtual clock: the Later of every
// simulated isolate. Tests move time with run; nothing sleeps.
type sim struct {
	mu     sync.Mutex
	now    time.Time
	seq    int
	events eventHeap
	// dropped counts the tasks a requestLater dropped: due after their
	// request's background work was cancelled.
	dropped int
	reqs    int // requests made so far (requestLater)
}

type event struct {
	at   time.Time
	seq  int
	tag  string
	req  int // the request whose background work it is (requestLater); 0: none
	task func(context.Context)
}

type eventHeap []event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(event)) }
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

func newSim(t0 time.Time) *sim { return &sim{now: t0} }

func (s *sim) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.now
}

// later returns the Options.Later of the isolate tagged tag.
func (s *sim) later(tag string) func(time.Duration, func(context.Context)) {
	return func(d time.Duration, task func(context.Context)) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.seq++
		heap.Push(&s.events, event{at: s.now.Add(d), seq: s.seq, tag: tag, task: task})
	}
}

// run runs every event due up to t in time order, then sets the clock to t.
func (s *sim) run(t time.Time) {
	for {
		s.mu.Lock()
		if len(s.events) == 0 || s.events[0].at.After(t) {
			if t.After(s.now) {
				s.now = t
			}
			s.mu.Unlock()
			return
		}
		e := heap.Pop(&s.events).(event)
		if e.at.After(s.now) {
			s.now = e.at
		}
		s.mu.Unlock()
		e.task(context.Background())
	}
}

// advance moves the clock by d, running what falls due.
func (s *sim) advance(d time.Duration) { s.run(s.Now().Add(d)) }

// drain runs events until none is left, failing the test if they never stop.
func (s *sim) drain(t *testing.T) {
	t.Helper()
	for range 10000 {
		s.mu.Lock()
		n := len(s.events)
		var at time.Time
		if n > 0 {
			at = s.events[0].at
		}
		s.mu.Unlock()
		if n == 0 {
			return
		}
		s.run(at)
	}
	t.Fatal("background work never ended")
}

// drop forgets the pending work of an evicted isolate.
func (s *sim) drop(tag string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	kept := s.events[:0]
	for _, e := range s.events {
		if e.tag != tag {
			kept = append(kept, e)
		}
	}
	s.events = kept
	heap.Init(&s.events)
}

// fakeKV is Workers KV as seen from one location: a write becomes visible
// to lists lag after it was made. It records every put and counts lists.
type fakeKV struct {
	clock    func() time.Time
	lag      time.Duration
	pageSize int

	mu       sync.Mutex
	versions map[string][]version
	puts     []putRecord
	lists    int
	failPuts int           // the next failPuts puts fail
	failList int           // the next failList lists fail
	gate     chan struct{} // when set, List waits for it to close
}

type version struct {
	visible time.Time
	expires time.Time
	n       int64
	value   string
}

type putRecord struct {
	key string
	at  time.Time
	n   int64
	ttl time.Duration
}

var errFake = errors.New("fake kv: unavailable")

func newFakeKV(clock func() time.Time, lag time.Duration) *fakeKV {
	return &fakeKV{clock: clock, lag: lag, pageSize: 1000, versions: map[string][]version{}}
}

func (f *fakeKV) Put(_ context.Context, key, value string, n int64, ttl time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.clock()
	f.puts = append(f.puts, putRecord{key: key, at: now, n: n, ttl: ttl})
	if f.failPuts > 0 {
		f.failPuts--
		return errFake
	}
	f.versions[key] = append(f.versions[key], version{visible: now.Add(f.lag), expires: now.Add(ttl), n: n, value: value})
	return nil
}

func (f *fakeKV) List(ctx context.Context, prefix, cursor string) (Page, error) {
	f.mu.Lock()
	gate := f.gate
	f.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return Page{}, ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists++
	if f.failList > 0 {
		f.failList--
		return Page{}, errFake
	}
	now := f.clock()
	var keys []Key
	for name, vs := range f.versions {
		if !strings.HasPrefix(name, prefix) || name <= cursor {
			continue
		}
		for i := len(vs) - 1; i >= 0; i-- {
			if !vs[i].visible.After(now) {
				if vs[i].expires.After(now) {
					keys = append(keys, Key{Name: name, N: vs[i].n})
				}
				break
			}
		}
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].Name < keys[j].Name })
	if len(keys) > f.pageSize {
		keys = keys[:f.pageSize]
		return Page{Keys: keys, Cursor: keys[len(keys)-1].Name}, nil
	}
	return Page{Keys: keys, Done: true}, nil
}

// latest returns the newest value written under each key with prefix,
// visible or not: what KV holds once every write has propagated.
func (f *fakeKV) latest(prefix string) map[string]int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := map[string]int64{}
	for name, vs := range f.versions {
		if strings.HasPrefix(name, prefix) && len(vs) > 0 {
			m[name] = vs[len(vs)-1].n
		}
	}
	return m
}

func (f *fakeKV) putLog() []putRecord {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]putRecord(nil), f.puts...)
}

func (f *fakeKV) listCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lists
}

// isolate is one simulated Worker isolate: its globals and a Store over
// them (a fresh Store per request would behave the same: all state is in
// the globals).
type isolate struct {
	g     *MemGlobals
	store *Store
}

func newIsolate(t *testing.T, s *sim, kv KV, id string, o Options) isolate {
	t.Helper()
	g := NewMemGlobals(id)
	o.KV, o.Globals, o.Later, o.Now = kv, g, s.later(id), s.Now
	st, err := New(o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return isolate{g: g, store: st}
}

// maxPutsPerSecond returns the largest number of puts of one key that
// started within any one second.
func maxPutsPerSecond(puts []putRecord) int {
	byKey := map[string][]time.Time{}
	for _, p := range puts {
		byKey[p.key] = append(byKey[p.key], p.at)
	}
	most := 0
	for _, ts := range byKey {
		j := 0
		for i := range ts {
			for ts[i].Sub(ts[j]) >= time.Second {
				j++
			}
			most = max(most, i-j+1)
		}
	}
	return most
}

// requestLater is the Later of one Worker request (one Go instance of the
// stock shim) whose background work the Worker cancels at deadline (30 s
// after its response): a task due later than that never runs.
func (s *sim) requestLater(deadline time.Time) func(time.Duration, func(context.Context)) {
	s.mu.Lock()
	s.reqs++
	req := s.reqs
	s.mu.Unlock()
	return func(d time.Duration, task func(context.Context)) {
		s.mu.Lock()
		defer s.mu.Unlock()
		at := s.now.Add(d)
		if at.After(deadline) {
			s.dropped++
			return // waitUntil cancelled: the timer never fires
		}
		s.seq++
		heap.Push(&s.events, event{at: at, seq: s.seq, req: req, task: task})
	}
}

// live returns how many requests have background work pending: in the
// Worker, each keeps its Go instance alive until that work ends.
func (s *sim) live() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	reqs := map[int]bool{}
	for _, e := range s.events {
		if e.req != 0 {
			reqs[e.req] = true
		}
	}
	return len(reqs)
}

// request returns a Store of one request of the isolate g: its own Later,
// whose work ends life after now, over the isolate's shared globals.
func (s *sim) request(t *testing.T, kv KV, g *MemGlobals, life time.Duration) *Store {
	t.Helper()
	st, err := New(Options{KV: kv, Globals: g, Later: s.requestLater(s.Now().Add(life)), Now: s.Now})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return st
}

// slowKV runs during after each put, before the put returns: the requests
// that arrive while a put is awaited.
type slowKV struct {
	*fakeKV
	during func()
}

func (k slowKV) Put(ctx context.Context, key, value string, n int64, ttl time.Duration) error {
	err := k.fakeKV.Put(ctx, key, value, n, ttl)
	k.during()
	return err
}
