// Package limiter applies slidegate's rules to identities: for each rule it
// names the bucket slots for now, reads the counters from a kvstore, lets
// package window decide, records the admitted cost and combines the rules.
//
// On a kvstore.Conditional store (memory, DynamoDB) admission and counting
// are one atomic conditional add across all of an identity's rules, so a
// request is counted only if every rule admits it, under any concurrency.
// On a plain store (Workers KV) the limiter reads, decides and records the
// cost behind the decision.
//
// Local rules are decided first and counted at once, so that a flood is
// stopped before it reaches the shared store; when a shared rule then
// denies, their count is taken back. Meanwhile a concurrent request of the
// same identity sees it and may be denied although it fits: a denial too
// many in a narrow race, never an admission too many.
//
// A deny cache answers identities known to be blocked from memory until
// their RetryAfter, without a store round trip: a blocked client hammering
// the API costs no store requests (and a failed conditional write to
// DynamoDB is billed too). It remembers only denials by shared rules: a
// local rule is re-decided from memory at the cost of a cache lookup, and
// its counts may hold a concurrent request's cost that is being taken back.
// Refund forgets the identity's denial under the rules it takes back from.
//
// The limiter reads no clock: every Check takes now. A clock that steps
// backwards by up to a minute is held at the newest time seen (to the
// millisecond: within the newest millisecond a check is decided at its own
// time, in the same buckets), and RetryAfter, ResetAfter and NextAfter
// then count from now, the step included. A check that read the clock before a
// concurrent one read a time in a later bucket, and counted after it, is
// taken back and decided again at that time, as if it had read the clock
// after: neither saw the other's count. A limiter that serves one request
// (the Worker's) learns the later times of its isolate's other requests
// from Options.Latest. A longer step back corrects a clock that
// had run ahead: the limiter follows it, rather than decide every check at
// that time until the clock catches up. What was counted while the clock
// ran ahead went to buckets of that time: after the correction the current
// buckets admit as if it had not been (up to twice a limit within the
// step), and when the clock reaches those buckets again their counts apply
// once more (too strict then); stored counters of that time also live
// longer by the step. A correction empties the deny cache, and no denial
// is remembered until checks pass the time the clock had reached: the
// cache's counts would no longer bound the store's.
package limiter
