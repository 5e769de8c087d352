package jobq_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
)

// finishedJob waits until job id is kept as completed and returns it.
func finishedJob(t *testing.T, in *jobq.Inspector, id int64) *jobq.FinishedJob {
	t.Helper()
	var info jobq.JobInfo
	eventually(t, settle, "the job to complete", func() bool {
		var err error
		info, err = in.Job(context.Background(), id)
		if err != nil && !errors.Is(err, jobq.ErrNotFound) {
			t.Fatalf("Inspector.Job(%d): %v", id, err)
		}
		return err == nil && info.State == jobq.StateCompleted
	})
	return info.Finished
}

// TestResultOfPlainJob, on memory and every durable backend: a plain
// job's SetResult is kept with its completed job when the worker keeps
// completed jobs, read back by Inspector.Job; a retried attempt's result
// is dropped for the successful one's; a job whose successful attempt
// recorded none has none.
func TestResultOfPlainJob(t *testing.T) {
	t.Parallel()
	for _, st := range everyStore {
		t.Run(st.Name, func(t *testing.T) {
			t.Parallel()
			b, err := backend.Open(context.Background(), st.URL(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { b.Close() })
			reg := jobq.NewRegistry()
			reg.HandleFunc("res.plain", func(ctx context.Context, j *jobq.Job) error {
				return jobq.SetResult(ctx, map[string]any{"thumbnail": "s3://b/1.png", "job": j.ID})
			})
			reg.HandleFunc("res.flaky", func(ctx context.Context, j *jobq.Job) error {
				if err := jobq.SetResult(ctx, "attempt "+string(rune('0'+j.Attempt))); err != nil {
					return jobq.Permanent(err)
				}
				if j.Attempt == 1 {
					return errors.New("try again")
				}
				return nil
			})
			reg.HandleFunc("res.forgets", func(ctx context.Context, j *jobq.Job) error {
				if j.Attempt == 1 {
					_ = jobq.SetResult(ctx, "from the failed attempt")
					return errors.New("try again")
				}
				return nil
			})
			c := mustClient(t, b, jobq.ClientConfig{})
			ctx := context.Background()
			plain, err := c.Enqueue(ctx, "res.plain", nil)
			if err != nil {
				t.Fatal(err)
			}
			flaky, err := c.Enqueue(ctx, "res.flaky", nil, jobq.MaxAttempts(2))
			if err != nil {
				t.Fatal(err)
			}
			forgets, err := c.Enqueue(ctx, "res.forgets", nil, jobq.MaxAttempts(2))
			if err != nil {
				t.Fatal(err)
			}
			cfg := fastConfig()
			cfg.Retention.Completed = time.Hour
			startWorker(t, b, reg, cfg)
			in := jobq.NewInspector(b)

			f := finishedJob(t, in, plain)
			var got struct {
				Thumbnail string `json:"thumbnail"`
				Job       int64  `json:"job"`
			}
			if err := json.Unmarshal(f.Result, &got); err != nil || got.Thumbnail != "s3://b/1.png" || got.Job != plain {
				t.Fatalf("job %d Result = %s (%v), want its thumbnail and ID", plain, f.Result, err)
			}
			if f := finishedJob(t, in, flaky); string(f.Result) != `"attempt 2"` || f.Attempts != 2 {
				t.Fatalf("flaky job: attempts %d Result %s, want 2 and only the second attempt's", f.Attempts, f.Result)
			}
			if f := finishedJob(t, in, forgets); f.Result != nil || f.Attempts != 2 {
				t.Fatalf("job whose failed attempt set a result: attempts %d Result %s, want 2 and none", f.Attempts, f.Result)
			}
		})
	}
}

// TestResultNotKeptWithoutRetention: without Retention.Completed the
// completed job is deleted at once, so its result is nowhere.
func TestResultNotKeptWithoutRetention(t *testing.T) {
	t.Parallel()
	b := newMemory(t, nil)
	reg := jobq.NewRegistry()
	ran := make(chan error, 1)
	reg.HandleFunc("res.plain", func(ctx context.Context, j *jobq.Job) error {
		err := jobq.SetResult(ctx, 42)
		ran <- err
		return err
	})
	id, err := mustClient(t, b, jobq.ClientConfig{}).Enqueue(context.Background(), "res.plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	startWorker(t, b, reg, fastConfig())
	if err := <-ran; err != nil {
		t.Fatalf("SetResult: %v, want it accepted", err)
	}
	eventually(t, settle, "the job to be deleted", func() bool { return jobGone(b, id) })
	if info, err := jobq.NewInspector(b).Job(context.Background(), id); !errors.Is(err, jobq.ErrNotFound) {
		t.Fatalf("Inspector.Job(%d) = %+v, %v; want ErrNotFound", id, info, err)
	}
}

// TestResultCap: SetResult refuses a result over the worker's
// MaxResultBytes with an error wrapping ErrInvalidInput, takes one at the
// cap, and a worker refuses a cap over the hard limit.
func TestResultCap(t *testing.T) {
	t.Parallel()
	const limit = 32
	b := newMemory(t, nil)
	reg := jobq.NewRegistry()
	refused := make(chan error, 1)
	reg.HandleFunc("res.big", func(ctx context.Context, j *jobq.Job) error {
		err := jobq.SetResult(ctx, strings.Repeat("x", limit-1)) // limit+1 bytes of JSON
		refused <- err
		return jobq.SetResult(ctx, strings.Repeat("y", limit-2)) // exactly limit
	})
	id, err := mustClient(t, b, jobq.ClientConfig{}).Enqueue(context.Background(), "res.big", nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := fastConfig()
	cfg.Retention.Completed = time.Hour
	cfg.MaxResultBytes = limit
	startWorker(t, b, reg, cfg)
	err = <-refused
	if !errors.Is(err, jobq.ErrInvalidInput) || !strings.Contains(err.Error(), "at most 32 bytes") {
		t.Fatalf("SetResult of %d bytes with a cap of %d: %v, want ErrInvalidInput naming the cap", limit+1, limit, err)
	}
	if f := finishedJob(t, jobq.NewInspector(b), id); string(f.Result) != `"`+strings.Repeat("y", limit-2)+`"` {
		t.Fatalf("Result = %s, want the %d-byte one", f.Result, limit)
	}
	for _, bad := range []int{-1, jobq.MaxResultBytes + 1} {
		cfg := fastConfig()
		cfg.MaxResultBytes = bad
		if _, err := jobq.NewWorker(b, reg, cfg); !errors.Is(err, jobq.ErrInvalidInput) || !strings.Contains(err.Error(), "MaxResultBytes") {
			t.Fatalf("NewWorker with MaxResultBytes %d: %v, want ErrInvalidInput naming it", bad, err)
		}
	}
}
