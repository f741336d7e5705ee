// Package kvstore is the contract between slidegate's limiter and the places
// that keep its counters: an in-memory map, a DynamoDB table, Workers KV.
//
// A counter is named by an identity (a hashed API key, a client IP) and a
// Slot (a rule's bucket). Counters only grow within their bucket, so any
// value a store has seen is a lower bound of the true one: stores may serve
// Load from a cache, and the limiter treats a denial on loaded counts as
// final.
//
// Every backend lives in its own package and runs the conformance suite in
// kvstore/storetest from its tests.
package kvstore

import (
	"context"
	"time"

	"github.com/slidegate/slidegate/window"
)

// Slot names one counter of an identity: one bucket of one rule.
type Slot struct {
	Name   string        // the rule's name; unique among an identity's rules
	Bucket int64         // window.Index(t, Length)
	Length time.Duration // bucket length (the rule's period)
}

// Expires returns the instant after which the slot can no longer be read:
// the end of the bucket after it, when it stops being the previous bucket.
func (s Slot) Expires() time.Time { return window.Start(s.Bucket+2, s.Length) }

// Store keeps counters. Load and Add are safe for concurrent use.
//
// An error from a Store means the backend failed; it never means a request
// is denied.
type Store interface {
	// Load sets counts[i] to the count of slots[i], zero when missing. The
	// values may come from a cache but never exceed the true counts.
	// len(counts) must equal len(slots).
	Load(ctx context.Context, id string, slots []Slot, counts []int64) error
	// Add adds costs[i] to slots[i], unconditionally. A store that cannot
	// write atomically (Workers KV) counts in memory at once and writes
	// behind; a negative cost undoes an earlier add.
	Add(ctx context.Context, id string, slots []Slot, costs []int64) error
}

// Peeker is a Store that can also read counts from what it already holds
// (its own counts, what it last learnt of others'), with no call to its
// backend: a lower bound, perhaps lower than Load's. A limiter's peek
// (limiter.Limiter.PeekInto) reads through it: a peek only adds to the
// wait of a request already refused, and must not let made-up identities
// make backend calls (Workers KV bills each list).
type Peeker interface {
	Store
	// Peek sets counts[i] as Load does, from memory alone, and keeps
	// nothing it did not hold already. len(counts) must equal len(slots).
	Peek(ctx context.Context, id string, slots []Slot, counts []int64) error
}

// Cond is one clause of a conditional add: the count of Slot must be at most
// Max for the add to happen, and then Add is added to it.
type Cond struct {
	Slot
	Max int64
	Add int64
}

// Immediate is implemented by stores whose calls never wait, because they
// hold their counters in process memory (the memory store): a caller
// needs no deadline or timer around their calls. A type that embeds such a
// store inherits the method: a wrapper that may wait (a fault injector, a
// store that also calls out) must not embed one, or must not be Immediate.
type Immediate interface {
	Immediate()
}

// Conditional is a Store that can admit atomically, so that a request is
// counted if and only if it is admitted, under any concurrency (memory,
// DynamoDB).
type Conditional interface {
	Store
	// AddIf atomically checks every clause and, when all hold, adds each
	// clause's Add and reports true with counts[i] set to the count of
	// conds[i].Slot after the add. When any clause fails it changes nothing
	// and reports false with counts[i] set to the current counts. A failed
	// condition is not an error. len(counts) must equal len(conds).
	AddIf(ctx context.Context, id string, conds []Cond, counts []int64) (bool, error)
}

// Admitter decides, from the counts of the slots it was given, whether a
// request is admitted. The limiter implements it.
type Admitter interface {
	Admit(counts []int64) bool
}

// Updater is a Conditional store that can run the decision itself under its
// own lock: an in-process store (memory, Worker isolate globals), where
// handing the decision over costs less than a Load followed by an AddIf.
type Updater interface {
	Conditional
	// Update atomically reads the counts of slots into counts, asks a, and
	// when a admits adds costs[i] to slots[i]. counts keep the values a
	// saw. It reports what a answered. a must not call the store.
	Update(ctx context.Context, id string, slots []Slot, counts, costs []int64, a Admitter) (bool, error)
}

// RuleUpdater is an Updater that also decides a lone rule itself, with
// window math under its lock: the limiter's most common check (one rule,
// shared or local) then needs no Admitter, no slot slices and no call
// back.
type RuleUpdater interface {
	Updater
	// UpdateRule atomically reads the counts of r's buckets pos.Index-1
	// and pos.Index (the Slots named r.Name of Length r.Period) and, when
	// r.AdmitsAt(pos, prev, cur, cost), adds cost to the current one. It
	// returns the counts it decided on, before the add, and whether it
	// admitted.
	UpdateRule(ctx context.Context, id string, r window.Rule, pos window.Pos, cost int64) (prev, cur int64, ok bool, err error)
}

// Reader is a Store whose Load answers from what it holds (DynamoDB's
// cache of the items it has seen: lower bounds) and that can also read
// its backend. A check that counts nothing (cost 0: the check API reading
// the state) reads through it, so that it answers with the stored counts.
type Reader interface {
	Store
	// Read sets counts[i] to the stored count of slots[i], zero when
	// missing. len(counts) must equal len(slots). On error it leaves
	// counts as they were: the limiter then decides on what Load gave.
	Read(ctx context.Context, id string, slots []Slot, counts []int64) error
}
