package verify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	_ "github.com/jobq/jobq/backend/all" // every scheme a user's --db may name
	"github.com/jobq/jobq/backend/memory"
	"github.com/jobq/jobq/backend/sqlite"
	"github.com/jobq/jobq/internal/ticker"
)

// WorkerEnv is the environment variable through which Run hands a worker
// process its WorkerSpec (as JSON). It travels in the environment rather
// than on the command line, where any user of the machine could read the
// database password.
const WorkerEnv = "JOBQ_VERIFY_WORKER"

// WorkerSpec is what one verification worker needs: Run fills it in for
// each worker process it starts.
type WorkerSpec struct {
	// DB is the backend URL, through the fault proxy when proxy faults
	// are on.
	DB string `json:"db"`
	// Queue is the run's own queue; Run is the run's ID, in every payload.
	// Queues, when set, are the run's queues instead (the keyed
	// workload's, one per set of key rules).
	Queue  string   `json:"queue"`
	Queues []string `json:"queues,omitempty"`
	Run    string   `json:"run"`
	// Proc names the worker in the history ("w2.5": slot 2, its 6th
	// process); History is the path of its history file, which must not
	// exist yet.
	Proc    string `json:"proc"`
	History string `json:"history"`
	// Concurrency, Lease, Sweep and Poll configure the jobq.Worker
	// (HeartbeatInterval is Lease/3).
	Concurrency int           `json:"concurrency"`
	Lease       time.Duration `json:"lease"`
	Sweep       time.Duration `json:"sweep"`
	Poll        time.Duration `json:"poll"`
	// Skew shifts every wall-clock reading of the worker: its history's
	// wall times and, on SQLite, the backend's clock (leases, due times).
	Skew time.Duration `json:"skew,omitempty"`
	// Deadlines: the run is the deadline workload, so every claim line
	// also records when the claim call began and, for a job with a
	// deadline, the deadline and reserved time the claimed row carries.
	Deadlines bool `json:"deadlines,omitempty"`
}

// IsWorker reports whether this process was started by Run as one of its
// workers (WorkerEnv is set); a program that runs verify calls WorkerMain
// then, instead of what it usually does.
func IsWorker() bool { return os.Getenv(WorkerEnv) != "" }

// WorkerMain runs the worker that Run started this process to be: it
// reads the WorkerSpec from WorkerEnv and runs RunWorker until ctx ends
// (cancel it on SIGTERM: that is how Run stops its workers) or until its
// standard input reaches end of file, which happens when the verifier is
// gone. `jobq verify` starts its own executable's hidden `verify worker`
// command, which calls it; a program of its own calls it first thing in
// main when IsWorker is true, and names itself in Config.WorkerCommand.
func WorkerMain(ctx context.Context) error {
	raw := os.Getenv(WorkerEnv)
	if raw == "" {
		return fmt.Errorf("verify worker: %s is not set: this process was not started by verify.Run", WorkerEnv)
	}
	var spec WorkerSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		return fmt.Errorf("verify worker: read %s: %w", WorkerEnv, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The lifeline: the verifier holds the other end of stdin. Its
	// goroutine ends with the process, which is what it watches for.
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	return RunWorker(ctx, spec, log)
}

// RunWorker runs one verification worker until ctx ends, then stops it
// gracefully: a jobq.Worker on spec.Queue whose handler records every
// attempt's start and end, and whose hooks and backend record every claim
// and what became of every outcome, in the history file spec.History.
// log receives the worker's own logs (nil discards them).
func RunWorker(ctx context.Context, spec WorkerSpec, log *slog.Logger) error {
	b, err := openPatiently(ctx, spec)
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped before it could start: nothing to record
		}
		return fmt.Errorf("verify worker %s: %w", spec.Proc, err)
	}
	defer b.Close()
	h, err := createHistory(spec.History, spec.Proc, spec.Skew)
	if err != nil {
		return fmt.Errorf("verify worker %s: %w", spec.Proc, err)
	}
	err = work(ctx, b, spec, h, log)
	return errors.Join(err, h.Close())
}

// openPatiently opens spec.DB, trying again while the backend is
// unavailable: a worker restarted while the broker is down or the proxy
// blackholes its connections waits for them, as a deployed worker would.
func openPatiently(ctx context.Context, spec WorkerSpec) (backend.Backend, error) {
	backoff := 100 * time.Millisecond
	for {
		b, err := openWorkerBackend(ctx, spec)
		if err == nil || !errors.Is(err, backend.ErrUnavailable) {
			return b, err
		}
		if !ticker.Sleep(ctx, backoff) {
			return nil, err
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// openWorkerBackend opens spec.DB. A skewed worker on SQLite opens the
// file itself with a shifted clock: SQLite's clock is the process's own,
// so the skew reaches its leases and due times (on a server the database
// clock decides, whatever the worker's says).
func openWorkerBackend(ctx context.Context, spec WorkerSpec) (backend.Backend, error) {
	if spec.Skew != 0 && schemeOf(spec.DB) == "sqlite" {
		path, opts, err := sqlite.ParseURL(spec.DB)
		if err != nil {
			return nil, err
		}
		opts.Now = skewedClock(spec.Skew)
		b, err := sqlite.Open(ctx, path, opts)
		if err != nil {
			return nil, err
		}
		return b, nil
	}
	return backend.Open(ctx, spec.DB)
}

// skewedClock is time.Now shifted by skew.
func skewedClock(skew time.Duration) func() time.Time {
	return func() time.Time { return time.Now().Add(skew) }
}

// newMemory returns the backend of an in-process run.
func newMemory() backend.Backend { return memory.New(memory.Options{}) }

// workerShutdown is how long a verify worker's jobs may finish after it is
// told to stop: they are a few milliseconds long, but for the slow ones.
const workerShutdown = 2 * time.Second

// work runs the worker on b until ctx ends.
func work(ctx context.Context, b backend.Backend, spec WorkerSpec, h *historyWriter, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	reg := jobq.NewRegistry()
	reg.HandleFunc(JobType, h.handle)
	rb := &recordingBackend{Backend: b, h: h, deadlines: spec.Deadlines, storeNow: time.Now}
	if spec.Skew != 0 && schemeOf(spec.DB) == "sqlite" {
		rb.storeNow = skewedClock(spec.Skew) // the store's clock is the process's
	}
	w, err := jobq.NewWorker(rb, reg, jobq.WorkerConfig{
		Queues:          spec.queues(),
		Concurrency:     spec.Concurrency,
		Lease:           spec.Lease,
		SweepInterval:   spec.Sweep,
		PollInterval:    spec.Poll,
		ShutdownTimeout: workerShutdown,
		JobTimeout:      time.Minute,
		// Short backoffs, so retries happen within the run.
		Retry:              jobq.RetryPolicy{Base: 20 * time.Millisecond, Max: 200 * time.Millisecond},
		CancelPollInterval: -1, // verify cancels nothing
		Logger:             log,
		Hooks:              []jobq.WorkerHooks{h.hooks()},
	})
	if err != nil {
		return fmt.Errorf("start worker: %w", err)
	}
	h.write(evUp, num("pid", int64(os.Getpid())), str("skew", spec.Skew.String()))
	if err := w.Run(ctx); err != nil {
		return fmt.Errorf("run worker: %w", err)
	}
	h.write(evDown)
	return nil
}

// queues are the queues the worker takes jobs from.
func (s WorkerSpec) queues() []string {
	if len(s.Queues) > 0 {
		return s.Queues
	}
	return []string{s.Queue}
}

// handle is the verification handler: it records the attempt's start,
// performs it as its payload plans, and records its end before returning.
func (h *historyWriter) handle(ctx context.Context, job *jobq.Job) error {
	p, err := decodePayload(job.Payload)
	if err != nil {
		return jobq.Permanent(fmt.Errorf("verify payload: %w", err))
	}
	fields := []field{num("job", job.ID), num("seq", p.Seq), num("att", int64(job.Attempt)), num("tok", job.Token), num("pid", h.pid)}
	if p.Task != "" {
		fields = append(fields, taskFields(ctx, p)...)
	}
	if p.Key != "" {
		fields = append(fields, str("kq", job.Queue), str("key", p.Key), num("kpos", p.KPos))
	}
	replayed := ""
	// The verifier replays a workflow's failed task and an ordered key's
	// failed head: their second life succeeds.
	if p.Perm && (p.Task != "" || p.Ord) {
		if replayed = h.replayedBy(job); replayed != "" {
			fields = append(fields, str("replayed", replayed))
		}
	}
	h.write(evStart, fields...)
	err = perform(ctx, job, p, replayed != "")
	h.write(evEnd, num("job", job.ID), num("att", int64(job.Attempt)), num("tok", job.Token), num("pid", h.pid), str("res", result(ctx, err)))
	return err
}

// hooks record what became of each outcome.
func (h *historyWriter) hooks() jobq.WorkerHooks {
	return jobq.WorkerHooks{
		Written: func(e jobq.Event) {
			if e.Job != nil {
				h.write(evWritten, num("job", e.Job.ID), num("att", int64(e.Job.Attempt)), num("tok", e.Job.Token), str("kind", e.Kind.String()))
			}
		},
		Stale: func(e jobq.StaleEvent) {
			h.write(evStale, num("job", e.JobID), num("att", int64(e.Attempt)), num("tok", e.Token))
		},
		Rescued: func(e jobq.RescuedEvent) {
			h.write(evRescued, num("job", e.JobID), num("att", int64(e.Attempt)), num("tok", e.Token), str("failed", fmt.Sprint(e.Failed)))
		},
		Finished: func(e jobq.Event) {
			if e.Kind == jobq.EventAbandoned && e.Job != nil {
				h.write(evAbandoned, num("job", e.Job.ID), num("att", int64(e.Job.Attempt)), num("tok", e.Job.Token))
			}
		},
	}
}

// recordingBackend records the claims a worker receives and the writes of
// outcomes that failed. A failed write is retried by the worker, and if
// the failure was a lost reply the retry is refused as stale although the
// first try was applied: the checker needs to know that a stale report
// followed a failed try.
type recordingBackend struct {
	backend.Backend
	h *historyWriter
	// deadlines: record the deadline workload's fields of each claim
	// (see WorkerSpec.Deadlines), reading the store's clock as this
	// process does with storeNow.
	deadlines bool
	storeNow  func() time.Time
}

// Unwrap lets jobq find the wrapped backend's capabilities
// (notifications, cancels) through backend.As.
func (r *recordingBackend) Unwrap() backend.Backend { return r.Backend }

// JobClaim records each claimed job, with the claim's token, once the
// claim returned. In the deadline workload the line also has c0, when
// the call began by the store's clock as this process reads it (the
// store claimed the job later: the earliest the claim can have been),
// the time the store reserved it by its own clock (rat), and the row's
// deadline (dl) when it carries one (JobClaim need not fill it in), all
// in Unix nanoseconds.
func (r *recordingBackend) JobClaim(ctx context.Context, p backend.ClaimParams) ([]*backend.JobRow, error) {
	var c0 int64
	if r.deadlines {
		c0 = r.storeNow().UnixNano()
	}
	rows, err := r.Backend.JobClaim(ctx, p)
	for _, row := range rows {
		fields := []field{num("job", row.ID), num("att", int64(row.Attempts)), num("tok", row.Token)}
		if r.deadlines {
			fields = append(fields, num("c0", c0))
			if !row.Deadline.IsZero() {
				fields = append(fields, num("dl", row.Deadline.UnixNano()))
			}
			if !row.ReservedAt.IsZero() {
				fields = append(fields, num("rat", row.ReservedAt.UnixNano()))
			}
		}
		r.h.write(evClaim, fields...)
	}
	return rows, err
}

// JobComplete records the outcomes of a failed call.
func (r *recordingBackend) JobComplete(ctx context.Context, p backend.CompleteParams) (backend.CompleteResult, error) {
	res, err := r.Backend.JobComplete(ctx, p)
	if err != nil {
		for _, o := range p.Outcomes {
			r.writeErr("complete", o.Ref, err)
		}
	}
	return res, err
}

// JobRelease records the refs of a failed call.
func (r *recordingBackend) JobRelease(ctx context.Context, refs []backend.JobRef) (backend.CompleteResult, error) {
	res, err := r.Backend.JobRelease(ctx, refs)
	if err != nil {
		for _, ref := range refs {
			r.writeErr("release", ref, err)
		}
	}
	return res, err
}

func (r *recordingBackend) writeErr(op string, ref backend.JobRef, err error) {
	r.h.write(evWriteErr, num("job", ref.ID), num("att", int64(ref.Attempt)), num("tok", ref.Token), str("op", op), str("err", errClass(err)))
}

// errClass names an error in one word for the history (its text may be
// long, and may quote a URL).
func errClass(err error) string {
	switch {
	case errors.Is(err, backend.ErrUnavailable):
		return "unavailable"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.Is(err, backend.ErrInvalidInput):
		return "invalid"
	case errors.Is(err, backend.ErrClosed):
		return "closed"
	}
	return "other"
}

// schemeOf is the lower-case scheme of a backend URL ("postgresql" is
// "postgres", "rediss" is "redis").
func schemeOf(url string) string {
	s, _, _ := strings.Cut(url, ":")
	switch s = strings.ToLower(s); s {
	case "postgresql":
		return "postgres"
	case "rediss":
		return "redis"
	}
	return s
}
