package backendtest

import (
	"context"
	"errors"
	"testing"

	"github.com/jobq/jobq/backend"
)

// InlineBackend is a backend that runs jobs inside JobInsertMany instead of
// storing them (the sync backend).
type InlineBackend interface {
	backend.Backend
	backend.Inline
}

// RunInline runs the parts of the suite that apply to a backend that stores
// nothing: bad input refused with nothing run, each job run once with its
// fields, the runner's error returned, nothing left to inspect, and Close.
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
