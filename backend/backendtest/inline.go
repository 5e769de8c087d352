package backendtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// InlineBackend is a backend that runs jobs inside JobInsertMany instead of
// storing them (the sync backend).
type InlineBackend interface {
	backend.Backend
	backend.Inline
}

// RunInline runs the parts of the suite that apply to a backend that stores
// nothing: bad input (metadata included) refused with nothing run, each job
// run once with its fields and its own copy of its metadata, malformed
// outcomes and filters refused, the runner's error returned, nothing left
// to inspect, and Close.
func RunInline(t *testing.T, newBackend func(t *testing.T) InlineBackend) {
	t.Helper()
	fresh := func(t *testing.T) (InlineBackend, *[]*backend.JobRow) {
		b := newBackend(t)
		t.Cleanup(func() { b.Close() })
		var ran []*backend.JobRow
		b.SetRunner(func(ctx context.Context, j *backend.JobRow) error {
			ran = append(ran, j)
			if j.Type == "fails" {
				return errors.New("handler failed")
			}
			return nil
		})
		return b, &ran
	}
	t.Run("BadInputRunsNothing", func(t *testing.T) {
		b, ran := fresh(t)
		bad := job("q", "")
		_, err := b.JobInsertMany(t.Context(), []backend.InsertParams{job("q", "ok"), bad})
		wantInvalid(t, err, "type")
		if len(*ran) != 0 {
			t.Fatalf("a batch with a bad job ran %d jobs", len(*ran))
		}
	})
	t.Run("RunsEachJobWithItsFields", func(t *testing.T) {
		b, ran := fresh(t)
		p := job("mail", "send")
		p.Payload, p.Priority, p.MaxAttempts = []byte(`{"to":"a"}`), 7, 4
		res, err := b.JobInsertMany(t.Context(), []backend.InsertParams{p, job("mail", "send")})
		if err != nil || len(res) != 2 || len(*ran) != 2 {
			t.Fatalf("insert = %v, %v after %d runs; want 2 results and 2 runs", res, err, len(*ran))
		}
		j := (*ran)[0]
		if j.ID != res[0].ID || j.Queue != "mail" || j.Type != "send" || !jsonEqual(j.Payload, p.Payload) || j.Priority != 7 || j.MaxAttempts != 4 || j.Attempts != 1 {
			t.Fatalf("runner saw %+v, want the inserted job on its first attempt", j)
		}
	})
	t.Run("BadMetadataRunsNothing", func(t *testing.T) {
		b, ran := fresh(t)
		_, err := b.JobInsertMany(t.Context(), []backend.InsertParams{job("q", "ok"), withMetadata("q", "ok", map[string]string{"k": "a\x00b"})})
		wantInvalid(t, err, "metadata")
		if len(*ran) != 0 {
			t.Fatalf("a batch with bad metadata ran %d jobs", len(*ran))
		}
	})
	t.Run("RunnerSeesMetadata", func(t *testing.T) {
		b, ran := fresh(t)
		md := traced()
		insert(t, b, withMetadata("q", "ok", md), withMetadata("q", "ok", map[string]string{}), job("q", "ok"))
		if len(*ran) != 3 {
			t.Fatalf("ran %d jobs, want 3", len(*ran))
		}
		wantMetadata(t, "runner's job", (*ran)[0].Metadata, traced())
		wantMetadata(t, "runner's job with an empty map", (*ran)[1].Metadata, nil)
		wantMetadata(t, "runner's job without metadata", (*ran)[2].Metadata, nil)
		// The handler's copy is its own.
		(*ran)[0].Metadata["tenant"] = "changed by the handler"
		wantMetadata(t, "the caller's map after the run", md, traced())
	})
	t.Run("RefusesInvalidParams", func(t *testing.T) {
		b, _ := fresh(t)
		_, err := b.JobComplete(t.Context(), backend.CompleteParams{Outcomes: []backend.Outcome{
			{Ref: backend.JobRef{ID: 1, Attempt: 1}, Kind: backend.OutcomeRetry, RetryDelay: -time.Second},
		}})
		wantInvalid(t, err, "retry delay")
		neg := backend.FailedFilter{OlderThan: -time.Hour}
		_, err = b.FailedList(t.Context(), backend.FailedListParams{Filter: neg})
		wantInvalid(t, err, "older than")
		_, err = b.FailedReplay(t.Context(), backend.FailedReplayParams{Filter: neg})
		wantInvalid(t, err, "older than")
		_, err = b.FailedPurge(t.Context(), backend.FailedPurgeParams{Filter: neg})
		wantInvalid(t, err, "older than")
		_, err = b.FailedPurge(t.Context(), backend.FailedPurgeParams{KeepNewest: -1})
		wantInvalid(t, err, "keep newest")
	})
	t.Run("ReturnsTheRunnersError", func(t *testing.T) {
		b, ran := fresh(t)
		_, err := b.JobInsertMany(t.Context(), []backend.InsertParams{job("q", "fails"), job("q", "never")})
		if err == nil || len(*ran) != 1 {
			t.Fatalf("err = %v after %d runs; want the handler's error and the batch stopped there", err, len(*ran))
		}
	})
	t.Run("NothingToInspect", func(t *testing.T) {
		b, _ := fresh(t)
		insert(t, b, job("q", "ok"))
		wantNoStats(t, b)
		if f := failedList(t, b, backend.FailedListParams{}); len(f) != 0 {
			t.Fatalf("failed jobs %v", f)
		}
		claimNone(t, b, "q")
	})
	t.Run("Closed", func(t *testing.T) {
		b, _ := fresh(t)
		b.Close()
		if _, err := b.JobInsertMany(t.Context(), []backend.InsertParams{job("q", "ok")}); !errors.Is(err, backend.ErrClosed) {
			t.Fatalf("insert after Close: %v, want ErrClosed", err)
		}
	})
}
