package httpapi

import (
	"context"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/slidegate/slidegate/kvstore"
	"github.com/slidegate/slidegate/kvstore/memstore"
)

// remote is a memory store that is not kvstore.Immediate (the pre-filter
// bounds its calls as a remote store's) and records the deadline of every
// take-back.
type remote struct {
	st        *memstore.Store
	mu        sync.Mutex
	refunds   int
	deadlines []time.Time // of take-backs; zero: none
}

func (s *remote) Load(ctx context.Context, id string, slots []kvstore.Slot, counts []int64) error {
	return s.st.Load(ctx, id, slots, counts)
}

func (s *remote) Add(ctx context.Context, id string, slots []kvstore.Slot, costs []int64) error {
	for _, c := range costs {
		if c < 0 {
			d, _ := ctx.Deadline()
			s.mu.Lock()
			s.refunds++
			s.deadlines = append(s.deadlines, d)
			s.mu.Unlock()
			break
		}
	}
	return s.st.Add(ctx, id, slots, costs)
}

// TestRefundWithinRequestDeadline: a refund has a store_timeout of its own
// (the check may have spent the request's), but not past the request's own
// deadline: on the Lambda, the invocation's. It ran on for a whole
// store_timeout after the deadline, when the function had to have answered.
// Here a shared ip rule admits, the plan denies, and the ip rule's count is
// taken back (settleIP) under a store_timeout of 5 s on a request whose
// context ends in 2 s.
func TestRefundWithinRequestDeadline(t *testing.T) {
	st := &remote{st: memstore.New()}
	cfg := refundConfig(t, "shared", func(m map[string]any) { m["store_timeout"] = "5s" })
	f := newFixture(t, cfg, func(o *Options) { o.Store = st })
	for i, want := range []int{200, 429} {
		r := httptest.NewRequest("GET", "/api", nil)
		r.RemoteAddr = "192.0.2.1:51000"
		deadline := time.Now().Add(2 * time.Second)
		ctx, cancel := context.WithDeadline(r.Context(), deadline)
		w := httptest.NewRecorder()
		f.h.ServeHTTP(w, r.WithContext(ctx))
		cancel()
		if w.Code != want {
			t.Fatalf("request %d: %d, want %d", i+1, w.Code, want)
		}
		if want != 429 {
			continue
		}
		if st.refunds != 1 {
			t.Fatalf("%d take-backs of the ip rule's count, want 1", st.refunds)
		}
		if d := st.deadlines[0]; d.IsZero() || d.After(deadline) {
			t.Errorf("the take-back's deadline is %v, after the request's %v", d, deadline)
		}
	}
}
