package backendtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// skew is how far the backend's clock may be from the test's time.Now (a
// database server's clock, storage rounding, a slow shared machine).
const skew = 5 * time.Second

// waitLimit bounds every poll for something the backend must do by itself
// (a short delay becoming due, a short lease expiring, a notification).
// It is a failure deadline, not a bound on how soon that happens, so it is
// generous: it was 5s, which -race, -cpu 1 and a CPU hog can stretch such
// millisecond events past (issue 27).
const waitLimit = time.Minute

// shortLease is a lease that expires almost at once, for sweep tests.
const shortLease = 50 * time.Millisecond

// longLease is a lease that never expires during a test.
const longLease = time.Hour

// job returns valid insert params for queue and type with a small payload.
func job(queue, typ string) backend.InsertParams {
	return backend.InsertParams{
		Queue:       queue,
		Type:        typ,
		Payload:     []byte(`{"n":1}`),
		MaxAttempts: 3,
	}
}

// insert inserts ps in one call and returns the results.
func insert(t *testing.T, b backend.Backend, ps ...backend.InsertParams) []backend.InsertResult {
	t.Helper()
	res, err := b.JobInsertMany(t.Context(), ps)
	if err != nil {
		t.Fatalf("JobInsertMany: %v", err)
	}
	if len(res) != len(ps) {
		t.Fatalf("JobInsertMany returned %d results for %d jobs", len(res), len(ps))
	}
	return res
}

// insertIDs inserts ps, none of which may be a duplicate, and returns their IDs.
func insertIDs(t *testing.T, b backend.Backend, ps ...backend.InsertParams) []int64 {
	t.Helper()
	res := insert(t, b, ps...)
	ids := make([]int64, len(res))
	for i, r := range res {
		if r.Duplicate {
			t.Fatalf("JobInsertMany item %d: unexpected Duplicate (ID %d)", i, r.ID)
		}
		ids[i] = r.ID
	}
	return ids
}

// insertOne inserts p and returns its ID.
func insertOne(t *testing.T, b backend.Backend, p backend.InsertParams) int64 {
	t.Helper()
	return insertIDs(t, b, p)[0]
}

// claim claims up to max jobs from queues with lease.
func claim(t *testing.T, b backend.Backend, max int, lease time.Duration, queues ...string) []*backend.JobRow {
	t.Helper()
	rows, err := b.JobClaim(t.Context(), backend.ClaimParams{Queues: queues, Max: max, Lease: lease})
	if err != nil {
		t.Fatalf("JobClaim(%v, max %d): %v", queues, max, err)
	}
	if len(rows) > max {
		t.Fatalf("JobClaim(%v, max %d) returned %d rows", queues, max, len(rows))
	}
	return rows
}

// claimOne claims exactly one job from queue with a long lease.
func claimOne(t *testing.T, b backend.Backend, queue string) *backend.JobRow {
	t.Helper()
	rows := claim(t, b, 1, longLease, queue)
	if len(rows) != 1 {
		t.Fatalf("JobClaim(%s): got %d jobs, want 1", queue, len(rows))
	}
	return rows[0]
}

// claimNone asserts that nothing in queues is claimable now.
func claimNone(t *testing.T, b backend.Backend, queues ...string) {
	t.Helper()
	if rows := claim(t, b, 100, longLease, queues...); len(rows) != 0 {
		t.Fatalf("JobClaim(%v): got %d jobs (first ID %d), want none", queues, len(rows), rows[0].ID)
	}
}

// complete applies outcomes and returns the result.
func complete(t *testing.T, b backend.Backend, outcomes ...backend.Outcome) backend.CompleteResult {
	t.Helper()
	res, err := b.JobComplete(t.Context(), backend.CompleteParams{Outcomes: outcomes})
	if err != nil {
		t.Fatalf("JobComplete: %v", err)
	}
	return res
}

// completeFresh applies outcomes and asserts none was stale.
func completeFresh(t *testing.T, b backend.Backend, outcomes ...backend.Outcome) {
	t.Helper()
	if res := complete(t, b, outcomes...); len(res.Stale) != 0 {
		t.Fatalf("JobComplete: Stale = %v, want none", res.Stale)
	}
}

func done(ref backend.JobRef) backend.Outcome {
	return backend.Outcome{Ref: ref, Kind: backend.OutcomeDone}
}

func retry(ref backend.JobRef, delay time.Duration, msg string) backend.Outcome {
	return backend.Outcome{Ref: ref, Kind: backend.OutcomeRetry, RetryDelay: delay, Error: msg}
}

// deferred is the outcome of a holder that could not start the job: it
// carries an error text, which the backend must ignore.
func deferred(ref backend.JobRef, delay time.Duration) backend.Outcome {
	return backend.Outcome{Ref: ref, Kind: backend.OutcomeDefer, RetryDelay: delay, Error: "no handler registered for type t"}
}

func fail(ref backend.JobRef, msg string) backend.Outcome {
	return backend.Outcome{Ref: ref, Kind: backend.OutcomeFail, Error: msg}
}

// get returns the live job id.
func get(t *testing.T, b backend.Backend, id int64) *backend.JobRow {
	t.Helper()
	row, err := b.JobGet(t.Context(), id)
	if err != nil {
		t.Fatalf("JobGet(%d): %v", id, err)
	}
	if row.ID != id {
		t.Fatalf("JobGet(%d) returned job %d", id, row.ID)
	}
	return row
}

// gone asserts that job id is not live.
func gone(t *testing.T, b backend.Backend, id int64) {
	t.Helper()
	row, err := b.JobGet(t.Context(), id)
	if !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("JobGet(%d) = %+v, %v; want ErrNotFound", id, row, err)
	}
}

// wantStatus asserts the live job's status and attempts.
func wantStatus(t *testing.T, b backend.Backend, id int64, status backend.JobState, attempts int) *backend.JobRow {
	t.Helper()
	row := get(t, b, id)
	if row.Status != status || row.Attempts != attempts {
		t.Fatalf("job %d: status %q attempts %d, want %q attempts %d", id, row.Status, row.Attempts, status, attempts)
	}
	return row
}

// wantPendingNow asserts that job id is pending, due now, with no lease.
func wantPendingNow(t *testing.T, b backend.Backend, id int64, attempts int) *backend.JobRow {
	t.Helper()
	row := wantStatus(t, b, id, backend.StatePending, attempts)
	if !row.ReservedAt.IsZero() || !row.LeaseUntil.IsZero() {
		t.Errorf("pending job %d: ReservedAt %v LeaseUntil %v, want both zero", id, row.ReservedAt, row.LeaseUntil)
	}
	if row.AvailableAt.After(time.Now().Add(skew)) {
		t.Errorf("pending job %d: AvailableAt %v is in the future, want now", id, row.AvailableAt)
	}
	return row
}

// stats returns QueueStats.
// stats returns the counts of QueueStats, with OldestDue cleared so
// tests compare counts alone (the Stats area checks OldestDue).
func stats(t *testing.T, b backend.Backend) []backend.QueueStats {
	t.Helper()
	s, err := b.QueueStats(t.Context())
	if err != nil {
		t.Fatalf("QueueStats: %v", err)
	}
	for i := range s {
		s[i].OldestDue = time.Time{}
	}
	return s
}

// statsOf returns the stats of one queue; zero when the queue is omitted.
func statsOf(t *testing.T, b backend.Backend, queue string) backend.QueueStats {
	t.Helper()
	for _, s := range stats(t, b) {
		if s.Queue == queue {
			return s
		}
	}
	return backend.QueueStats{Queue: queue}
}

// wantStats asserts the counts of one queue.
func wantStats(t *testing.T, b backend.Backend, want backend.QueueStats) {
	t.Helper()
	if got := statsOf(t, b, want.Queue); got != want {
		t.Fatalf("QueueStats[%s] = %+v, want %+v", want.Queue, got, want)
	}
}

// wantNoStats asserts that QueueStats is empty.
func wantNoStats(t *testing.T, b backend.Backend) {
	t.Helper()
	if s := stats(t, b); len(s) != 0 {
		t.Fatalf("QueueStats = %+v, want none", s)
	}
}

// failedList lists failed jobs.
func failedList(t *testing.T, b backend.Backend, p backend.FailedListParams) []*backend.FailedJob {
	t.Helper()
	rows, err := b.FailedList(t.Context(), p)
	if err != nil {
		t.Fatalf("FailedList(%+v): %v", p, err)
	}
	return rows
}

// failedByJob returns the failed row of job id: the only one FailedList
// shows for it, and the one FailedGet(jobID) returns.
func failedByJob(t *testing.T, b backend.Backend, jobID int64) *backend.FailedJob {
	t.Helper()
	var found *backend.FailedJob
	for _, f := range failedList(t, b, backend.FailedListParams{Limit: 1000}) {
		if f.JobID == jobID {
			if found != nil {
				t.Fatalf("job %d is in failed_jobs twice (%d and %d)", jobID, found.ID, f.ID)
			}
			found = f
		}
	}
	if found == nil {
		t.Fatalf("job %d is not in failed_jobs", jobID)
	}
	if g, err := b.FailedGet(t.Context(), jobID); err != nil || g.ID != found.ID || g.JobID != jobID {
		t.Fatalf("FailedGet(job %d) = %+v, %v; want the failed row FailedList shows, %+v", jobID, g, err, found)
	}
	return found
}

// makeFailed inserts each job, claims it and fails it, one at a time, so the
// failed rows are created in the order of ps. It returns them in that order.
func makeFailed(t *testing.T, b backend.Backend, ps ...backend.InsertParams) []*backend.FailedJob {
	t.Helper()
	out := make([]*backend.FailedJob, 0, len(ps))
	for _, p := range ps {
		out = append(out, failJob(t, b, p.Queue, insertOne(t, b, p)))
	}
	return out
}

// failJob claims the pending job id of queue (giving back the others the
// claim took) and fails it, and returns its failed row.
func failJob(t *testing.T, b backend.Backend, queue string, id int64) *backend.FailedJob {
	t.Helper()
	var held *backend.JobRow
	var others []backend.JobRef
	for _, r := range claim(t, b, 1000, longLease, queue) {
		if r.ID == id {
			held = r
		} else {
			others = append(others, r.Ref())
		}
	}
	if len(others) > 0 {
		if _, err := b.JobRelease(t.Context(), others); err != nil {
			t.Fatalf("JobRelease: %v", err)
		}
	}
	if held == nil {
		t.Fatalf("failJob: job %d was not claimable", id)
	}
	completeFresh(t, b, fail(held.Ref(), "boom"))
	return failedByJob(t, b, id)
}

// eventually polls cond until it is true or within passes, then fails the
// test naming what it waited for.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// near asserts |got - want| <= tol.
func near(t *testing.T, what string, got, want time.Time, tol time.Duration) {
	t.Helper()
	if got.IsZero() {
		t.Errorf("%s is zero, want about %v", what, want)
		return
	}
	if d := got.Sub(want); d > tol || d < -tol {
		t.Errorf("%s = %v, want %v ± %s (off by %s)", what, got, want, tol, d)
	}
}

// jsonEqual reports whether a and b hold the same JSON value (a database may
// reformat the text).
func jsonEqual(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}

// ids returns the IDs of rows.
func ids(rows []*backend.JobRow) []int64 {
	out := make([]int64, len(rows))
	for i, r := range rows {
		out[i] = r.ID
	}
	return out
}

// sortedIDs returns the IDs of rows in ascending order.
func sortedIDs(rows []*backend.JobRow) []int64 {
	out := ids(rows)
	slices.Sort(out)
	return out
}

// failedIDs returns the failed_jobs IDs of rows.
func failedIDs(rows []*backend.FailedJob) []int64 {
	out := make([]int64, len(rows))
	for i, r := range rows {
		out[i] = r.ID
	}
	return out
}

// wantInvalid asserts err wraps ErrInvalidInput through an *InputError for
// field (any field when field is empty).
func wantInvalid(t *testing.T, err error, field string) {
	t.Helper()
	if !errors.Is(err, backend.ErrInvalidInput) {
		t.Fatalf("error = %v, want one wrapping ErrInvalidInput", err)
	}
	var ie *backend.InputError
	if !errors.As(err, &ie) {
		t.Fatalf("error %v is not an *backend.InputError", err)
	}
	if field != "" && ie.Field != field {
		t.Fatalf("InputError.Field = %q, want %q (error: %v)", ie.Field, field, err)
	}
}

// sameReplay reports whether a replay's counts are want's; ByType is
// checked by the tests that care about it.
func sameReplay(got, want backend.ReplayResult) bool {
	return got.Replayed == want.Replayed && got.Skipped == want.Skipped
}
