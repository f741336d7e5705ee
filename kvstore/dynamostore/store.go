package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/slidegate/slidegate/kvstore"
	"github.com/slidegate/slidegate/window"
)

// Names the table and the IAM policy must agree on (template.yaml is tested
// against them).
const (
	// KeyAttribute is the table's partition key, a string: the identity.
	KeyAttribute = "id"
	// TTLAttribute holds the Unix second after which the item's counters
	// can no longer be read; the table's TimeToLiveSpecification names it.
	TTLAttribute = "ttl"
)

// Actions are the DynamoDB item actions the Store calls; a least-privilege
// policy grants these and nothing else.
var Actions = []string{"dynamodb:UpdateItem", "dynamodb:GetItem"}

// DefaultCacheSize is the number of identities the Store caches when no
// CacheSize option is given.
const DefaultCacheSize = 65536

// Errors returned by New and the Store's methods.
var (
	ErrTable  = errors.New("dynamostore: table name must not be empty")
	ErrClient = errors.New("dynamostore: client must not be nil")
	ErrLength = errors.New("dynamostore: counts and slots differ in length")
	ErrSlot   = errors.New("dynamostore: slot needs a rule name and a positive length")
	ErrItem   = errors.New("dynamostore: malformed item")
	// ErrNoTime is joined to an error the SDK would have retried when the
	// caller's deadline leaves no time for the retry.
	ErrNoTime = errors.New("dynamostore: no retry before the deadline")
)

// API is the slice of the DynamoDB client the Store calls, with the SDK's
// signatures: *dynamodb.Client satisfies it, tests pass a fake.
type API interface {
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
}

// Option configures a Store.
type Option func(*Store)

// MaxPeriod is the longest rule period any writer of the table uses. Every
// write then sets the item's TTL to at least the end of the bucket it
// writes plus two such periods, so a write naming only short rules (from
// an instance that has not seen the identity's longer ones) never shortens
// the life of counters a longer rule still reads. Zero or less derives the
// TTL from the written slots and the cached item only.
func MaxPeriod(d time.Duration) Option {
	return func(s *Store) {
		if d > 0 {
			s.maxPeriod.Store(int64(d))
		}
	}
}

// RaiseMaxPeriod raises the Store's MaxPeriod to d when d is longer, for
// the writes to come: a process whose configuration gains a longer window
// while it runs (serve, reloaded). A shorter d changes nothing, as
// counters written under the longer period may still be read (by another
// writer of the table, or once the rule comes back). It is safe for
// concurrent use with the Store's other methods.
func (s *Store) RaiseMaxPeriod(d time.Duration) {
	n := int64(d)
	for last := s.maxPeriod.Load(); n > last && !s.maxPeriod.CompareAndSwap(last, n); last = s.maxPeriod.Load() {
	}
}

// CacheSize bounds the identities whose last seen counters the Store keeps.
// Zero or less means DefaultCacheSize.
func CacheSize(n int) Option {
	return func(s *Store) {
		if n > 0 {
			s.cacheSize = n
		}
	}
}

var (
	_ kvstore.Conditional = (*Store)(nil)
	_ kvstore.Reader      = (*Store)(nil)
)

// Store is a kvstore.Conditional on one DynamoDB table, and a
// kvstore.Reader: Load answers from its cache, Read from the table.
// Create it with New; the zero value is not usable. A Store is safe for
// concurrent use; one per process (Lambda instance) lets its cache pay
// off.
type Store struct {
	api       API
	table     *string
	cacheSize int
	maxPeriod atomic.Int64 // a time.Duration: MaxPeriod's, or RaiseMaxPeriod's
	cache     *cache
	// oldOnFailure records that the server has returned the stored item
	// with a failed condition: from then on a failure without an item
	// means the item does not exist, and no read is needed.
	oldOnFailure atomic.Bool
}

// New returns a Store keeping counters in table through client.
func New(client API, table string, opts ...Option) (*Store, error) {
	if client == nil {
		return nil, ErrClient
	}
	if table == "" {
		return nil, ErrTable
	}
	s := &Store{api: client, table: aws.String(table), cacheSize: DefaultCacheSize}
	for _, o := range opts {
		o(s)
	}
	s.cache = newCache(s.cacheSize)
	return s, nil
}

// Load implements kvstore.Store from the Store's cache: it sends no request.
// Counts are the last values this Store saw, lower bounds of the stored
// ones; identities it has not seen load as zeros.
func (s *Store) Load(_ context.Context, id string, slots []kvstore.Slot, counts []int64) error {
	if len(counts) != len(slots) {
		return fmt.Errorf("%w: %d counts, %d slots", ErrLength, len(counts), len(slots))
	}
	s.cache.load(id, slots, counts)
	return nil
}

// Read sets counts[i] to the stored count of slots[i], zero when missing,
// from one consistent GetItem (the client's retries, within ctx's
// deadline), and caches the item. It is Load for a caller that needs the
// table's counts, not a lower bound: a check that counts nothing (the
// check API's cost 0) answered from the cache told a caller on an
// instance that had not served the key that its whole quota was left.
func (s *Store) Read(ctx context.Context, id string, slots []kvstore.Slot, counts []int64) error {
	if len(counts) != len(slots) {
		return fmt.Errorf("%w: %d counts, %d slots", ErrLength, len(counts), len(slots))
	}
	cl := s.cache.begin(id)
	defer s.cache.end(id, &cl)
	got, err := s.get(ctx, id)
	if err != nil {
		return fmt.Errorf("dynamostore: read %d counters: %w", len(slots), err)
	}
	item, err := s.cache.settle(id, &cl, got, false)
	if err != nil {
		return err
	}
	for i, sl := range slots {
		counts[i] = find(item, sl)
	}
	return nil
}

// Add implements kvstore.Store: one unconditional UpdateItem adding costs[i]
// to slots[i]. Zero costs are skipped; when all are zero, no request is sent,
// nor when ctx is done. An undo (negative costs) that fails once sent may
// have been applied: the cached counts drop by it.
func (s *Store) Add(ctx context.Context, id string, slots []kvstore.Slot, costs []int64) error {
	if len(costs) != len(slots) {
		return fmt.Errorf("%w: %d costs, %d slots", ErrLength, len(costs), len(slots))
	}
	conds := make([]kvstore.Cond, 0, len(slots))
	undo := false
	for i, sl := range slots {
		if costs[i] != 0 {
			conds = append(conds, kvstore.Cond{Slot: sl, Add: costs[i]})
			undo = undo || costs[i] < 0
		}
	}
	if len(conds) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		// Not sent (the budget went to an earlier call): the counts
		// stand, in the table and in the cache.
		return fmt.Errorf("dynamostore: add %d counters: %w", len(conds), err)
	}
	in, ttl, err := s.update(id, conds, false)
	if err != nil {
		return err
	}
	if err := s.add(ctx, id, conds, in, ttl, undo); err != nil {
		if undo {
			// DynamoDB may have applied the undo (a 5xx, or no answer in
			// time, after it did): the cached counts drop by it, so that
			// they stay lower bounds. Left as they were, they stood above
			// the table's, and the limiter refused on them, as final, a
			// request the table had room for.
			s.cache.lower(id, conds)
		}
		return err
	}
	return nil
}

// add sends the unconditional write in of conds, which sets the TTL to ttl,
// and caches its answer.
func (s *Store) add(ctx context.Context, id string, conds []kvstore.Cond, in *dynamodb.UpdateItemInput, ttl int64, undo bool) error {
	cl := s.cache.begin(id)
	defer s.cache.end(id, &cl)
	out, err := s.api.UpdateItem(ctx, in, retryThrottlesOnly)
	if err != nil {
		return fmt.Errorf("dynamostore: add %d counters: %w", len(conds), err)
	}
	if err := written(out.Attributes, conds); err != nil {
		return err
	}
	item, err := s.cache.settle(id, &cl, out.Attributes, undo)
	if err != nil {
		return err
	}
	s.keepTTL(ctx, id, item, ttl, out.Attributes[TTLAttribute])
	return nil
}

// AddIf implements kvstore.Conditional with one conditional UpdateItem.
// When the condition fails, the current counts come from the failure
// itself, or from one consistent GetItem on servers that do not return the
// item with it. A failed condition is not an error.
func (s *Store) AddIf(ctx context.Context, id string, conds []kvstore.Cond, counts []int64) (bool, error) {
	if len(counts) != len(conds) {
		return false, fmt.Errorf("%w: %d counts, %d clauses", ErrLength, len(counts), len(conds))
	}
	if len(conds) == 0 {
		return true, nil // nothing to check or add: no write (it would only set a TTL)
	}
	in, ttl, err := s.update(id, conds, true)
	if err != nil {
		return false, err
	}
	cl := s.cache.begin(id)
	defer s.cache.end(id, &cl)
	out, err := s.api.UpdateItem(ctx, in, retryThrottlesOnly)
	if err == nil {
		if err := written(out.Attributes, conds); err != nil {
			return false, err
		}
		item, err := s.cache.settle(id, &cl, out.Attributes, false)
		if err != nil {
			return false, err
		}
		fill(item, conds, counts)
		s.keepTTL(ctx, id, item, ttl, out.Attributes[TTLAttribute])
		return true, nil
	}
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return false, fmt.Errorf("dynamostore: conditional add: %w", err)
	}
	attrs := ccf.Item
	if attrs != nil {
		s.oldOnFailure.Store(true)
	} else if !s.oldOnFailure.Load() {
		got, err := s.get(ctx, id)
		if err != nil {
			return false, fmt.Errorf("dynamostore: read after failed condition: %w", err)
		}
		attrs = got
	}
	item, err := s.cache.settle(id, &cl, attrs, false)
	if err != nil {
		return false, err
	}
	fill(item, conds, counts)
	return false, nil
}

// get reads id's item with one consistent GetItem; nil when there is none.
func (s *Store) get(ctx context.Context, id string) (map[string]types.AttributeValue, error) {
	got, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      s.table,
		Key:            key(id),
		ConsistentRead: aws.Bool(true),
	}, readInBudget)
	if err != nil {
		return nil, err
	}
	return got.Item, nil
}

// writeRetryer retries a write only after an error that says DynamoDB did
// not apply it: throttling, or a connection that could not be made
// (notSent). An UpdateItem with ADD is not idempotent; after a 5xx, a
// timeout or a connection lost once the request was sent, it may have
// been applied, and a retry would count the request twice (or deny a
// request it already counted). Those errors go to the caller, whose
// on_store_error decides. Reads keep the client's full retries.
var writeRetryer = retry.NewStandard(func(o *retry.StandardOptions) {
	o.MaxAttempts = MaxAttempts
	o.MaxBackoff = MaxBackoff
	o.RateLimiter = ratelimit.None
	o.Retryables = []retry.IsErrorRetryable{
		retry.NoRetryCanceledError{},
		retry.RetryableErrorCode{Codes: retry.DefaultThrottleErrorCodes},
		notSent{},
	}
})

// notSent retries a write whose connection could not be made: the dial
// failed (a lookup of the endpoint that failed, an address that refused
// or could not be reached), so not a byte of the request was sent and
// DynamoDB cannot have applied it. It is the first request after an idle
// connection was dropped (RegionalIdleTimeout) that dials: left
// unretried, such a failure let the request through uncounted under
// on_store_error allow (a 503 under deny) where a second attempt within
// store_timeout would have counted it. A failure after the connection was
// made, in its TLS handshake included, is not taken for one: the error
// does not say whether the request went out.
type notSent struct{}

func (notSent) IsErrorRetryable(err error) aws.Ternary {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return aws.TrueTernary
	}
	return aws.UnknownTernary
}

// retryThrottlesOnly is the per-call option of the Store's writes.
func retryThrottlesOnly(o *dynamodb.Options) { o.Retryer = &inBudget{RetryerV2: writeRetryer} }

// readInBudget is the per-call option of the Store's reads: the client's
// retries, within the caller's deadline.
func readInBudget(o *dynamodb.Options) {
	if r, ok := o.Retryer.(aws.RetryerV2); ok {
		o.Retryer = &inBudget{RetryerV2: r}
	}
}

// inBudget is the retryer of one call: the retries of the one it wraps,
// but only while the caller's deadline (store_timeout) leaves time for the
// backoff (MaxBackoff at most, as NewClient's and the writes' retryers
// wait, or longer when the answer asks for it: retryWait) and another
// attempt as long as the last.
// A retry that cannot be answered in time is not made: the caller gets
// the attempt's error (DynamoDB's throttling) at once. Made, the deadline
// cut its backoff or its attempt short, and the caller got "context
// deadline exceeded" after the whole budget instead: under the default
// store_timeout of 50 ms, which two backoffs and three round trips
// exceed, throttling was logged as a timeout and never named.
type inBudget struct {
	aws.RetryerV2
	began time.Time // when the latest attempt began
}

// GetAttemptToken notes when an attempt begins (the SDK asks before each).
func (b *inBudget) GetAttemptToken(ctx context.Context) (func(error) error, error) {
	b.began = time.Now()
	return b.RetryerV2.GetAttemptToken(ctx)
}

// GetRetryToken refuses a retry the deadline would cut short; the SDK
// then returns the attempt's error joined with the refusal.
func (b *inBudget) GetRetryToken(ctx context.Context, err error) (func(error) error, error) {
	if end, ok := ctx.Deadline(); ok {
		if left, need := time.Until(end), retryWait(err)+time.Since(b.began); left < need {
			return nil, fmt.Errorf("%w: %s left, a retry takes about %s", ErrNoTime, left.Round(100*time.Microsecond), need.Round(100*time.Microsecond))
		}
	}
	return b.RetryerV2.GetRetryToken(ctx, err)
}

// maxHintedWait is the longest the SDK waits before a retry that an
// answer's X-Amz-Retry-After asks for: 5 s beyond the backoff.
const maxHintedWait = 5*time.Second + MaxBackoff

// retryWait is how long the SDK may wait before retrying after err:
// MaxBackoff, or the wait the answer's X-Amz-Retry-After header asks for
// when that is longer. The SDK's 2026 retry behaviour (AWS_NEW_RETRIES_2026,
// announced as the default from November 2026) honours the header up to
// maxHintedWait whatever MaxBackoff says; taken for MaxBackoff, a hint of
// a second under a store_timeout of 50 ms let the retry start, the
// deadline cut its wait, and the caller got "context deadline exceeded"
// after the whole budget instead of the throttling at once. It counts the
// hint also where the SDK does not honour it: a retry sooner than DynamoDB
// asked is likely throttled again.
func retryWait(err error) time.Duration {
	var re *awshttp.ResponseError
	if !errors.As(err, &re) || re.Response == nil || re.Response.Response == nil {
		return MaxBackoff
	}
	ms, perr := strconv.ParseInt(re.Response.Header.Get("X-Amz-Retry-After"), 10, 64)
	switch {
	case perr != nil || ms <= 0:
		return MaxBackoff
	case ms >= int64(maxHintedWait/time.Millisecond):
		return maxHintedWait // and no overflow of a huge hint
	}
	return max(MaxBackoff, time.Duration(ms)*time.Millisecond)
}

// written checks that item, the answer to a write of conds, holds every
// counter the write added to. DynamoDB answers a write with the whole item
// after it (ReturnValues ALL_NEW), which then has them all; an answer
// without them (a 200 with an empty body or "{}" from an endpoint, or
// something in front of it, that did not do the write) is no evidence that
// the request was counted, and taking it for one would admit requests that
// nothing counts.
func written(item map[string]types.AttributeValue, conds []kvstore.Cond) error {
	for _, c := range conds {
		if c.Add == 0 {
			continue
		}
		if _, ok := item[attrName(c.Slot)]; !ok {
			return fmt.Errorf("%w: the answer to the write lacks counter %q", ErrItem, attrName(c.Slot))
		}
	}
	return nil
}

// fill sets counts[i] to the count of conds[i]'s slot in item.
func fill(item []cell, conds []kvstore.Cond, counts []int64) {
	for i, c := range conds {
		counts[i] = find(item, c.Slot)
	}
}

func key(id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{KeyAttribute: &types.AttributeValueMemberS{Value: id}}
}

// attrName is the counter attribute of a slot: "<rule>#<length>#<bucket>".
func attrName(sl kvstore.Slot) string {
	return sl.Name + "#" + sl.Length.String() + "#" + strconv.FormatInt(sl.Bucket, 10)
}

// update builds the UpdateItem of conds: ADD each clause's Add, and when
// conditional, require each clause's count to be at most its Max. It also
// removes the identity's cached buckets more than two before the newest
// and sets the TTL to the latest expiry (see MaxPeriod), never below the
// cached one; it returns that TTL too.
func (s *Store) update(id string, conds []kvstore.Cond, conditional bool) (*dynamodb.UpdateItemInput, int64, error) {
	names := map[string]string{"#t": TTLAttribute}
	values := map[string]types.AttributeValue{}
	var cond, add strings.Builder
	ph := make(map[string]string, len(conds)) // attribute -> placeholder
	sums := make(map[string]int64, len(conds))
	var ttl int64
	mp := time.Duration(s.maxPeriod.Load())
	for i, c := range conds {
		if c.Name == "" || c.Length <= 0 {
			return nil, 0, fmt.Errorf("%w: %+v", ErrSlot, c.Slot)
		}
		a := attrName(c.Slot)
		p, seen := ph[a]
		if !seen {
			p = "#c" + strconv.Itoa(len(ph))
			ph[a] = p
			names[p] = a
		}
		ttl = max(ttl, expiry(c.Slot))
		if mp > 0 {
			ttl = max(ttl, unixCeil(window.Start(c.Bucket+1, c.Length).Add(2*mp)))
		}
		if conditional {
			v := ":m" + strconv.Itoa(i)
			values[v] = number(c.Max)
			if cond.Len() > 0 {
				cond.WriteString(" AND ")
			}
			if c.Max < 0 {
				// A missing counter is zero, which exceeds a negative max.
				cond.WriteString(p + " <= " + v)
			} else {
				cond.WriteString("(attribute_not_exists(" + p + ") OR " + p + " <= " + v + ")")
			}
		}
		if c.Add != 0 {
			if _, dup := sums[a]; !dup {
				if add.Len() > 0 {
					add.WriteString(", ")
				}
				add.WriteString(p + " :a" + p[2:])
			}
			sums[a] += c.Add
		}
	}
	for a, sum := range sums {
		values[":a"+ph[a][2:]] = number(sum)
	}
	old, cachedTTL := s.cache.stale(id, conds)
	ttl = max(ttl, cachedTTL)
	values[":t"] = number(ttl)
	expr := "SET #t = :t"
	if add.Len() > 0 {
		expr += " ADD " + add.String()
	}
	for i, a := range old {
		p := "#r" + strconv.Itoa(i)
		names[p] = a
		if i == 0 {
			expr += " REMOVE " + p
		} else {
			expr += ", " + p
		}
	}
	in := &dynamodb.UpdateItemInput{
		TableName:                 s.table,
		Key:                       key(id),
		UpdateExpression:          aws.String(expr),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
		ReturnValues:              types.ReturnValueAllNew,
	}
	if conditional && cond.Len() > 0 {
		in.ConditionExpression = aws.String(cond.String())
		in.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	}
	return in, ttl, nil
}

// keepTTL raises the TTL of id's item, which a write that set it to ttl
// has just answered with item (and its TTL attribute, got: ttl, or
// higher), to when the item's last counter stops being read, if that is
// later. A write sets the TTL it computes, whatever the item
// had: the writer's own rules and MaxPeriod, and what its cache saw of
// the item. A writer of another configuration (a Lambda version beside
// another in a gradual deployment, a serve process given another
// --config, on the same table) that had not seen the identity set the
// TTL of a key's minute rule, three minutes ahead, on an item whose day
// counter the other configuration reads for two days: DynamoDB may then
// delete the item, and that configuration, or a rollback to it, finds the
// day quota whole. The raise is one more write, conditional so that it
// never lowers a TTL another writer raised meanwhile, made only when the
// item holds such a counter: after a change of configuration, once per
// identity and instance. Its failure is no store error (the request is
// counted): the cache keeps the raised TTL, which this Store's next write
// of the identity sets.
func (s *Store) keepTTL(ctx context.Context, id string, item []cell, ttl int64, got types.AttributeValue) {
	n, err := parseNumber(TTLAttribute, got)
	if err != nil {
		return // an answer without the TTL the write set (or nil): none to raise
	}
	ttl = max(ttl, n)
	need := ttl
	for _, c := range item {
		if c.bucket >= 0 && c.bucket <= math.MaxInt64/int64(c.length)-2 {
			need = max(need, expiry(kvstore.Slot{Bucket: c.bucket, Length: c.length}))
		}
	}
	if need <= ttl {
		return
	}
	s.cache.raiseTTL(id, need)
	_, _ = s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 s.table,
		Key:                       key(id),
		UpdateExpression:          aws.String("SET #t = :t"),
		ConditionExpression:       aws.String("#t < :t"),
		ExpressionAttributeNames:  map[string]string{"#t": TTLAttribute},
		ExpressionAttributeValues: map[string]types.AttributeValue{":t": number(need)},
	}, retryThrottlesOnly)
}

// expiry is sl.Expires in Unix seconds, rounded up.
func expiry(sl kvstore.Slot) int64 { return unixCeil(sl.Expires()) }

// unixCeil is t in Unix seconds, rounded up.
func unixCeil(t time.Time) int64 {
	sec := t.Unix()
	if t.Nanosecond() > 0 {
		sec++
	}
	return sec
}

func number(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}
