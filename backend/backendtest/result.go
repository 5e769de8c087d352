package backendtest

import (
	"slices"
	"strings"
	"testing"

	"github.com/jobq/jobq/backend"
)

// testResults: a done outcome with Keep stores its Result with the kept
// job, in the completion's own step and behind its fence, and a read that
// asks for results returns it (a list that does not, none); without Keep nothing is stored; a stale holder's
// completion stores no result; only the successful attempt's result is
// ever stored; a task's kept job has its result as its task has; a
// result of MaxResultBytes, the hard limit, is stored
// whole. Backends without backend.Retainer skip it.
func testResults(t *testing.T, h Harness) {
	parallel(t, h, "ResultKept", func(t *testing.T, b backend.Backend) {
		r := retainer(t, b)
		id := insertOne(t, b, job("r", "t"))
		o := keepDone(claimOne(t, b, "r").Ref())
		o.Result = []byte(`{"thumbnail":"s3://b/1.png","bytes":2048}`)
		completeFresh(t, b, o)
		gone(t, b, id)
		f := wantFinished(t, r, backend.StateCompleted, id)
		if !jsonEqual(f.Result, o.Result) {
			t.Fatalf("kept job's Result = %q, want %q", f.Result, o.Result)
		}
		// A list that does not ask for results carries none.
		if fs := finishedList(t, r, backend.FinishedListParams{State: backend.StateCompleted}); len(fs) != 1 || fs[0].ID != id || fs[0].Result != nil {
			t.Fatalf("completed list without Results = %+v, want job %d with no result", fs, id)
		}
		// Kept without a result: none is read back.
		bare := insertOne(t, b, job("r", "t"))
		completeFresh(t, b, keepDone(claimOne(t, b, "r").Ref()))
		if f := wantFinished(t, r, backend.StateCompleted, bare); f.Result != nil {
			t.Fatalf("job %d kept without a result has Result %q, want nil", bare, f.Result)
		}
	})

	parallel(t, h, "ResultNotKept", func(t *testing.T, b backend.Backend) {
		r := retainer(t, b)
		id := insertOne(t, b, job("r", "t"))
		o := done(claimOne(t, b, "r").Ref())
		o.Result = []byte(`"dropped"`)
		completeFresh(t, b, o)
		gone(t, b, id)
		if fs := finishedList(t, r, backend.FinishedListParams{State: backend.StateCompleted}); len(fs) != 0 {
			t.Fatalf("a completion without Keep left %d completed jobs (first %+v), want none", len(fs), fs[0])
		}
	})

	parallel(t, h, "ResultStaleRefused", func(t *testing.T, b backend.Backend) {
		r := retainer(t, b)
		id, old, cur := rescuedClaim(t, b, "r")
		stale := keepDone(old)
		stale.Result = []byte(`"from the stale holder"`)
		if res := complete(t, b, stale); !slices.Equal(res.Stale, []backend.JobRef{old}) {
			t.Fatalf("kept completion with the stale ref %+v = %+v, want it stale", old, res)
		}
		if fs := finishedList(t, r, backend.FinishedListParams{State: backend.StateCompleted}); len(fs) != 0 {
			t.Fatalf("the stale completion kept %d jobs (first %+v), want none", len(fs), fs[0])
		}
		wantStatus(t, b, id, backend.StateReserved, 2)
		fresh := keepDone(cur.Ref())
		fresh.Result = []byte(`"from the holder"`)
		completeFresh(t, b, fresh)
		if f := wantFinished(t, r, backend.StateCompleted, id); !jsonEqual(f.Result, fresh.Result) {
			t.Fatalf("Result = %q, want the current holder's %q", f.Result, fresh.Result)
		}
	})

	parallel(t, h, "ResultOnlyOfSuccess", func(t *testing.T, b backend.Backend) {
		r := retainer(t, b)
		id := insertOne(t, b, job("r", "t"))
		first := claimOne(t, b, "r")
		// A retry carries no result: a backend refuses one as input,
		// so a failed attempt's result can never be stored.
		bad := retry(first.Ref(), 0, "try again")
		bad.Result = []byte(`"from the failed attempt"`)
		_, err := b.JobComplete(t.Context(), backend.CompleteParams{Outcomes: []backend.Outcome{bad}})
		wantInvalid(t, err, "result")
		completeFresh(t, b, retry(first.Ref(), 0, "try again"))
		second := claimOne(t, b, "r")
		o := keepDone(second.Ref())
		o.Result = []byte(`[2]`)
		completeFresh(t, b, o)
		f := wantFinished(t, r, backend.StateCompleted, id)
		if f.Attempts != 2 || !jsonEqual(f.Result, o.Result) {
			t.Fatalf("completed job: attempts %d Result %q, want 2 and the second attempt's %q", f.Attempts, f.Result, o.Result)
		}
	})

	// A task's kept job shows its result too, the one its dependants
	// read from its task.
	parallel(t, h, "ResultOfTaskKept", func(t *testing.T, b backend.Backend) {
		r := retainer(t, b)
		w := workflower(t, b)
		id := wfInsert(t, w, task("a"), task("b", "a"))
		a := wantClaimed(t, b, "a")["a"]
		o := keepDone(a.Ref())
		o.Result = []byte(`{"rows":7}`)
		completeFresh(t, b, o)
		if f := wantFinished(t, r, backend.StateCompleted, a.ID); !jsonEqual(f.Result, o.Result) {
			t.Fatalf("task a's kept job Result = %q, want %q", f.Result, o.Result)
		}
		if got := taskNamed(t, wfGet(t, w, id), "a"); !jsonEqual(got.Result, o.Result) {
			t.Fatalf("task a's Result = %q, want %q", got.Result, o.Result)
		}
	})

	parallel(t, h, "ResultHardLimit", func(t *testing.T, b backend.Backend) {
		r := retainer(t, b)
		id := insertOne(t, b, job("r", "t"))
		o := keepDone(claimOne(t, b, "r").Ref())
		o.Result = []byte(`"` + strings.Repeat("x", backend.MaxResultBytes-2) + `"`)
		completeFresh(t, b, o)
		if f := wantFinished(t, r, backend.StateCompleted, id); len(f.Result) != backend.MaxResultBytes || !jsonEqual(f.Result, o.Result) {
			t.Fatalf("a result of MaxResultBytes read back as %d bytes, want %d", len(f.Result), backend.MaxResultBytes)
		}
		next := insertOne(t, b, job("r", "t"))
		over := keepDone(claimOne(t, b, "r").Ref())
		over.Result = []byte(`"` + strings.Repeat("x", backend.MaxResultBytes-1) + `"`)
		_, err := b.JobComplete(t.Context(), backend.CompleteParams{Outcomes: []backend.Outcome{over}})
		wantInvalid(t, err, "result")
		wantStatus(t, b, next, backend.StateReserved, 1) // refused whole: still held
	})
}
