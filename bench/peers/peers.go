package peers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	golimiter "github.com/sethvargo/go-limiter"
	"github.com/sethvargo/go-limiter/memorystore"
	"github.com/slidegate/slidegate/limiter"
	"github.com/slidegate/slidegate/window"
	ulule "github.com/ulule/limiter/v3"
	ululememory "github.com/ulule/limiter/v3/drivers/store/memory"
	"golang.org/x/time/rate"
)

// Errors returned by Quota.Validate.
var (
	ErrLimit  = errors.New("limit must be greater than 0")
	ErrPeriod = errors.New("period must be at least 1s")
)

// Limiter admits or denies one request of a key. Implementations are safe
// for concurrent use. A denial is (false, nil); an error means the limiter
// failed.
type Limiter interface {
	Allow(ctx context.Context, key string) (bool, error)
	// Close stops the limiter's background work, if any.
	Close() error
}

// Quota is what every peer is configured with: at most Limit requests per
// Period for each key.
type Quota struct {
	Limit  int64
	Period time.Duration
	// Now is the instant given to the peers that take the time as an
	// argument (slidegate, xrate). The peers that read a clock themselves
	// ignore it. The zero value means the Unix epoch.
	Now time.Time
}

// Validate reports whether q can configure every peer.
func (q Quota) Validate() error {
	switch {
	case q.Limit <= 0:
		return fmt.Errorf("peers: quota: Limit: %w, got %d", ErrLimit, q.Limit)
	case q.Period < time.Second:
		return fmt.Errorf("peers: quota: Period: %w, got %s", ErrPeriod, q.Period)
	}
	return nil
}

// Peer names a limiter and builds it for a quota.
type Peer struct {
	Name string
	New  func(Quota) (Limiter, error)
}

// All lists every peer, slidegate first.
var All = []Peer{
	{"slidegate", func(q Quota) (Limiter, error) { return newSlidegate(q, nil) }},
	{"slidegate-timenow", func(q Quota) (Limiter, error) { return newSlidegate(q, time.Now) }},
	{"slidegate-oneblocked", newSlidegateOneBlocked},
	{"golimiter", newGoLimiter},
	{"ulule", newUlule},
	{"xrate", newXRate},
	{"xrate-syncmap", newXRateSyncMap},
}

// NewSlidegate returns slidegate's limiter with options o (o.Store and
// o.Local nil mean the memory store), deciding at q.Now.
func NewSlidegate(q Quota, o limiter.Options) (Limiter, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	rule := window.Rule{Name: "bench", Limit: q.Limit, Period: q.Period}
	return &slidegate{l: limiter.New(o), rules: []limiter.Rule{{Rule: rule}}, now: q.Now}, nil
}

func newSlidegate(q Quota, clock func() time.Time) (Limiter, error) {
	l, err := NewSlidegate(q, limiter.Options{})
	if err != nil {
		return nil, err
	}
	l.(*slidegate).clock = clock
	return l, nil
}

// newSlidegateOneBlocked is slidegate with one unrelated identity in its
// deny cache, as in production where some client is nearly always blocked:
// from then on every check probes the cache.
func newSlidegateOneBlocked(q Quota) (Limiter, error) {
	l, err := NewSlidegate(q, limiter.Options{})
	if err != nil {
		return nil, err
	}
	s := l.(*slidegate)
	other := []limiter.Rule{{Rule: window.Rule{Name: "other", Limit: 1, Period: time.Hour}}}
	for i := range 2 {
		r, err := s.l.Check(context.Background(), q.Now, "k:blocked-elsewhere", other, 1)
		if err != nil {
			return nil, fmt.Errorf("peers: block an identity: %w", err)
		}
		if got, want := r.Allowed, i == 0; got != want {
			return nil, fmt.Errorf("peers: block an identity: request %d allowed %t, want %t", i+1, got, want)
		}
	}
	return s, nil
}

type slidegate struct {
	l     *limiter.Limiter
	rules []limiter.Rule
	now   time.Time
	clock func() time.Time // nil: decide at now
}

func (s *slidegate) Allow(ctx context.Context, key string) (bool, error) {
	now := s.now
	if s.clock != nil {
		now = s.clock()
	}
	var d window.Decision
	err := s.l.DecideInto(ctx, now, key, s.rules, 1, &d)
	return d.Allowed, err
}

func (s *slidegate) Close() error { return nil }

type goLimiter struct{ s golimiter.Store }

func newGoLimiter(q Quota) (Limiter, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	s, err := memorystore.New(&memorystore.Config{Tokens: uint64(q.Limit), Interval: q.Period})
	if err != nil {
		return nil, fmt.Errorf("peers: golimiter: %w", err)
	}
	return goLimiter{s}, nil
}

func (g goLimiter) Allow(ctx context.Context, key string) (bool, error) {
	_, _, _, ok, err := g.s.Take(ctx, key)
	return ok, err
}

func (g goLimiter) Close() error { return g.s.Close(context.Background()) }

type ululeLimiter struct{ l *ulule.Limiter }

func newUlule(q Quota) (Limiter, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	// The memory store's cleaner goroutine stops when the store is
	// garbage collected; ulule offers no Close.
	return ululeLimiter{ulule.New(ululememory.NewStore(), ulule.Rate{Period: q.Period, Limit: q.Limit})}, nil
}

func (u ululeLimiter) Allow(ctx context.Context, key string) (bool, error) {
	c, err := u.l.Get(ctx, key)
	return !c.Reached, err
}

func (u ululeLimiter) Close() error { return nil }

// xrate is the per-key rate.Limiter map found in most Go services: a token
// bucket of Limit tokens refilled at Limit per Period.
type xrate struct {
	mu    sync.Mutex
	m     map[string]*rate.Limiter
	every rate.Limit
	burst int
	now   time.Time
}

func newXRate(q Quota) (Limiter, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	return &xrate{m: make(map[string]*rate.Limiter), every: xrateLimit(q), burst: int(q.Limit), now: q.Now}, nil
}

func xrateLimit(q Quota) rate.Limit { return rate.Limit(float64(q.Limit) / q.Period.Seconds()) }

func (x *xrate) Allow(_ context.Context, key string) (bool, error) {
	x.mu.Lock()
	l := x.m[key]
	if l == nil {
		l = rate.NewLimiter(x.every, x.burst)
		x.m[key] = l
	}
	x.mu.Unlock()
	return l.AllowN(x.now, 1), nil
}

func (x *xrate) Close() error { return nil }

type xrateSyncMap struct {
	m     sync.Map // string → *rate.Limiter
	every rate.Limit
	burst int
	now   time.Time
}

func newXRateSyncMap(q Quota) (Limiter, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	return &xrateSyncMap{every: xrateLimit(q), burst: int(q.Limit), now: q.Now}, nil
}

func (x *xrateSyncMap) Allow(_ context.Context, key string) (bool, error) {
	v, ok := x.m.Load(key)
	if !ok {
		v, _ = x.m.LoadOrStore(key, rate.NewLimiter(x.every, x.burst))
	}
	return v.(*rate.Limiter).AllowN(x.now, 1), nil
}

func (x *xrateSyncMap) Close() error { return nil }
