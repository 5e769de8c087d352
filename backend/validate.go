package backend

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Limits that ValidateInsert enforces. Queue names are deliberately narrow
// (they appear in metric labels, URLs and command lines unquoted).
const (
	MaxQueueLen     = 128
	MaxTypeLen      = 255
	MaxUniqueKeyLen = 255
	MinPriority     = -1000
	MaxPriority     = 1000
	MaxMaxAttempts  = 1000

	// MaxMetadataKeys and MaxMetadataBytes bound InsertParams.Metadata:
	// metadata is for trace context and a few tags, not for data (that
	// belongs in the payload).
	MaxMetadataKeys     = 64
	MaxMetadataBytes    = 4096 // the sum of every key's and value's length
	MaxMetadataKeyBytes = 128
)

// InputError says which field of a request was refused and why. It wraps
// ErrInvalidInput.
type InputError struct {
	Field  string
	Reason string
}

// Error implements error.
func (e *InputError) Error() string { return "invalid " + e.Field + ": " + e.Reason }

// Unwrap lets errors.Is(err, ErrInvalidInput) match.
func (e *InputError) Unwrap() error { return ErrInvalidInput }

// ValidateQueue reports whether name is an acceptable queue name.
func ValidateQueue(name string) error {
	if !validQueue(name) {
		shown := fmt.Sprintf("%q", name)
		if len(name) > MaxQueueLen {
			// Echoing a huge argument back in full only buries the hint.
			shown = fmt.Sprintf("%q… (%d bytes)", Shorten(name, 32), len(name))
		}
		return &InputError{Field: "queue", Reason: fmt.Sprintf("%s: use 1 to %d letters, digits, '_', '-', '.' or ':', starting with a letter or digit", shown, MaxQueueLen)}
	}
	return nil
}

// validQueue: 1 to 128 letters, digits, '_', '-', '.', ':', starting with a
// letter or digit. A loop, not a regexp: it runs for every enqueued job, and
// the regexp was a large share of a batch enqueue's CPU (docs/performance.md).
func validQueue(name string) bool {
	if len(name) == 0 || len(name) > MaxQueueLen {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != '_' && c != '-' && c != '.' && c != ':') {
			return false
		}
	}
	return true
}

// ValidateInsert checks one job before anything is written. Backends call it
// for every item of JobInsertMany; the client calls it earlier to fail fast.
func ValidateInsert(p InsertParams) error {
	if err := ValidateQueue(p.Queue); err != nil {
		return err
	}
	if r := typeProblem(p.Type); r != "" {
		return &InputError{Field: "type", Reason: r}
	}
	if err := validateJSON("payload", p.Payload); err != nil {
		return err
	}
	if p.Priority < MinPriority || p.Priority > MaxPriority {
		return &InputError{Field: "priority", Reason: fmt.Sprintf("%d is outside %d..%d", p.Priority, MinPriority, MaxPriority)}
	}
	if p.MaxAttempts < 1 || p.MaxAttempts > MaxMaxAttempts {
		return &InputError{Field: "max attempts", Reason: fmt.Sprintf("%d is outside 1..%d", p.MaxAttempts, MaxMaxAttempts)}
	}
	if p.Delay < 0 {
		return &InputError{Field: "delay", Reason: fmt.Sprintf("%s is negative", p.Delay)}
	}
	if len(p.UniqueKey) > MaxUniqueKeyLen {
		return &InputError{Field: "unique key", Reason: fmt.Sprintf("longer than %d bytes", MaxUniqueKeyLen)}
	}
	// Each backend would store a NUL or a broken byte its own way (SQLite
	// as is, PostgreSQL not at all), and a key is shown in lists and
	// logs: keys are text, refused alike everywhere.
	if !utf8.ValidString(p.UniqueKey) || !printable(p.UniqueKey) {
		return &InputError{Field: "unique key", Reason: "must be valid UTF-8 without control characters"}
	}
	if err := ValidateKey(p.Key); err != nil {
		return err
	}
	if err := validateConflict(p); err != nil {
		return err
	}
	if err := validateUniqueStates(p); err != nil {
		return err
	}
	if err := validateDeadline(p); err != nil {
		return err
	}
	return ValidateMetadata(p.Metadata)
}

// typeProblem says what is wrong with a job type, "" when nothing is. A
// type is stored as text by every backend and shown on one line of lists
// and logs: 1 to MaxTypeLen bytes of UTF-8 without control characters.
func typeProblem(typ string) string {
	switch {
	case typ == "":
		return "must not be empty"
	case len(typ) > MaxTypeLen:
		return fmt.Sprintf("longer than %d bytes", MaxTypeLen)
	case !utf8.ValidString(typ):
		return "not valid UTF-8"
	case !printable(typ):
		return "contains a control character"
	}
	return ""
}

// validateJSON checks JSON text a backend stores (a payload, a result).
// json.Valid takes any byte inside a string, and SQLite and Redis would
// store it as given, but PostgreSQL refuses text that is not UTF-8: the
// same bytes are refused by every backend, here, before anything is
// written.
func validateJSON(field string, b []byte) error {
	if !json.Valid(b) {
		return &InputError{Field: field, Reason: "not valid JSON"}
	}
	if !utf8.Valid(b) {
		return &InputError{Field: field, Reason: "not valid UTF-8: JSON text is UTF-8 (carry raw bytes as base64)"}
	}
	return nil
}

// ValidateMetadata checks a job's metadata: at most MaxMetadataKeys
// entries whose keys and values add up to at most MaxMetadataBytes; keys of
// 1 to MaxMetadataKeyBytes bytes; keys and values valid UTF-8 without NUL
// (every backend stores them as JSON text).
func ValidateMetadata(m map[string]string) error {
	if len(m) > MaxMetadataKeys {
		return &InputError{Field: "metadata", Reason: fmt.Sprintf("%d keys is over the limit of %d", len(m), MaxMetadataKeys)}
	}
	size := 0
	for k, v := range m {
		switch {
		case k == "":
			return &InputError{Field: "metadata", Reason: "a key is empty"}
		case len(k) > MaxMetadataKeyBytes:
			return &InputError{Field: "metadata", Reason: fmt.Sprintf("key %q… is longer than %d bytes", Shorten(k, 32), MaxMetadataKeyBytes)}
		case !cleanText(k):
			return &InputError{Field: "metadata", Reason: fmt.Sprintf("key %q is not valid UTF-8 or holds a NUL byte", Shorten(k, 32))}
		case !cleanText(v):
			return &InputError{Field: "metadata", Reason: fmt.Sprintf("the value of key %q is not valid UTF-8 or holds a NUL byte", Shorten(k, 32))}
		}
		size += len(k) + len(v)
	}
	if size > MaxMetadataBytes {
		return &InputError{Field: "metadata", Reason: fmt.Sprintf("%d bytes of keys and values is over the limit of %d", size, MaxMetadataBytes)}
	}
	return nil
}

// printable reports whether s holds no control character (NUL, newline,
// escape, DEL, the C1 range): names and keys are shown on one line of a
// list or a log.
func printable(s string) bool {
	for _, r := range s {
		if r < 0x20 || r >= 0x7f && r < 0xa0 {
			return false
		}
	}
	return true
}

// cleanText reports whether s is valid UTF-8 without NUL bytes: text every
// backend can store as is.
func cleanText(s string) bool {
	return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0
}

// Shorten cuts s to at most n bytes on a rune boundary, for echoing user
// input in an error without repeating all of it.
func Shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// MaxErrorBytes is the most an attempt's stored error text holds. A longer
// text keeps its first and last parts (ErrorHeadBytes and the rest) with a
// marker between, so a long panic message and the innermost frames of its
// stack both survive.
const (
	MaxErrorBytes  = 16 << 10
	ErrorHeadBytes = 8 << 10
)

// ErrorText is the one normalisation every attempt's error text gets before
// it is stored: invalid UTF-8 sequences become U+FFFD, NUL bytes become
// U+FFFD too (PostgreSQL text cannot hold them), and a text longer than
// MaxErrorBytes is cut to its head and tail around a marker saying how much
// was left out. Clean text of up to MaxErrorBytes is returned unchanged, so
// applying it twice changes nothing.
func ErrorText(s string) string {
	if len(s) <= MaxErrorBytes && cleanText(s) {
		return s
	}
	if !cleanText(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
		s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	}
	if len(s) <= MaxErrorBytes {
		return s
	}
	marker := fmt.Sprintf("\n… [%d bytes cut] …\n", len(s)-MaxErrorBytes)
	// The marker's own length is taken from the tail, so the result is
	// exactly at most MaxErrorBytes whatever the cut's digits.
	head := Shorten(s, ErrorHeadBytes)
	tailLen := MaxErrorBytes - len(head) - len(marker)
	start := len(s) - tailLen
	for start < len(s) && !utf8.RuneStart(s[start]) {
		start++
	}
	return head + marker + s[start:]
}

// PrepareOutcomes validates a batch of outcomes (see ValidateOutcome) and
// returns it with every error text normalised by ErrorText and every
// worker name by WorkerText. The caller's
// slice is never modified: when a text needs changing, a copy is returned.
// Backends call it first in JobComplete; an error names the outcome's index
// and wraps ErrInvalidInput.
func PrepareOutcomes(outcomes []Outcome) ([]Outcome, error) {
	copied := false
	for i, o := range outcomes {
		if err := ValidateOutcome(o); err != nil {
			return nil, fmt.Errorf("outcome %d (job %d attempt %d): %w", i, o.Ref.ID, o.Ref.Attempt, err)
		}
		t, w := ErrorText(o.Error), WorkerText(o.Worker)
		if t != o.Error || w != o.Worker {
			if !copied {
				outcomes = append([]Outcome(nil), outcomes...)
				copied = true
			}
			outcomes[i].Error, outcomes[i].Worker = t, w
		}
	}
	return outcomes, nil
}

// ValidateFilter checks a failed-jobs filter: OlderThan must not be
// negative.
func ValidateFilter(f FailedFilter) error {
	if f.OlderThan < 0 {
		return &InputError{Field: "older than", Reason: fmt.Sprintf("%s is negative", f.OlderThan)}
	}
	return nil
}

// Cutoff resolves a filter's time bound against the backend's current
// time: the earlier of FailedBefore and now - OlderThan (a job must pass
// both), or zero when the filter has neither.
func (f FailedFilter) Cutoff(now time.Time) time.Time {
	c := f.FailedBefore
	if f.OlderThan > 0 {
		if o := now.Add(-f.OlderThan); c.IsZero() || o.Before(c) {
			c = o
		}
	}
	return c
}

// LeaseExpiredError is the error a lease sweep records on a job whose
// holder vanished: the last error of a job it rescues, the error of one it
// moves to failed jobs. Every backend writes this text, so the failed
// jobs of all of them read alike and the conformance suite can find it.
const LeaseExpiredError = "lease expired"

// ValidateExtendLease checks JobExtendLease's parameters: the lease must be
// positive.
func ValidateExtendLease(p ExtendLeaseParams) error {
	if p.Lease <= 0 {
		return &InputError{Field: "lease", Reason: fmt.Sprintf("%s: must be positive", p.Lease)}
	}
	return nil
}

// ValidateClaim checks claim parameters.
func ValidateClaim(p ClaimParams) error {
	if len(p.Queues) == 0 {
		return &InputError{Field: "queues", Reason: "at least one queue is required"}
	}
	for _, q := range p.Queues {
		if err := ValidateQueue(q); err != nil {
			return err
		}
	}
	if p.Max < 1 {
		return &InputError{Field: "max", Reason: fmt.Sprintf("%d: claim at least 1 job", p.Max)}
	}
	if p.Lease <= 0 {
		return &InputError{Field: "lease", Reason: fmt.Sprintf("%s: must be positive", p.Lease)}
	}
	return nil
}

// ValidateOutcome checks one outcome: a known kind, and a retry delay and
// a duration that are not negative.
func ValidateOutcome(o Outcome) error {
	if o.Result != nil && o.Kind != OutcomeDone {
		return &InputError{Field: "result", Reason: "only a done outcome carries a result"}
	}
	if err := ValidateResult(o.Result); err != nil {
		return err
	}
	if o.Duration < 0 {
		return &InputError{Field: "duration", Reason: fmt.Sprintf("%s is negative", o.Duration)}
	}
	switch o.Kind {
	case OutcomeDone, OutcomeFail:
	case OutcomeRetry, OutcomeDefer:
		if o.RetryDelay < 0 {
			return &InputError{Field: "retry delay", Reason: fmt.Sprintf("%s is negative", o.RetryDelay)}
		}
	default:
		return &InputError{Field: "outcome kind", Reason: fmt.Sprintf("%d is not done, retry, fail or defer", o.Kind)}
	}
	return nil
}

// ValidatePurge checks purge parameters: KeepNewest must not be negative
// nor combined with IDs.
func ValidatePurge(p FailedPurgeParams) error {
	switch {
	case p.KeepNewest < 0:
		return &InputError{Field: "keep newest", Reason: fmt.Sprintf("%d is negative", p.KeepNewest)}
	case p.KeepNewest > 0 && len(p.IDs) > 0:
		return &InputError{Field: "keep newest", Reason: "cannot be combined with IDs"}
	}
	return nil
}

// The page sizes the contract gives a zero Limit.
const (
	DefaultFailedListLimit = 100  // FailedListParams.Limit
	DefaultSweepLimit      = 1000 // SweepParams.Limit
	DefaultListLimit       = 100  // FinishedListParams.Limit, JobListParams.Limit
)

// PageLimit resolves a Limit field: zero means def, negative is refused.
func PageLimit(limit, def int) (int, error) {
	switch {
	case limit < 0:
		return 0, &InputError{Field: "limit", Reason: fmt.Sprintf("%d is negative", limit)}
	case limit == 0:
		return def, nil
	}
	return limit, nil
}

// AvailableAt resolves when an inserted job becomes due, given the backend's
// current time.
func (p InsertParams) AvailableAt(now time.Time) time.Time {
	if !p.RunAt.IsZero() {
		return p.RunAt
	}
	return now.Add(p.Delay)
}
