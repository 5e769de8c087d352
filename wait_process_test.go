package jobq_test

// Client.Wait across operating-system processes: a worker process (this
// test binary re-executed with waitChildEnv set) runs the jobs that the
// test process enqueues and waits for.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	_ "github.com/jobq/jobq/backend/all"
)

// waitChildEnv holds the backend URL a wait worker process opens.
const waitChildEnv = "JOBQ_TEST_WAIT_CHILD_DB"

// runWaitChild works the queue "wait" until SIGTERM, keeping completed
// jobs: "wait.ok" records {"n": its payload's n doubled, "at": the
// handler's end in Unix nanoseconds}; "wait.fail" fails for good.
func runWaitChild() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	b, err := backend.Open(ctx, os.Getenv(waitChildEnv))
	if err != nil {
		return childFailed(ctx, "open", err)
	}
	defer b.Close()
	reg := jobq.NewRegistry()
	reg.HandleFunc("wait.ok", func(ctx context.Context, j *jobq.Job) error {
		var p struct{ N int }
		if err := json.Unmarshal(j.Payload, &p); err != nil {
			return jobq.Permanent(err)
		}
		return jobq.SetResult(ctx, map[string]int64{"n": int64(2 * p.N), "at": time.Now().UnixNano()})
	})
	reg.HandleFunc("wait.fail", func(context.Context, *jobq.Job) error {
		return jobq.Permanent(errors.New("no such invoice"))
	})
	cfg := fastConfig()
	cfg.Queues = []string{"wait"}
	cfg.Retention.Completed = time.Hour
	return runChildWorker(ctx, b, reg, cfg, nil)
}

// noHints hides the backend's FinishNotifier (and every optional
// capability but Retainer, where Wait reads completed jobs): Wait on it
// can only poll, as after lost notifications.
type noHints struct {
	backend.Backend
	backend.Retainer
}

func TestProcessWait(t *testing.T) {
	t.Parallel()
	for _, st := range durableStores {
		t.Run(st.Name, func(t *testing.T) {
			t.Parallel()
			testProcessWait(t, st.URL(t), 20)
		})
	}
}

// startWaitChild starts a wait worker process on db and stops it when the
// test ends.
func startWaitChild(t *testing.T, db string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), waitChildEnv+"="+db)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start worker process: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			t.Errorf("worker process: %v", err)
		}
	})
}

// testProcessWait enqueues n "wait.ok" jobs one after the other and
// waits for each, then checks a failing job, a timeout, an unknown ID and
// a Wait without notifications. It returns the latencies it saw.
func testProcessWait(t *testing.T, db string, n int) (fromEnqueue, fromHandler []time.Duration) {
	ctx := t.Context()
	b, err := backend.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	startWaitChild(t, db)
	client := mustClient(t, b, jobq.ClientConfig{})
	waitOK := func(c *jobq.Client, i int) jobq.WaitResult {
		t.Helper()
		id, err := client.Enqueue(ctx, "wait.ok", map[string]int{"n": i}, jobq.Queue("wait"))
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, settle)
		defer cancel()
		res, err := c.Wait(wctx, id)
		if err != nil {
			t.Fatalf("Wait(%d): %v", id, err)
		}
		if res.ID != id || res.State != jobq.StateCompleted || res.Error != "" || res.FinishedAt.IsZero() {
			t.Fatalf("Wait(%d) = %+v, want it completed", id, res)
		}
		return res
	}
	for i := range n {
		start := time.Now()
		res := waitOK(client, i)
		end := time.Now()
		var got struct{ N, At int64 }
		if err := json.Unmarshal(res.Result, &got); err != nil || got.N != int64(2*i) {
			t.Fatalf("job %d: result %s (%v), want n %d", res.ID, res.Result, err, 2*i)
		}
		fromEnqueue = append(fromEnqueue, end.Sub(start))
		fromHandler = append(fromHandler, end.Sub(time.Unix(0, got.At)))
	}

	// A failing job: its failure with the handler's error.
	id, err := client.Enqueue(ctx, "wait.fail", nil, jobq.Queue("wait"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := client.Wait(ctx, id)
	if !errors.Is(err, jobq.ErrJobFailed) || !strings.Contains(err.Error(), "no such invoice") {
		t.Fatalf("Wait on a failing job: %v, want ErrJobFailed with its error", err)
	}
	if res.State != jobq.StateFailed || !strings.Contains(res.Error, "no such invoice") || res.FinishedAt.IsZero() {
		t.Fatalf("Wait on a failing job = %+v", res)
	}

	// Nobody works the queue "idle": the context's deadline ends the wait.
	id, err = client.Enqueue(ctx, "wait.ok", nil, jobq.Queue("idle"))
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
	_, err = client.Wait(short, id)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait past its deadline: %v, want context.DeadlineExceeded", err)
	}

	// An ID the store has nowhere.
	if _, err := client.Wait(ctx, id+1_000_000); !errors.Is(err, jobq.ErrJobGone) {
		t.Fatalf("Wait on an unknown ID: %v, want ErrJobGone", err)
	}

	// Without notifications Wait polls, backing off to about a second: it
	// still returns, within a couple of its polls.
	blind := mustClient(t, noHints{b, b.(backend.Retainer)}, jobq.ClientConfig{})
	start := time.Now()
	waitOK(blind, 7)
	if took := time.Since(start); took > settle {
		t.Fatalf("Wait without notifications took %s", took)
	}
	return fromEnqueue, fromHandler
}

// TestProcessWaitLatency measures Wait across processes when
// JOBQ_WAIT_LATENCY names a number of jobs: each is enqueued and waited
// for in turn, a worker process running it. It reports p50 and p99 from
// enqueue to Wait's return, and from the handler's end (the completion
// still to commit) to Wait's return.
func TestProcessWaitLatency(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("JOBQ_WAIT_LATENCY"))
	if n <= 0 {
		t.Skip("set JOBQ_WAIT_LATENCY=200 to measure")
	}
	for _, st := range durableStores {
		t.Run(st.Name, func(t *testing.T) {
			fromEnqueue, fromHandler := testProcessWait(t, st.URL(t), n)
			t.Logf("%s, %d jobs: enqueue→Wait return %s; handler end→Wait return %s",
				st.Name, n, percentiles(fromEnqueue), percentiles(fromHandler))
		})
	}
}

// percentiles says p50 and p99 of ds.
func percentiles(ds []time.Duration) string {
	ds = slices.Clone(ds)
	slices.Sort(ds)
	at := func(p float64) time.Duration { return ds[min(len(ds)-1, int(p*float64(len(ds))))] }
	return fmt.Sprintf("p50 %s p99 %s", at(0.50).Round(10*time.Microsecond), at(0.99).Round(10*time.Microsecond))
}
