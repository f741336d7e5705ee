// Package dynamostore keeps slidegate's counters in one DynamoDB table and
// admits requests with a single conditional write.
//
// # Layout
//
// One item per identity, keyed by the string attribute KeyAttribute ("id").
// Each rule bucket is one number attribute named "<rule>#<bucket length>#<bucket
// index>", for example "minute#1m0s#29384720", so every rule of an identity
// is decided in the same item. TTLAttribute ("ttl") holds the Unix second
// after which no bucket of the item can be read any more; the table's TTL
// setting (template.yaml) lets DynamoDB delete idle identities. The Store
// never calls UpdateTimeToLive; CreateTable (`serve --create-table`) turns
// TTL on for a table it creates.
//
// # One request per decision
//
// AddIf is one UpdateItem: ADD the cost to every current bucket, a
// ConditionExpression "count <= max" per clause (derived by the limiter from
// the limit minus the weighted previous bucket), REMOVE the identity's
// buckets older than the ones in use, SET the TTL. DynamoDB applies all or
// nothing, so a request is counted if and only if every rule admits it, under
// any concurrency, and a request denied by one rule charges no rule.
//
// The item that comes back (ReturnValues ALL_NEW) must hold every counter
// the write added to; an answer without them (a 200 "{}" from an endpoint
// that did not do the write) is an ErrItem error, not a success. The item
// refreshes a bounded cache in the Store, and Load answers from that cache
// without a request: cached counts are lower bounds (a previous bucket
// still grows just after the boundary, from writers whose clocks lag),
// which the limiter's conditional write corrects.
// An identity never seen loads as zeros. In steady state a decision costs
// exactly one UpdateItem; an identity the limiter knows to be blocked costs
// none (its deny cache). Read is for a caller that needs the table's
// counts, not lower bounds (a check that counts nothing): one consistent
// GetItem.
//
// The answer to a call that overlapped no other call of the identity in
// the Store (every call of a Lambda instance, which serves one request at
// a time) replaces the cached counts, so counts another instance took back
// (a refund) reach the cache with the next write; answers of overlapping
// calls, which may arrive out of order, are merged by maximum.
//
// When a condition fails, DynamoDB returns the stored item with the failure
// (ReturnValuesOnConditionCheckFailure ALL_OLD), so the true counts cost no
// second read. Servers that do not return it (dynalite 4.0.0) get one
// consistent GetItem instead.
//
// # Bounds
//
// Every call runs under the caller's context, which carries the HTTP
// layer's store_timeout. NewClient bounds the SDK's retries (MaxAttempts,
// MaxBackoff), and the Store makes a retry only when the deadline leaves
// time for its backoff (or the wait an answer's X-Amz-Retry-After asks
// for, when longer) and another attempt as long as the last: a
// throttled write near the deadline returns the throttling error at once,
// not a deadline error after the whole budget.
//
// Writes are not idempotent (ADD): the Store retries an UpdateItem only
// after throttling, which DynamoDB did not apply, or a failed dial, which
// sent nothing. A 5xx, a timeout or a connection lost after sending may
// have been applied, so it is returned as an error instead of counting the
// request twice. Reads keep the client's retries.
//
// # Expiry
//
// A write sets the TTL to the latest expiry of its slots, to at least the
// end of its bucket plus twice MaxPeriod (the longest window any writer
// uses), and never below the TTL this Store last saw, so a write of short
// rules does not expire the counters of long ones. When the item it returns
// still holds a counter read past that TTL (a writer of another
// configuration, whose MaxPeriod is longer, wrote it), one more write
// raises the TTL to that counter's expiry, on the condition that the
// stored one is lower (keepTTL). It removes a rule's
// buckets more than two before the one it writes: a node whose clock lags
// by one bucket still reads the bucket before its own.
package dynamostore
