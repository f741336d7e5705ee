package workerskv

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slidegate/slidegate/kvstore"
)

// stallKV is a KV that answers no call until open is closed, and counts the
// calls waiting, by the request whose background work made them.
type stallKV struct {
	gate chan struct{}
	mu   sync.Mutex
	cond *sync.Cond
	wait map[int]int // waiting calls by request
	runs int         // background tasks started and not yet ended or waiting
	open bool        // open is closed: waits end
	puts map[string]int64
}

func newStallKV() *stallKV {
	k := &stallKV{gate: make(chan struct{}), wait: map[int]int{}, puts: map[string]int64{}}
	k.cond = sync.NewCond(&k.mu)
	return k
}

type reqKey struct{}

func (k *stallKV) stall(ctx context.Context) error {
	req, _ := ctx.Value(reqKey{}).(int)
	if req == 0 { // a request's own call: it gives up at ctx's end
		select {
		case <-k.gate:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	k.mu.Lock()
	k.wait[req]++
	k.runs--
	k.cond.Broadcast()
	k.mu.Unlock()
	<-k.gate
	k.mu.Lock()
	k.wait[req]--
	k.runs++
	k.cond.Broadcast()
	k.mu.Unlock()
	return nil
}

func (k *stallKV) Put(ctx context.Context, key, _ string, n int64, _ time.Duration) error {
	if err := k.stall(ctx); err != nil {
		return err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.puts[key] = n
	return nil
}

func (k *stallKV) List(ctx context.Context, _, _ string) (Page, error) {
	return Page{Done: true}, k.stall(ctx)
}

// later is the Later of request req: a task due now runs at once on its own
// goroutine, as waitUntil runs it; one due later is dropped (the test
// moves no clock for it).
func (k *stallKV) later(req int) func(time.Duration, func(context.Context)) {
	return func(d time.Duration, task func(context.Context)) {
		if d > 0 {
			return
		}
		k.mu.Lock()
		k.runs++
		k.mu.Unlock()
		go func() {
			task(context.WithValue(context.Background(), reqKey{}, req))
			k.mu.Lock()
			k.runs--
			k.cond.Broadcast()
			k.mu.Unlock()
		}()
	}
}

// release lets every call through, now and later.
func (k *stallKV) release() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.open = true
	close(k.gate)
}

// settle waits until every background task has ended or waits on KV (none
// once released), and returns how many requests have a call waiting.
func (k *stallKV) settle() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	for k.runs > 0 || k.open && k.waiting() > 0 {
		k.cond.Wait()
	}
	return k.waiting()
}

func (k *stallKV) waiting() int {
	n := 0
	for _, w := range k.wait {
		if w > 0 {
			n++
		}
	}
	return n
}

// TestSlowKVHoldsFewRequests: a background KV call keeps its request's Go
// instance (about 5 MB) alive until KV answers. While KV answered late,
// every client that counted, or whose sum was due for a list, held one:
// 40 clients held 40 instances, past the isolate's 128 MB. At most
// maxHolders requests now wait on KV; the counts of the others wait in the
// isolate, and the next sweep writes them once KV answers again.
func TestSlowKVHoldsFewRequests(t *testing.T) {
	ctx := context.Background()
	kv := newStallKV()
	g := NewMemGlobals("iso")
	var nowNs atomic.Int64
	nowNs.Store(t0.UnixNano())
	clock := func() time.Time { return time.Unix(0, nowNs.Load()).UTC() }
	store := func(req int) *Store {
		st, err := New(Options{KV: kv, Globals: g, Later: kv.later(req), Now: clock})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	const clients = 40
	sl := []kvstore.Slot{minute(t0)}
	// Each client's first request gives up its list (store_timeout) and
	// counts; its second, 3 s later, finds its sum due for a list.
	done, cancel := context.WithCancel(ctx)
	cancel()
	for round := range 2 {
		for i := range clients {
			id := "client-" + strconv.Itoa(i)
			st := store(round*clients + i + 1)
			_ = st.Load(done, id, sl, make([]int64, 1))
			if round == 0 {
				if err := st.Add(ctx, id, sl, []int64{1}); err != nil {
					t.Fatal(err)
				}
			}
		}
		nowNs.Add(int64(3 * time.Second))
	}
	if got := kv.settle(); got > maxHolders {
		t.Errorf("%d requests wait on KV, want at most %d", got, maxHolders)
	}
	kv.release()
	kv.settle()
	// A request 10 s later sweeps and writes what waited, 30 counters
	// (maxAdopt), and the next, a second later, the rest.
	nowNs.Add(int64(10 * time.Second))
	for i := range 2 {
		if err := store(2*clients+1+i).Add(ctx, "late", sl, []int64{1}); err != nil {
			t.Fatal(err)
		}
		kv.settle()
		nowNs.Add(int64(FlushInterval))
	}
	for i := range clients {
		key := SlotPrefix("client-"+strconv.Itoa(i), sl[0]) + "iso"
		kv.mu.Lock()
		n := kv.puts[key]
		kv.mu.Unlock()
		if n != 1 {
			t.Errorf("client %d: KV holds %d, want 1", i, n)
		}
	}
}

// TestDeadHoldersFreeAfterStaleBusy: a request that holds a holder cell and
// never releases it (its Go instance ended with a KV call unanswered: a
// panic, or the Worker cancelling its background work) must not keep the
// isolate from writing for good. Until staleBusy has passed since they
// were taken, the isolate's counts wait; then a request takes the cells
// over and writes them.
func TestDeadHoldersFreeAfterStaleBusy(t *testing.T) {
	ctx := context.Background()
	s := newSim(t0)
	fk := newFakeKV(s.Now, 0)
	g := NewMemGlobals("iso")
	for range maxHolders {
		dead := s.request(t, fk, g, requestLife)
		g.Update(func(c Cells) {
			if !dead.hold(c, s.Now().UnixMilli()) {
				t.Fatal("a free holder cell was refused")
			}
		})
	}
	sl := minute(t0)
	key := SlotPrefix("client", sl) + "iso"
	count := func() {
		t.Helper()
		if err := s.request(t, fk, g, requestLife).Add(ctx, "client", []kvstore.Slot{sl}, []int64{1}); err != nil {
			t.Fatal(err)
		}
		s.drain(t)
	}
	s.advance(time.Second)
	count()
	if got := fk.latest(SlotPrefix("client", sl))[key]; got != 0 {
		t.Fatalf("KV holds %d with every holder taken, want 0 (the count waits)", got)
	}
	s.advance(time.Duration(staleBusy)*time.Millisecond - time.Second)
	count()
	if got := fk.latest(SlotPrefix("client", sl))[key]; got != 2 {
		t.Errorf("KV holds %d once the dead requests' holders are stale, want 2", got)
	}
}

// sweepCounter is MemGlobals that counts the full passes over its cells.
type sweepCounter struct {
	*MemGlobals
	n int
}

type countedCells struct {
	Cells
	n *int
}

func (c countedCells) Sweep(now int64, kept func(string, Cell)) {
	*c.n++
	c.Cells.Sweep(now, kept)
}

func (g *sweepCounter) Update(fn func(Cells)) {
	g.MemGlobals.Update(func(c Cells) { fn(countedCells{c, &g.n}) })
}

// TestNoFastSweepsWhileHoldersAreTaken: while more than maxAdopt counters
// wait, the isolate sweeps every second instead of every 10 s, each sweep
// a pass over every cell (0.14 s at 45,000 cells in Node). While KV is
// slow every holder is taken, every counting client's writes stop
// (be3f908), and the sweeps that came every second could write nothing:
// the sweeping request found no holder either. They come every 10 s while
// no holder is free, and every count is written once one is.
func TestNoFastSweepsWhileHoldersAreTaken(t *testing.T) {
	ctx := context.Background()
	s := newSim(t0)
	fk := newFakeKV(s.Now, 0)
	g := &sweepCounter{MemGlobals: NewMemGlobals("iso")}
	request := func() *Store {
		st, err := New(Options{KV: fk, Globals: g, Later: s.requestLater(s.Now().Add(requestLife)), Now: s.Now})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	for range maxHolders {
		dead := request()
		g.Update(func(c Cells) { dead.hold(c, s.Now().UnixMilli()) })
	}
	sl := []kvstore.Slot{minute(t0)}
	const clients = 2 * maxAdopt
	for i := range clients {
		if err := request().Add(ctx, "client-"+strconv.Itoa(i), sl, []int64{1}); err != nil {
			t.Fatal(err)
		}
	}
	s.drain(t)
	g.n = 0
	for range 200 { // 20 s of a request every 100 ms
		s.advance(100 * time.Millisecond)
		if err := request().Load(ctx, "late", sl, make([]int64, 1)); err != nil {
			t.Fatal(err)
		}
		s.drain(t)
	}
	if g.n > 2 {
		t.Errorf("%d sweeps in 20 s with every holder taken, want at most 2 (every 10 s)", g.n)
	}
	for range 40 { // the dead requests' holders are stale now
		s.advance(FlushInterval)
		if err := request().Load(ctx, "late", sl, make([]int64, 1)); err != nil {
			t.Fatal(err)
		}
		s.drain(t)
	}
	for i := range clients {
		p := SlotPrefix("client-"+strconv.Itoa(i), sl[0])
		if got := fk.latest(p)[p+"iso"]; got != 1 {
			t.Errorf("client %d: KV holds %d, want 1", i, got)
		}
	}
}
