package verify

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/storetest"
)

// deadlineRun turns a short run into the deadline workload: half its
// jobs with a deadline.
func deadlineRun(cfg Config) Config {
	cfg.Deadlines = 0.5
	return cfg
}

// wantDeadlines fails t unless the run had jobs with a deadline, some
// of which ran, and each of which ran or expired.
func wantDeadlines(t *testing.T, rep *Report) {
	t.Helper()
	if rep.DeadlineJobs == 0 || rep.DeadlineRan == 0 || rep.DeadlineClaims == 0 {
		t.Errorf("%d jobs with a deadline, %d ran, %d claims: want some of each", rep.DeadlineJobs, rep.DeadlineRan, rep.DeadlineClaims)
	}
	if rep.DeadlineRan+rep.DeadlineExpired != rep.DeadlineJobs {
		t.Errorf("%d jobs with a deadline, %d ran and %d expired: each must do one", rep.DeadlineJobs, rep.DeadlineRan, rep.DeadlineExpired)
	}
	if rep.FailedExpired != rep.DeadlineExpired {
		t.Errorf("%d failed jobs expired, %d jobs with a deadline expired", rep.FailedExpired, rep.DeadlineExpired)
	}
	t.Logf("deadlines: %s", rep.deadlineRow())
}

func TestRunMemoryDeadlines(t *testing.T) {
	t.Parallel()
	cfg := deadlineRun(short("memory:"))
	cfg.Faults, cfg.WorkerCommand = []Fault{}, nil
	wantDeadlines(t, mustVerify(t, cfg))
}

func TestRunSQLiteDeadlinesKillPause(t *testing.T) {
	t.Parallel()
	rep := mustVerify(t, deadlineRun(short(storetest.Durable[0].URL(t), FaultKill, FaultPause)))
	wantInjected(t, rep, "kill", "pause")
	wantDeadlines(t, rep)
}

func TestRunPostgresDeadlinesKillProxy(t *testing.T) {
	t.Parallel()
	rep := mustVerify(t, deadlineRun(short(storetest.Durable[1].URL(t), FaultKill, FaultProxy)))
	wantInjected(t, rep, "kill", "cut")
	wantDeadlines(t, rep)
}

// TestRunRedisDeadlinesKillProxy runs the deadline workload on Redis
// under worker kills and proxy cuts.
func TestRunRedisDeadlinesKillProxy(t *testing.T) {
	t.Parallel()
	cfg := deadlineRun(short(storetest.Durable[2].URL(t), FaultKill, FaultProxy))
	cfg.Progress = logWriter{t}
	rep, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	mustHold(t, cfg, rep)
	wantInjected(t, rep, "kill", "cut")
	wantDeadlines(t, rep)
}

// wantRefusedUpFront fails t unless err, a deadline workload's refusal,
// is one line naming what is missing and came before the run did
// anything that takes time.
func wantRefusedUpFront(t *testing.T, err error, took time.Duration) {
	t.Helper()
	if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, "needs a backend that keeps deadlines") {
		t.Errorf("refusal %q: want one line saying the backend keeps no deadlines", msg)
	}
	if took > 5*time.Second {
		t.Errorf("the refusal took %s: it must come before the run", took)
	}
}

// noDeadlines is a backend that keeps no deadlines, as one refuses them.
type noDeadlines struct{ backend.Backend }

func (b noDeadlines) JobInsertMany(ctx context.Context, params []backend.InsertParams) ([]backend.InsertResult, error) {
	if err := backend.RefuseDeadlines(params); err != nil {
		return nil, err
	}
	return b.Backend.JobInsertMany(ctx, params)
}

// TestSetupDeadlinesRefusesUpFront: on a backend without deadlines the
// run is refused before anything is enqueued, in one line; on one with
// them the probe writes nothing.
func TestSetupDeadlinesRefusesUpFront(t *testing.T) {
	mem := newMemory()
	defer mem.Close()
	r := &verifier{cfg: Config{Deadlines: 0.3}, queue: "verify-probe", db: "redis://h:6379/0", direct: noDeadlines{mem}}
	start := time.Now()
	err := r.setupDeadlines(t.Context())
	if !errors.Is(err, backend.ErrNotSupported) {
		t.Fatalf("setupDeadlines on a backend without deadlines: %v, want ErrNotSupported", err)
	}
	wantRefusedUpFront(t, err, time.Since(start))
	if !strings.Contains(err.Error(), "this redis backend does not") {
		t.Errorf("refusal %q does not name the backend", err)
	}
	r.direct = mem
	if err := r.setupDeadlines(t.Context()); err != nil {
		t.Fatalf("setupDeadlines on memory: %v", err)
	}
	stats, err := mem.QueueStats(t.Context())
	if err != nil || len(stats) != 0 {
		t.Errorf("the probes left %v (%v), want nothing", stats, err)
	}
}
