package backend

import (
	"context"
	"fmt"
	"time"
	"unicode/utf8"
)

// KeyController is implemented by backends whose jobs can carry a key
// (InsertParams.Key): a string naming what the job acts on (an account, a
// tenant, a ledger). Keys give a queue three things, all enforced inside
// JobClaim's own atomic step, over every worker on every machine:
//
//   - Turns (always, rules or not). Claims rotate between keys, so a key
//     with a few jobs is not starved by one with many queued before it.
//     Each keyed job gets a turn (JobRow.Turn) when it is inserted: one
//     more than the highest turn among the live jobs of its key, and at
//     least one more than the lowest turn among the queue's pending keyed
//     jobs (so the first job of an idle key joins the round after the one
//     being worked, not the first round). A job keeps its turn through retry, release,
//     rescue, failure and replay. Claim order is then priority (higher
//     first), turn (lower first), due time, ID: within one priority the
//     keys take one job each per round. A job without a key has turn 0:
//     at its priority it goes before keyed jobs, in the claim order jobs
//     always had (see JobClaim), so a queue without keys behaves exactly as
//     before; a queue where unkeyed jobs must not overtake keyed ones gives
//     them another queue or a lower priority.
//   - A limit per key (KeyRules.Limit > 0): a claim never leaves more than
//     Limit jobs of one key (within the queue) reserved, cancelling ones
//     included. A holder that dies keeps its slot until LeaseSweep rescues
//     its job; a stale holder's writes are refused by the fence (see the
//     package doc), so it never frees a slot it no longer holds.
//   - Order per key (KeyRules.Ordered): the key's jobs start one at a time,
//     in ID (insertion) order. A job is claimable only when no other job of
//     its key is reserved and no live job of its key has a lower ID, so a
//     head that is scheduled or backing off keeps the key blocked and keeps
//     its place, whatever the priority or due time of the jobs behind it.
//     A replayed job keeps its ID, so it runs again first, in its place.
//     What the key does when its head ends badly is KeyRules.OnFailure.
//
// A job without a key is never limited by key rules. Keys are per queue:
// the same key in two queues names two keys.
type KeyController interface {
	// QueueSetKeys replaces the queue's key rules (the zero KeyRules
	// clears them). It leaves the queue's paused flag and limits as they
	// are, and wakes subscribers (see Notifier), since a looser rule can
	// make jobs claimable. Rules are checked with ValidateKeyRules. The
	// queue need not hold any job.
	QueueSetKeys(ctx context.Context, queue string, rules KeyRules) error

	// KeyList lists the keys that have live or failed jobs, busiest first
	// (most pending plus reserved jobs, then queue and key by name), at
	// most params.Limit of them (0 means 100).
	KeyList(ctx context.Context, params KeyListParams) ([]KeyInfo, error)
}

// KeyRules are a queue's rules for its keyed jobs. The zero value limits
// nothing (keys still take turns).
type KeyRules struct {
	// Limit is the most jobs of one key reserved at once; 0: no limit.
	// Ordered keys run one at a time whatever it says (0 or 1).
	Limit int
	// Ordered makes each key a sequence: its jobs start one at a time,
	// in insertion order.
	Ordered bool
	// OnFailure is what an ordered key does when its head (its lowest-ID
	// live job) fails for good (moves to failed_jobs) or is cancelled.
	// Empty means KeyHold. Only ordered keys have one.
	OnFailure KeyPolicy
}

// IsZero reports whether r sets nothing.
func (r KeyRules) IsZero() bool { return r == KeyRules{} }

// Serial reports whether at most one job of a key may run at once.
func (r KeyRules) Serial() bool { return r.Ordered || r.Limit == 1 }

// Policy is r.OnFailure with its default filled in: KeyHold for an
// ordered key, "" otherwise.
func (r KeyRules) Policy() KeyPolicy {
	if !r.Ordered {
		return ""
	}
	if r.OnFailure == "" {
		return KeyHold
	}
	return r.OnFailure
}

// KeyPolicy is what an ordered key does when its head ends badly.
type KeyPolicy string

// The policies of an ordered key.
const (
	// KeyHold: a head that failed for good holds its key, visibly (see
	// KeyInfo.Held), until an operator replays it (it runs again first)
	// or purges it. Nothing of the key is claimed meanwhile. A cancelled
	// head was ended by an operator on purpose, which is the discard: the
	// key goes on with its next job.
	KeyHold KeyPolicy = "hold"
	// KeyContinue: the next job of the key runs; the failed head waits in
	// failed_jobs like any failed job.
	KeyContinue KeyPolicy = "continue"
	// KeyHalt: in the same step that fails or cancels the head, every
	// pending job of the key with a higher ID ends cancelled, its
	// LastError naming the head (HaltedError). Jobs enqueued later start
	// the key afresh.
	KeyHalt KeyPolicy = "halt"
)

// HaltedError is the LastError of a job cancelled because the head of
// its ordered key (job head) ended badly under KeyHalt.
func HaltedError(key string, head int64) string {
	return fmt.Sprintf("halted: job %d, the head of key %q, failed or was cancelled", head, key)
}

// Bounds of keys and key rules.
const (
	// MaxKeyLen bounds InsertParams.Key, as MaxUniqueKeyLen does unique
	// keys: a key names an account or a tenant, not data.
	MaxKeyLen = 255
	// MaxKeyLimit bounds KeyRules.Limit.
	MaxKeyLimit = MaxQueueConcurrency
)

// ValidateKey checks a job's key: at most MaxKeyLen bytes of UTF-8 without
// control characters ("" is no key). ValidateInsert calls it.
func ValidateKey(key string) error {
	if len(key) > MaxKeyLen {
		return &InputError{Field: "key", Reason: fmt.Sprintf("longer than %d bytes", MaxKeyLen)}
	}
	if !utf8.ValidString(key) || !printable(key) {
		return &InputError{Field: "key", Reason: "must be valid UTF-8 without control characters"}
	}
	return nil
}

// RefuseKeys is what a backend without KeyController calls first in its
// inserts: it refuses a batch holding a keyed job, since storing the job
// without honouring its key would break what the key promises.
func RefuseKeys(params []InsertParams) error {
	for i, p := range params {
		if p.Key != "" {
			return fmt.Errorf("insert job %d of %d with key %q: keys are %w", i+1, len(params), p.Key, ErrNotSupported)
		}
	}
	return nil
}

// ValidateKeyRules checks rules before anything is written.
func ValidateKeyRules(r KeyRules) error {
	switch {
	case r.Limit < 0 || r.Limit > MaxKeyLimit:
		return &InputError{Field: "key limit", Reason: fmt.Sprintf("%d: use 1..%d, or 0 for no limit", r.Limit, MaxKeyLimit)}
	case r.Ordered && r.Limit > 1:
		return &InputError{Field: "key limit", Reason: fmt.Sprintf("%d with ordered keys: an ordered key runs one job at a time; use 1 or 0", r.Limit)}
	case r.OnFailure != "" && !r.Ordered:
		return &InputError{Field: "key policy", Reason: fmt.Sprintf("%q without ordered keys: only an ordered key has a head to hold, continue or halt", r.OnFailure)}
	}
	switch r.OnFailure {
	case "", KeyHold, KeyContinue, KeyHalt:
		return nil
	}
	return &InputError{Field: "key policy", Reason: fmt.Sprintf("%q: use hold, continue or halt", r.OnFailure)}
}

// ParseKeyPolicy reads a policy name as the command line and the admin
// API take it.
func ParseKeyPolicy(s string) (KeyPolicy, error) {
	switch p := KeyPolicy(s); p {
	case KeyHold, KeyContinue, KeyHalt:
		return p, nil
	}
	return "", &InputError{Field: "key policy", Reason: fmt.Sprintf("%q: use hold, continue or halt", s)}
}

// KeyListParams selects the keys KeyList returns.
type KeyListParams struct {
	Queue string // "" : every queue
	// Held lists only held keys (see KeyInfo.Held).
	Held  bool
	Limit int // 0 means 100
}

// KeyInfo is one key of one queue as KeyList sees it.
type KeyInfo struct {
	Queue    string
	Key      string
	Pending  int64 // pending jobs of the key, scheduled ones included
	Reserved int64 // reserved jobs of the key, cancelling ones included
	Failed   int64 // the key's jobs in failed_jobs
	// Held: the queue's keys are ordered under KeyHold and the key has a
	// failed job: nothing of the key is claimed until that job is replayed
	// or purged. HeadID is then the lowest ID among its failed jobs, the
	// one that holds it (the one a replay runs first), and HeldSince when
	// that job failed (its FailedAt): how long the key has waited.
	Held      bool
	HeadID    int64
	HeldSince time.Time
}
