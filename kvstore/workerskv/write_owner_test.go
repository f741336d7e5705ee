package workerskv

import (
	"context"
	"math"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/slidegate/slidegate/kvstore"
)

// TestWriteRecordsOnItsOwnCounter: an isolate over maxCells ranks its
// unwritten counters for eviction, then deletes and logs them one by one.
// During a log line (a write to stderr that lets the Go instance's other
// goroutines run) a counter ranked for eviction started its write, and was
// evicted while the put was in flight; its client came back and counted
// once more, in a counter made anew that writes a KV key of its own. When
// the put answered, it marked the new counter written at its own total, the
// same number: the new counter's key was never written, and its count was
// lost for every isolate.
func TestWriteRecordsOnItsOwnCounter(t *testing.T) {
	s := newSim(t0)
	kv := &heldPut{fakeKV: newFakeKV(s.Now, 0), started: make(chan struct{}), release: make(chan struct{})}
	g := &jsLikeGlobals{m: memCells{}}
	sl := minute(t0)
	ms, exp := t0.UnixMilli(), sl.Expires().UnixMilli()
	g.m[sweepKey] = Cell{At: ms, Expires: math.MaxInt64} // no sweep adopts them
	ids := map[string]string{}                           // a counter's cell key, its identity
	var keys []string
	for i := range maxCells {
		id := "c-" + strconv.Itoa(i)
		key := SlotPrefix(id, sl) + "iso-a"
		ids[key] = id
		keys = append(keys, key)
		g.m[key] = Cell{N: 1, Expires: exp} // not yet written
	}
	slices.Sort(keys)
	victim := keys[1] // evicted after keys[0], whose line comes first
	g.m[victim] = Cell{N: 1, Expires: exp, Owner: ms}
	kv.key = victim
	var st *Store
	add := func(id string) {
		t.Helper()
		if err := st.Add(context.Background(), id, []kvstore.Slot{sl}, []int64{1}); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan struct{})
	log := &duringArgs{during: func(args []any) {
		if args[1] == keys[0] { // the other goroutine: the victim's flush, due now
			go func() {
				defer close(done)
				st.flush(context.Background(), victim, ms, 0, -1)
			}()
			<-kv.started // its put is in flight
		}
	}}
	var err error
	st, err = New(Options{KV: kv, Globals: g, Later: s.later("iso-a"), Now: s.Now, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	add("x")
	if _, ok := g.m[victim]; ok {
		t.Fatal("the counter being written was not evicted")
	}
	s.advance(time.Millisecond)
	add(ids[victim]) // made anew, with a KV key of its own
	close(kv.release)
	<-done
	s.drain(t)
	var total int64
	for _, n := range kv.latest(SlotPrefix(ids[victim], sl)) {
		total += n
	}
	if total != 2 {
		t.Errorf("KV holds %d for the client, want 2 (1 written by the evicted counter, 1 by the new one)", total)
	}
}

// heldPut holds the put of key until release is closed, once started has
// been received: a put in flight while the test runs other requests.
type heldPut struct {
	*fakeKV
	key              string
	started, release chan struct{}
}

func (k *heldPut) Put(ctx context.Context, key, value string, n int64, ttl time.Duration) error {
	if key == k.key {
		k.key = ""
		k.started <- struct{}{}
		<-k.release
	}
	return k.fakeKV.Put(ctx, key, value, n, ttl)
}
