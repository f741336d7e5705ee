package dynamostore_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slidegate/slidegate/internal/dynalite"
	"github.com/slidegate/slidegate/kvstore"
	"github.com/slidegate/slidegate/kvstore/dynamostore"
	"github.com/slidegate/slidegate/limiter"
	"github.com/slidegate/slidegate/window"
)

// TestServerOutage takes dynalite away mid-run, first killed (connections
// refused) then frozen (connections accepted, never answered): every check
// returns an error within the store timeout plus a generous margin (the HTTP
// layer turns it into its on_store_error answer), and after the server comes
// back the same store recovers by itself, with the counts kept.
//
// It does not run in parallel with the load tests of this package: its
// bounds are about the store, not about a starved scheduler.
func TestServerOutage(t *testing.T) {
	const storeTimeout = 150 * time.Millisecond
	const margin = 2 * time.Second // scheduling on a loaded machine (-race, parallel packages), not retries
	srv := dynalite.Run(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("dynalite output:\n%s", srv.Output())
		}
	})
	tb := newTable(t, srv.Endpoint)
	lim := limiter.New(limiter.Options{Store: tb.store(t)})
	rules := []limiter.Rule{rule("minute", 1000, time.Minute)}
	// unsure counts the checks that failed while the server process was
	// there: it may have received their write and apply it later.
	n, admitted, unsure := 0, int64(0), int64(0)
	alive := true
	check := func() (limiter.Result, error, time.Duration) {
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		defer cancel()
		start := time.Now()
		// One second apart, so that no decision is served from memory alone.
		res, err := lim.Check(ctx, t0.Add(time.Duration(n)*time.Second), "k", rules, 1)
		n++
		if err != nil && alive {
			unsure++
		}
		return res, err, time.Since(start)
	}
	// admit checks until one is admitted: a server just back may first
	// work through requests its clients gave up on. It reports how many
	// checks that took; it fails after 20 (about 3 s).
	admit := func(phase string) {
		t.Helper()
		for i := 1; ; i++ {
			res, err, _ := check()
			if err == nil && res.Allowed {
				t.Logf("%s: admitted at check %d", phase, i)
				admitted++
				return
			}
			if i == 20 {
				t.Fatalf("%s: Allowed %v, err %v; want admitted", phase, res.Allowed, err)
			}
		}
	}
	fail := func(phase string, deadline bool) {
		t.Helper()
		var slowest time.Duration
		defer func() { t.Logf("%s: slowest of 5 failed checks took %s", phase, slowest) }()
		for range 5 {
			_, err, took := check()
			slowest = max(slowest, took)
			if err == nil {
				t.Fatalf("%s: check succeeded", phase)
			}
			if took > storeTimeout+margin {
				t.Errorf("%s: error after %s, want within %s + %s", phase, took, storeTimeout, margin)
			}
			if deadline && !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%s: error %v, want the context deadline", phase, err)
			}
		}
	}

	admit("before")
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	alive = false
	fail("stopped", false)
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	alive = true
	admit("after restart")

	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	fail("frozen", true)
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	admit("after resume")

	// The admitted checks were counted, and perhaps writes that a frozen
	// server applied after their callers gave up: a store error never
	// loses a count, it may add one.
	item := tb.stored(t, "k")
	var total int64
	for k, v := range item {
		if k != dynamostore.TTLAttribute {
			total += v
		}
	}
	t.Logf("stored count %d after %d admitted checks and %d failed ones the server may have applied", total, admitted, unsure)
	if total < admitted || total > admitted+unsure {
		t.Errorf("stored %d, want the %d admitted plus at most %d late writes", total, admitted, unsure)
	}
}

// TestExactUnderFaults: 200 concurrent checks against a limit of 150 through
// four Stores while the proxy throttles writes (not applied: retried) or
// replaces the answer of applied writes with a 500 (not retried: the check
// fails, on_store_error decides). Every admitted request and every write
// whose answer was lost is in the table once, and the table holds exactly
// the limit.
func TestExactUnderFaults(t *testing.T) {
	const clients, limit = 200, 150
	throttled := fault{status: 400, code: "ThrottlingException"}
	tests := []struct {
		name   string
		inject func() func(op string, n int, body []byte) fault
		errors func(updates int) int // checks that fail, of so many UpdateItem requests
	}{
		{"each write throttled once", func() func(string, int, []byte) fault {
			seen := map[[sha256.Size]byte]bool{}
			return func(op string, _ int, body []byte) fault {
				h := sha256.Sum256(body)
				if op != "UpdateItem" || seen[h] {
					return fault{}
				}
				seen[h] = true
				return throttled
			}
		}, func(int) int { return 0 }},
		{"every 10th write's answer lost", func() func(string, int, []byte) fault {
			return func(op string, n int, _ []byte) fault {
				if op == "UpdateItem" && n%10 == 0 {
					return serverError
				}
				return fault{}
			}
		}, func(updates int) int { return updates / 10 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			px := newFaultProxy(t, dynalite.Shared(t).Endpoint, tt.inject())
			tb := newTable(t, px.URL)
			var lims [4]*limiter.Limiter
			for i := range lims {
				lims[i] = limiter.New(limiter.Options{Store: tb.store(t)})
			}
			rules := []limiter.Rule{rule("minute", limit, time.Minute)}
			var admitted, failed atomic.Int64
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range clients {
				wg.Go(func() {
					<-start
					res, err := lims[i%len(lims)].Check(context.Background(), t0, "hot", rules, 1)
					switch {
					case err != nil:
						failed.Add(1)
					case res.Allowed:
						admitted.Add(1)
					}
				})
			}
			close(start)
			wg.Wait()
			updates, lost := px.count("UpdateItem"), int64(px.lostAnswers())
			t.Logf("%d admitted, %d failed, %d UpdateItem, %d applied writes answered 500", admitted.Load(), failed.Load(), updates, lost)
			if got, want := failed.Load(), int64(tt.errors(updates)); got != want {
				t.Errorf("%d checks failed, want %d", got, want)
			}
			if got := admitted.Load() + lost; got != limit {
				t.Errorf("admitted %d + lost answers %d = %d, want exactly %d", admitted.Load(), lost, got, limit)
			}
			if got := tb.stored(t, "hot")[attr("minute", time.Minute, t0)]; got != limit {
				t.Errorf("stored count %d, want %d", got, limit)
			}
		})
	}
}

// TestWriteAbandoned: the caller gives up on a write the server has
// applied (the client went away, or store_timeout ran out) while the
// answer is held back: the call returns the context's error at once, the
// write is not retried, and the count stays in the table once.
func TestWriteAbandoned(t *testing.T) {
	// Long enough for the write to reach the proxy on a loaded machine:
	// with 150 ms it did not, in 1 of 6 runs under load.
	const storeTimeout = time.Second
	const margin = 2 * time.Second // scheduling on a loaded machine
	cur := kvstore.Slot{Name: "minute", Bucket: window.Index(t0, time.Minute), Length: time.Minute}
	tests := []struct {
		name string
		ctx  func(px *faultProxy) (context.Context, context.CancelFunc)
		want error
	}{
		{"client went away", func(px *faultProxy) (context.Context, context.CancelFunc) {
			// Once the write is applied and its answer held: after a
			// fixed time, the write had not always reached the proxy.
			ctx, cancel := context.WithCancel(context.Background())
			go func() {
				select {
				case <-px.holding:
				case <-time.After(storeTimeout):
				}
				cancel()
			}()
			return ctx, cancel
		}, context.Canceled},
		{"store_timeout", func(*faultProxy) (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), storeTimeout)
		}, context.DeadlineExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			px := newFaultProxy(t, dynalite.Shared(t).Endpoint, firstOf("UpdateItem", fault{applied: true, hold: true}))
			tb := newTable(t, px.URL)
			s := tb.store(t)
			ctx, cancel := tt.ctx(px)
			defer cancel()
			begin := time.Now()
			ok, err := s.AddIf(ctx, "k", []kvstore.Cond{{Slot: cur, Max: 9, Add: 1}}, make([]int64, 1))
			took := time.Since(begin)
			if ok || !errors.Is(err, tt.want) {
				t.Errorf("AddIf = %v, %v; want false, %v", ok, err, tt.want)
			}
			if took > storeTimeout+margin {
				t.Errorf("AddIf returned after %s, want within %s + %s", took, storeTimeout, margin)
			}
			if n := px.count("UpdateItem"); n != 1 {
				t.Errorf("%d UpdateItem requests, want 1", n)
			}
			px.settle() // the held write has reached dynalite
			counts := make([]int64, 1)
			if ok, err := s.AddIf(context.Background(), "k", []kvstore.Cond{{Slot: cur, Max: 9, Add: 1}}, counts); err != nil || !ok || counts[0] != 2 {
				t.Errorf("next AddIf = %v, %v, counts %v; want true, nil, [2]: the abandoned write counted once", ok, err, counts)
			}
		})
	}
}

// lostAnswer is a write DynamoDB applies whose answer the caller does not
// get, and the context of the call.
type lostAnswer struct {
	name string
	f    fault
	ctx  func() (context.Context, context.CancelFunc)
}

// lostAnswers are the ways a write's answer is lost: a 500, and no answer
// within store_timeout.
func lostAnswers() []lostAnswer {
	return []lostAnswer{
		{"500", serverError, func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }},
		{"store_timeout", fault{applied: true, hold: true}, func() (context.Context, context.CancelFunc) {
			// Each check of a test gets it: 150 ms was too short for a
			// plain write on a loaded machine.
			return context.WithTimeout(context.Background(), time.Second)
		}},
	}
}

// TestCacheAfterLostAnswer: a Store whose write was applied but answered
// with an error (a 500, or no answer within store_timeout) has a cache one
// count short; the conditional write still holds the identity to its
// limit: with a limit of 5 and the third write's answer lost, four more
// requests are admitted, and the table holds 5.
func TestCacheAfterLostAnswer(t *testing.T) {
	for _, tt := range lostAnswers() {
		t.Run(tt.name, func(t *testing.T) {
			px := newFaultProxy(t, dynalite.Shared(t).Endpoint, nthOf("UpdateItem", 3, tt.f))
			tb := newTable(t, px.URL)
			lim := limiter.New(limiter.Options{Store: tb.store(t), DisableDenyCache: true})
			rules := []limiter.Rule{rule("minute", 5, time.Minute)}
			var admitted, failed int
			for i := range 10 {
				ctx, cancel := tt.ctx()
				res, err := lim.Check(ctx, t0.Add(time.Duration(i)*time.Second), "k", rules, 1)
				cancel()
				// A write applied after its caller gave up could come after
				// the next one and exceed the limit by one; here it is
				// applied before the next check.
				px.settle()
				switch {
				case err != nil:
					failed++
				case res.Allowed:
					admitted++
				}
			}
			if failed != 1 || admitted != 4 {
				t.Errorf("%d admitted, %d failed; want 4 and 1 (the lost answer's write is counted)", admitted, failed)
			}
			if got := tb.stored(t, "k")[attr("minute", time.Minute, t0)]; got != 5 {
				t.Errorf("stored count %d, want 5", got)
			}
		})
	}
}

// TestUndoWithLostAnswerKeepsCacheLow: a refund (a negative Add: the HTTP
// layer taking back the ip_limits' count of a request the plan refused)
// that DynamoDB applied but answered with an error (a 500, or no answer
// within store_timeout) must not leave the Store's cache above the table:
// a count loaded from the cache is taken as a lower bound, and a denial on
// it is final (and remembered by the deny cache). With a limit of 3, three
// admitted requests and one taken back, the table holds 2, and the next
// request fits; a cache still at 3 refused it without asking DynamoDB.
func TestUndoWithLostAnswerKeepsCacheLow(t *testing.T) {
	for _, tt := range lostAnswers() {
		t.Run(tt.name, func(t *testing.T) {
			px := newFaultProxy(t, dynalite.Shared(t).Endpoint, nthOf("UpdateItem", 4, tt.f))
			tb := newTable(t, px.URL)
			lim := limiter.New(limiter.Options{Store: tb.store(t)})
			rules := []limiter.Rule{rule("minute", 3, time.Minute)}
			ctx := context.Background()
			var at time.Time
			for i := range 3 {
				res, err := lim.Check(ctx, t0.Add(time.Duration(i)*time.Second), "k", rules, 1)
				if err != nil || !res.Allowed {
					t.Fatalf("check %d: allowed %v, %v; want admitted", i+1, res.Allowed, err)
				}
				at = res.At
			}
			rctx, cancel := tt.ctx()
			err := lim.Refund(rctx, at, "k", rules, 1)
			cancel()
			if err == nil {
				t.Fatal("refund answered with an error: got none")
			}
			px.settle() // the refund has reached dynalite
			if got := tb.stored(t, "k")[attr("minute", time.Minute, t0)]; got != 2 {
				t.Fatalf("stored count %d, want 2 (the refund applied)", got)
			}
			res, err := lim.Check(ctx, t0.Add(3*time.Second), "k", rules, 1)
			if err != nil || !res.Allowed {
				t.Errorf("next check: allowed %v (cached %v), %v; want admitted: the table holds 2 of 3", res.Allowed, res.Cached, err)
			}
			if got := tb.stored(t, "k")[attr("minute", time.Minute, t0)]; got != 3 {
				t.Errorf("stored count %d, want 3", got)
			}
		})
	}
}

// TestUndoNotSentKeepsCache: an undo whose caller's budget is already
// spent (the plan's write took all of store_timeout) is not sent, and the
// count it would have taken back stands, in the table and in the cache:
// the HTTP layer then decides the retry of the refused request on it.
func TestUndoNotSentKeepsCache(t *testing.T) {
	px := newFaultProxy(t, dynalite.Shared(t).Endpoint, func(string, int, []byte) fault { return fault{} })
	tb := newTable(t, px.URL)
	s := tb.store(t)
	lim := limiter.New(limiter.Options{Store: s})
	rules := []limiter.Rule{rule("minute", 3, time.Minute)}
	res, err := lim.Check(context.Background(), t0, "k", rules, 1)
	if err != nil || !res.Allowed {
		t.Fatalf("check: allowed %v, %v; want admitted", res.Allowed, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := lim.Refund(ctx, res.At, "k", rules, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("refund = %v, want context.Canceled", err)
	}
	if n := px.count("UpdateItem"); n != 1 {
		t.Errorf("%d UpdateItem requests, want 1: the refund is not sent", n)
	}
	cur := kvstore.Slot{Name: "minute", Bucket: window.Index(t0, time.Minute), Length: time.Minute}
	counts := make([]int64, 1)
	if err := s.Load(context.Background(), "k", []kvstore.Slot{cur}, counts); err != nil || counts[0] != 1 {
		t.Errorf("Load = %v, %v; want [1]: the count stands", counts, err)
	}
}
