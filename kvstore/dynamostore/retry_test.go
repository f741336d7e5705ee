package dynamostore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"hash/crc32"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/smithy-go"

	"github.com/slidegate/slidegate/internal/dynalite"
	"github.com/slidegate/slidegate/kvstore"
	"github.com/slidegate/slidegate/kvstore/dynamostore"
	"github.com/slidegate/slidegate/limiter"
	"github.com/slidegate/slidegate/window"
)

// fault is what the proxy does to the n-th request (1-based) of one
// DynamoDB operation.
type fault struct {
	status  int    // the answer's status; the zero fault passes the request through
	code    string // the error's __type suffix
	applied bool   // forward the request (the server applies it), then replace the answer
	body    string // the answer's body instead of an error naming code; "" with code ""
	drop    bool   // close the connection instead of answering
	hold    bool   // answer only once the client has gone
	// delay holds the answer this long (less if the client goes first):
	// a round trip of a known least duration, whatever the machine's pace.
	delay time.Duration
	// oldItem adds the stored item to a failed condition's answer, as
	// DynamoDB does (ReturnValuesOnConditionCheckFailure ALL_OLD) and
	// dynalite 4.0.0 does not.
	oldItem bool
	// retryAfter is the answer's X-Amz-Retry-After (milliseconds).
	retryAfter string
}

// faultProxy is a reverse proxy on 127.0.0.1 to a dynalite endpoint that
// injects faults chosen by inject (from the operation, its 1-based number
// and the request's body) and counts requests per operation.
type faultProxy struct {
	URL    string
	inject func(op string, n int, body []byte) fault
	mu     sync.Mutex
	seen   map[string]int
	// lost counts the writes the server applied (answered 200) whose
	// answer the proxy replaced.
	lost int
	// busy counts the requests being handled; idle is signalled when it
	// drops to zero (a WaitGroup's first Add would race with settle's Wait:
	// a request's arrival is no happens-before edge).
	busy int
	idle *sync.Cond
	// holding receives once a hold fault has applied its write and holds
	// the answer back (buffered: a test that does not read it is not held
	// up).
	holding chan struct{}
}

func newFaultProxy(t *testing.T, endpoint string, inject func(op string, n int, body []byte) fault) *faultProxy {
	t.Helper()
	target, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	p := &faultProxy{inject: inject, seen: map[string]int{}, holding: make(chan struct{}, 1)}
	p.idle = sync.NewCond(&p.mu)
	rp := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.busy++
		p.mu.Unlock()
		defer func() {
			p.mu.Lock()
			if p.busy--; p.busy == 0 {
				p.idle.Broadcast()
			}
			p.mu.Unlock()
		}()
		op := r.Header.Get("X-Amz-Target")
		op = op[strings.LastIndexByte(op, '.')+1:]
		req, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(req))
		p.mu.Lock()
		p.seen[op]++
		f := p.inject(op, p.seen[op], req)
		p.mu.Unlock()
		switch {
		case f == fault{}:
			rp.ServeHTTP(w, r)
			return
		case f.oldItem:
			withOldItem(t, rp, w, r, req)
			return
		case f.applied:
			// The server applies the write whatever the client does next.
			rec := httptest.NewRecorder()
			rp.ServeHTTP(rec, r.WithContext(context.WithoutCancel(r.Context())))
			if rec.Code == http.StatusOK {
				p.mu.Lock()
				p.lost++
				p.mu.Unlock()
			}
		}
		if f.delay > 0 {
			select {
			case <-r.Context().Done():
				return
			case <-time.After(f.delay):
			}
		}
		if f.hold {
			select {
			case p.holding <- struct{}{}:
			default:
			}
			select {
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
			return
		}
		if f.drop {
			if c, _, err := w.(http.Hijacker).Hijack(); err == nil {
				_ = c.Close()
			}
			return
		}
		body := []byte(f.body)
		if f.code != "" {
			body = []byte(`{"__type":"com.amazonaws.dynamodb.v20120810#` + f.code + `","message":"injected"}`)
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.Header().Set("X-Amz-Crc32", strconv.FormatUint(uint64(crc32.ChecksumIEEE(body)), 10))
		if f.retryAfter != "" {
			w.Header().Set("X-Amz-Retry-After", f.retryAfter)
		}
		w.WriteHeader(f.status)
		_, _ = io.Copy(w, bytes.NewReader(body))
	}))
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

// withOldItem forwards the UpdateItem r (its body req) and, when its
// condition failed, reads the item with a consistent GetItem of the same
// client's signature and adds it to the answer.
func withOldItem(t *testing.T, rp *httputil.ReverseProxy, w http.ResponseWriter, r *http.Request, req []byte) {
	rec := httptest.NewRecorder()
	rp.ServeHTTP(rec, r)
	var failure map[string]json.RawMessage
	if rec.Code != http.StatusBadRequest || json.Unmarshal(rec.Body.Bytes(), &failure) != nil ||
		!strings.HasSuffix(strings.Trim(string(failure["__type"]), `"`), "#ConditionalCheckFailedException") {
		copyAnswer(w, rec.Result().Header, rec.Code, rec.Body.Bytes())
		return
	}
	var update struct {
		TableName string
		Key       json.RawMessage
	}
	if err := json.Unmarshal(req, &update); err != nil {
		t.Errorf("UpdateItem body: %v", err)
	}
	get, _ := json.Marshal(map[string]any{"TableName": update.TableName, "Key": update.Key, "ConsistentRead": true})
	gr := r.Clone(context.WithoutCancel(r.Context()))
	gr.Header.Set("X-Amz-Target", "DynamoDB_20120810.GetItem")
	gr.Body, gr.ContentLength = io.NopCloser(bytes.NewReader(get)), int64(len(get))
	grec := httptest.NewRecorder()
	rp.ServeHTTP(grec, gr)
	var got struct{ Item json.RawMessage }
	if err := json.Unmarshal(grec.Body.Bytes(), &got); err != nil || grec.Code != http.StatusOK {
		t.Errorf("GetItem after a failed condition: %d %s", grec.Code, grec.Body)
	}
	if got.Item != nil {
		failure["Item"] = got.Item
	}
	body, _ := json.Marshal(failure)
	copyAnswer(w, rec.Result().Header, rec.Code, body)
}

// copyAnswer writes an answer with its headers and a checksum of body.
func copyAnswer(w http.ResponseWriter, h http.Header, status int, body []byte) {
	for k, v := range h {
		w.Header()[k] = v
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.Header().Set("X-Amz-Crc32", strconv.FormatUint(uint64(crc32.ChecksumIEEE(body)), 10))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func (p *faultProxy) count(op string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seen[op]
}

// settle waits until the proxy has handled every request it received, so
// that a write it forwarded for a client that gave up has reached the
// server.
func (p *faultProxy) settle() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.busy > 0 {
		p.idle.Wait()
	}
}

func (p *faultProxy) lostAnswers() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lost
}

// firstOf injects f into the first request of op only.
func firstOf(op string, f fault) func(string, int, []byte) fault { return nthOf(op, 1, f) }

// nthOf injects f into the k-th request of op only.
func nthOf(op string, k int, f fault) func(string, int, []byte) fault {
	return func(o string, n int, _ []byte) fault {
		if o == op && n == k {
			return f
		}
		return fault{}
	}
}

var serverError = fault{status: 500, code: "InternalServerError", applied: true}

// storeWrite is one way to write a cost of 1 to identity "k".
type storeWrite struct {
	name  string
	write func(s kvstore.Conditional) error
}

// writesOfOne writes a cost of 1 to the minute bucket of t0 for "k", once
// conditionally (AddIf, limit 10) and once unconditionally (Add).
func writesOfOne() []storeWrite {
	cur := kvstore.Slot{Name: "minute", Bucket: window.Index(t0, time.Minute), Length: time.Minute}
	return []storeWrite{
		{"AddIf", func(s kvstore.Conditional) error {
			_, err := s.AddIf(context.Background(), "k", []kvstore.Cond{{Slot: cur, Max: 9, Add: 1}}, make([]int64, 1))
			return err
		}},
		{"Add", func(s kvstore.Conditional) error {
			return s.Add(context.Background(), "k", []kvstore.Slot{cur}, []int64{1})
		}},
	}
}

// TestAppliedWriteIsNotRetried: DynamoDB applies a write and the answer is
// lost (a 500 here). ADD is not idempotent, so the write is not retried:
// the call fails (the HTTP layer's on_store_error decides) and the table
// holds the cost once, not twice.
func TestAppliedWriteIsNotRetried(t *testing.T) {
	tests := append(writesOfOne(), storeWrite{"limiter, limit 1", func(s kvstore.Conditional) error {
		res, err := limiter.New(limiter.Options{Store: s}).Check(context.Background(), t0, "k", []limiter.Rule{rule("minute", 1, time.Minute)}, 1)
		if err == nil && !res.Allowed {
			t.Errorf("the first request was denied: a retry met its own count")
		}
		return err
	}})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			px := newFaultProxy(t, dynalite.Shared(t).Endpoint, firstOf("UpdateItem", serverError))
			tb := newTable(t, px.URL)
			if err := tt.write(tb.store(t)); err == nil {
				t.Errorf("write answered 500 after it was applied: got no error")
			}
			if n := px.count("UpdateItem"); n != 1 {
				t.Errorf("%d UpdateItem requests, want 1 (no retry)", n)
			}
			if got := tb.stored(t, "k")[attr("minute", time.Minute, t0)]; got != 1 {
				t.Errorf("the table holds %d, want 1", got)
			}
		})
	}
}

// TestThrottledWriteIsRetried: a throttled write was not applied, so it is
// retried, and counted once, whichever of DynamoDB's throttling errors it
// met; a write throttled on every attempt fails after MaxAttempts and is
// counted nowhere.
func TestThrottledWriteIsRetried(t *testing.T) {
	cur := kvstore.Slot{Name: "minute", Bucket: window.Index(t0, time.Minute), Length: time.Minute}
	for _, code := range []string{"ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded"} {
		throttled := fault{status: 400, code: code}
		t.Run(code, func(t *testing.T) {
			px := newFaultProxy(t, dynalite.Shared(t).Endpoint, firstOf("UpdateItem", throttled))
			tb := newTable(t, px.URL)
			ok, err := tb.store(t).AddIf(context.Background(), "k", []kvstore.Cond{{Slot: cur, Max: 9, Add: 1}}, make([]int64, 1))
			if err != nil || !ok {
				t.Fatalf("AddIf after one throttled attempt = %v, %v; want true, nil", ok, err)
			}
			if n := px.count("UpdateItem"); n != 2 {
				t.Errorf("%d UpdateItem requests, want 2 (one retry)", n)
			}
			if got := tb.stored(t, "k")[attr("minute", time.Minute, t0)]; got != 1 {
				t.Errorf("the table holds %d, want 1", got)
			}
		})
		t.Run(code+" always", func(t *testing.T) {
			px := newFaultProxy(t, dynalite.Shared(t).Endpoint, func(op string, _ int, _ []byte) fault {
				if op == "UpdateItem" {
					return throttled
				}
				return fault{}
			})
			tb := newTable(t, px.URL)
			ok, err := tb.store(t).AddIf(context.Background(), "k", []kvstore.Cond{{Slot: cur, Max: 9, Add: 1}}, make([]int64, 1))
			if ok || err == nil || !strings.Contains(err.Error(), code) {
				t.Errorf("AddIf = %v, %v; want false and an error naming %s", ok, err, code)
			}
			if n := px.count("UpdateItem"); n != dynamostore.MaxAttempts {
				t.Errorf("%d UpdateItem requests, want %d", n, dynamostore.MaxAttempts)
			}
			if got := tb.stored(t, "k")[attr("minute", time.Minute, t0)]; got != 0 {
				t.Errorf("the table holds %d, want 0", got)
			}
		})
	}
}

// TestNoRetryPastDeadline: a call that fails with an error the SDK would
// retry (a throttled write, a read answered 500) is not retried when the
// caller's deadline (the HTTP layer's store_timeout) ends before a retry
// could be answered: the caller gets the error at once. Retried, the
// deadline cut the backoff short and the caller got "context deadline
// exceeded" after the whole budget, so under the default store_timeout
// (50 ms: two 20 ms backoffs and three round trips) DynamoDB's throttling
// was logged as a timeout and never named.
//
// The failing answer takes half the deadline (half): a retry, its backoff
// and an attempt as long again, cannot be answered in time, whatever the
// machine's pace. The deadline used to be one backoff (20 ms), which a
// loaded machine (-race, a CPU busy elsewhere) spent before the first
// answer came back: the call ended with the deadline's error, not the
// store's (35 of 80 runs under load).
func TestNoRetryPastDeadline(t *testing.T) {
	const half = 2 * time.Second // the first answer's lateness it allows, too
	cur := kvstore.Slot{Name: "minute", Bucket: window.Index(t0, time.Minute), Length: time.Minute}
	tests := []struct {
		name, op, code string
		status         int
		call           func(ctx context.Context, s kvstore.Conditional) error
	}{
		{"throttled AddIf", "UpdateItem", "ThrottlingException", 400, func(ctx context.Context, s kvstore.Conditional) error {
			_, err := s.AddIf(ctx, "k", []kvstore.Cond{{Slot: cur, Max: 9, Add: 1}}, make([]int64, 1))
			return err
		}},
		{"throttled Add", "UpdateItem", "ProvisionedThroughputExceededException", 400, func(ctx context.Context, s kvstore.Conditional) error {
			return s.Add(ctx, "k", []kvstore.Slot{cur}, []int64{1})
		}},
		{"read after a failed condition, 500", "GetItem", "InternalServerError", 500, func(ctx context.Context, s kvstore.Conditional) error {
			_, err := s.AddIf(ctx, "k", []kvstore.Cond{{Slot: cur, Max: 0, Add: 1}}, make([]int64, 1))
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel() // each waits for its late answer
			px := newFaultProxy(t, dynalite.Shared(t).Endpoint, func(op string, _ int, _ []byte) fault {
				switch {
				case op == tt.op:
					return fault{status: tt.status, code: tt.code, delay: half}
				case op == "UpdateItem":
					// Answered here, without the item (as dynalite
					// does): the Store reads it.
					return fault{status: 400, code: "ConditionalCheckFailedException"}
				}
				return fault{}
			})
			tb := newTable(t, px.URL)
			// Twice the failing answer's delay: no retry can be answered
			// in time. Every answer within it comes from the proxy, not
			// dynalite.
			ctx, cancel := context.WithTimeout(context.Background(), 2*half)
			defer cancel()
			err := tt.call(ctx, tb.store(t))
			var api smithy.APIError
			if !errors.As(err, &api) || api.ErrorCode() != tt.code {
				t.Errorf("call = %v; want the %s error", err, tt.code)
			}
			if errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("call = %v; want no deadline error: the %s came back in time, and a retry could not have", err, tt.code)
			}
			if n := px.count(tt.op); n != 1 {
				t.Errorf("%d %s requests, want 1 (no retry that cannot be answered in time)", n, tt.op)
			}
		})
	}
}

// TestRetryAfterHintWithinBudget: the AWS SDKs' 2026 retry behaviour
// (opt-in with AWS_NEW_RETRIES_2026=true in the pinned SDK, announced as
// the default from November 2026) waits before a retry for as long as the
// answer's X-Amz-Retry-After asks, up to 5 s, not MaxBackoff. The Store
// allowed a retry whenever MaxBackoff and another attempt fitted before
// the deadline: a throttled write hinted to wait 10 s, under a deadline of
// 2 s, was retried, its wait cut by the deadline, and the caller got
// "context deadline exceeded" after the whole store_timeout, not the
// throttling at once (what inBudget is for). A hint shorter than
// MaxBackoff changes nothing: the write is retried.
func TestRetryAfterHintWithinBudget(t *testing.T) {
	t.Setenv("AWS_NEW_RETRIES_2026", "true")
	cur := kvstore.Slot{Name: "minute", Bucket: window.Index(t0, time.Minute), Length: time.Minute}
	tests := []struct {
		name  string
		hint  string // X-Amz-Retry-After, in milliseconds
		tries int    // UpdateItem requests the call makes
	}{
		{"hint past the deadline", "10000", 1},
		{"hint shorter than MaxBackoff", "1", dynamostore.MaxAttempts},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			throttled := fault{status: 400, code: "ThrottlingException", retryAfter: tt.hint}
			px := newFaultProxy(t, dynalite.Shared(t).Endpoint, func(op string, _ int, _ []byte) fault {
				if op == "UpdateItem" {
					return throttled
				}
				return fault{}
			})
			tb := newTable(t, px.URL)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_, err := tb.store(t).AddIf(ctx, "k", []kvstore.Cond{{Slot: cur, Max: 9, Add: 1}}, make([]int64, 1))
			var api smithy.APIError
			if !errors.As(err, &api) || api.ErrorCode() != "ThrottlingException" || errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("AddIf = %v; want the ThrottlingException, and no deadline error", err)
			}
			if n := px.count("UpdateItem"); n != tt.tries {
				t.Errorf("%d UpdateItem requests, want %d", n, tt.tries)
			}
		})
	}
}

// TestBrokenAnswers: an answer to a write that is cut off, not JSON, or
// JSON without the written counters is an error, never a success and never
// a panic; the write is not retried (it may have been applied), and what
// the server applied is in the table once.
func TestBrokenAnswers(t *testing.T) {
	cur := kvstore.Slot{Name: "minute", Bucket: window.Index(t0, time.Minute), Length: time.Minute}
	counter := attr("minute", time.Minute, t0)
	tests := []struct {
		name string
		f    fault
	}{
		{"200 empty object", fault{status: 200, body: `{}`}},
		{"200 empty body", fault{status: 200}},
		{"200 item without the counter", fault{status: 200, body: `{"Attributes":{"id":{"S":"k"},"ttl":{"N":"1"}}}`}},
		{"200 item without the counter, applied", fault{status: 200, applied: true, body: `{"Attributes":{"id":{"S":"k"}}}`}},
		{"200 not JSON", fault{status: 200, body: `<html>gateway</html>`}},
		{"200 cut off, applied", fault{status: 200, applied: true, body: `{"Attributes":{"` + counter + `":{"N":"1`}},
		{"200 count not a number, applied", fault{status: 200, applied: true, body: `{"Attributes":{"` + counter + `":{"N":"one"}}}`}},
		{"400 cut off", fault{status: 400, body: `{"__type":"com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException","mess`}},
		{"400 not JSON", fault{status: 400, body: `Bad Request`}},
		{"failed condition, count not a number", fault{status: 400, body: `{"__type":"com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException",` +
			`"message":"x","Item":{"id":{"S":"k"},"` + counter + `":{"N":"1e3x"}}}`}},
		{"connection closed", fault{drop: true}},
		{"connection closed, applied", fault{drop: true, applied: true}},
	}
	for _, tt := range tests {
		for _, w := range writesOfOne() {
			t.Run(tt.name+"/"+w.name, func(t *testing.T) {
				px := newFaultProxy(t, dynalite.Shared(t).Endpoint, firstOf("UpdateItem", tt.f))
				tb := newTable(t, px.URL)
				s := tb.store(t)
				if err := w.write(s); err == nil {
					t.Errorf("write answered %d %q: got no error", tt.f.status, tt.f.body)
				}
				if n := px.count("UpdateItem"); n != 1 {
					t.Errorf("%d UpdateItem requests, want 1 (no retry)", n)
				}
				want := int64(0)
				if tt.f.applied {
					want = 1
				}
				if got := tb.stored(t, "k")[counter]; got != want {
					t.Errorf("the table holds %d, want %d", got, want)
				}
				// The next write is answered in full and tells the truth.
				counts := make([]int64, 1)
				if ok, err := s.AddIf(context.Background(), "k", []kvstore.Cond{{Slot: cur, Max: 9, Add: 1}}, counts); err != nil || !ok || counts[0] != want+1 {
					t.Errorf("next AddIf = %v, %v, counts %v; want true, nil, [%d]", ok, err, counts, want+1)
				}
			})
		}
	}
}

// TestReadIsRetried: reads keep the client's retries; a GetItem (after a
// failed condition, on dynalite) that meets a 500 is tried again.
func TestReadIsRetried(t *testing.T) {
	px := newFaultProxy(t, dynalite.Shared(t).Endpoint, firstOf("GetItem", fault{status: 500, code: "InternalServerError"}))
	tb := newTable(t, px.URL)
	cur := kvstore.Slot{Name: "minute", Bucket: window.Index(t0, time.Minute), Length: time.Minute}
	if err := tb.store(t).Add(context.Background(), "k", []kvstore.Slot{cur}, []int64{5}); err != nil {
		t.Fatal(err)
	}
	counts := make([]int64, 1)
	ok, err := tb.store(t).AddIf(context.Background(), "k", []kvstore.Cond{{Slot: cur, Max: 0, Add: 1}}, counts)
	if err != nil || ok || counts[0] != 5 {
		t.Errorf("AddIf = %v, %v, counts %v; want false, nil, [5]", ok, err, counts)
	}
	if n := px.count("GetItem"); n != 2 {
		t.Errorf("%d GetItem requests, want 2 (one retry)", n)
	}
}

// TestTTLCoversLongestRule: a Store that writes only a short rule of an
// identity (ip_limits and the default plan share the ip identity), from an
// instance that has not seen its day rule, keeps the item alive until the
// day bucket can no longer be read: MaxPeriod.
func TestTTLCoversLongestRule(t *testing.T) {
	t.Parallel()
	tb := newTable(t, dynalite.Shared(t).Endpoint)
	opt := dynamostore.MaxPeriod(24 * time.Hour)
	day := limiter.New(limiter.Options{Store: tb.store(t, opt)})
	burst := limiter.New(limiter.Options{Store: tb.store(t, opt)})
	ctx := context.Background()
	if _, err := day.Check(ctx, t0, "ip:1.2.3.4", []limiter.Rule{rule("day", 10000, 24*time.Hour)}, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := burst.Check(ctx, t0, "ip:1.2.3.4", []limiter.Rule{rule("burst", 10, time.Second)}, 1); err != nil {
		t.Fatal(err)
	}
	needed := window.Start(window.Index(t0, 24*time.Hour)+2, 24*time.Hour).Unix() // the day bucket's last use
	got := tb.stored(t, "ip:1.2.3.4")[dynamostore.TTLAttribute]
	if got < needed {
		t.Errorf("ttl %s, before %s when the day bucket %s stops being read",
			time.Unix(got, 0).UTC(), time.Unix(needed, 0).UTC(), attr("day", 24*time.Hour, t0))
	}
	if want := window.Start(window.Index(t0, time.Second)+1, time.Second).Add(48 * time.Hour).Unix(); got != want {
		t.Errorf("ttl %d, want %d (end of the written bucket + 2 × MaxPeriod)", got, want)
	}
}

// TestSkewedWriterKeepsPrevious: a node whose clock runs 100 ms ahead
// writes in bucket i+1 while another is still in bucket i; bucket i-1,
// the other's previous bucket, stays, so the other does not over-admit.
func TestSkewedWriterKeepsPrevious(t *testing.T) {
	t.Parallel()
	la, lb := newTable(t, dynalite.Shared(t).Endpoint).instances(t)
	rules := []limiter.Rule{rule("sec", 100, time.Second)}
	ctx := context.Background()
	base := time.Unix(1_800_000_000, 0)
	for range 100 { // fill bucket i-1
		if res, err := la.Check(ctx, base.Add(-500*time.Millisecond), "k", rules, 1); err != nil || !res.Allowed {
			t.Fatalf("filling bucket i-1: allowed %v, %v", res.Allowed, err)
		}
	}
	for _, at := range []time.Duration{100 * time.Millisecond, 1050 * time.Millisecond} { // bucket i, then i+1
		if _, err := la.Check(ctx, base.Add(at), "k", rules, 1); err != nil {
			t.Fatal(err)
		}
	}
	// B at base+950ms, in bucket i: the estimate is floor(100 × 0.05) + 1
	// = 6, so 94 more fit.
	n := 0
	for range 200 {
		res, err := lb.Check(ctx, base.Add(950*time.Millisecond), "k", rules, 1)
		if err != nil {
			t.Fatal(err)
		}
		if res.Allowed {
			n++
		}
	}
	if n != 94 {
		t.Errorf("B admitted %d in bucket i, want 94", n)
	}
}
