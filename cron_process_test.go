package jobq_test

// The periodic-jobs guarantee across real processes: four worker processes
// (this test binary re-executed with cronChildEnv set, see TestMain) run
// the same one-second schedule against one store, and each tick is
// enqueued, and run, once.

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	_ "github.com/jobq/jobq/backend/all" // every scheme for backend.Open
)

const (
	cronChildEnv       = "JOBQ_TEST_CRON_URL"
	cronChildLedgerEnv = "JOBQ_TEST_CRON_LEDGER"
)

// runCronChild is a worker process with the schedule "every-second": it
// runs the schedule's jobs, appending "<tick> <pid>" to its ledger, and
// logs to <ledger>.log, until SIGTERM.
func runCronChild() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	b, err := backend.OpenWith(ctx, os.Getenv(cronChildEnv), backend.OpenOptions{Existing: true})
	if err != nil {
		return childFailed(ctx, "open", err)
	}
	defer b.Close()
	path := os.Getenv(cronChildLedgerEnv)
	ledger, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return childFailed(ctx, "ledger", err)
	}
	defer ledger.Close()
	logFile, err := os.Create(path + ".log")
	if err != nil {
		return childFailed(ctx, "log", err)
	}
	defer logFile.Close()
	reg := jobq.NewRegistry()
	reg.HandleFunc("cron.tick", func(ctx context.Context, j *jobq.Job) error {
		_, err := fmt.Fprintf(ledger, "%s %d\n", j.Metadata[jobq.MetadataTick], os.Getpid())
		return err
	})
	return runChildWorker(ctx, b, reg, jobq.WorkerConfig{
		Queues: []string{"cron"}, Concurrency: 2, PollInterval: 50 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logFile, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Schedules: []jobq.Schedule{{Name: "every-second", Spec: "@every 1s", Type: "cron.tick",
			Options: []jobq.EnqueueOption{jobq.Queue("cron")}}},
	}, nil)
}

// TestCronProcesses: four worker processes sharing one store, with a
// one-second schedule, run from the schedule's creation until its first 20
// ticks have run: the ticks 1..20 seconds after the creation's whole second
// are each enqueued and run once, and so is any tick after them enqueued
// before the processes stopped.
func TestCronProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 4 processes for 20s per backend")
	}
	for _, s := range durableStores {
		t.Run(s.Name, func(t *testing.T) { cronProcesses(t, s.URL(t)) })
	}
}

func cronProcesses(t *testing.T, url string) {
	const workers, window = 4, 20
	b, err := backend.Open(t.Context(), url) // creates the schema the workers open
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	dir := t.TempDir()
	var cmds []*exec.Cmd
	var ledgers []string
	for n := range workers {
		ledger := filepath.Join(dir, fmt.Sprintf("cron-%d.txt", n))
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), cronChildEnv+"="+url, cronChildLedgerEnv+"="+ledger)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatalf("start worker process: %v", err)
		}
		t.Cleanup(func() {
			if cmd.ProcessState == nil {
				cmd.Process.Kill()
				cmd.Wait()
			}
		})
		cmds, ledgers = append(cmds, cmd), append(ledgers, ledger)
	}
	in := jobq.NewInspector(b)
	var created time.Time
	deadline := time.Now().Add(settle)
	for created.IsZero() {
		if time.Now().After(deadline) {
			t.Fatalf("no worker registered the schedule within %s", settle)
		}
		if s, err := in.Schedule(t.Context(), "every-second"); err == nil {
			created = s.CreatedAt
		}
		time.Sleep(20 * time.Millisecond)
	}
	first := created.Truncate(time.Second).Add(time.Second)
	last := first.Add((window - 1) * time.Second)
	var want []string
	for k := range window {
		want = append(want, first.Add(time.Duration(k)*time.Second).UTC().Format(time.RFC3339))
	}
	// Stop once the 20th tick has run. The test stopped the processes half
	// a second after its time, which a loaded machine (-race, a CPU hog)
	// can reach before the tick was enqueued or run; waiting for the runs
	// instead may let the 21st tick, or more, in before the stop: those
	// are checked below like the 20.
	time.Sleep(time.Until(last.Add(500 * time.Millisecond)))
	deadline = time.Now().Add(settle)
	for {
		var ran []string
		for _, l := range ledgers {
			ran = append(ran, ticksRan(t, l)...)
		}
		if !slices.ContainsFunc(want, func(tick string) bool { return !slices.Contains(ran, tick) }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ticks run %v %s after the 20th tick's time, want each of %v", ran, settle, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, cmd := range cmds {
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatalf("signal worker: %v", err)
		}
	}
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("worker process exited with %v after SIGTERM, want 0", err)
		}
	}

	// Every job enqueued either ran (ledger) or still waits (listed with
	// its tick).
	var ran, waiting []string
	var perProcess, refused []int
	for _, l := range ledgers {
		ran = append(ran, ticksRan(t, l)...)
		perProcess = append(perProcess, countLines(t, l+".log", "scheduled job enqueued"))
		refused = append(refused, countLines(t, l+".log", "scheduled tick already enqueued"))
	}
	for _, state := range []jobq.JobState{jobq.StatePending, jobq.StateScheduled, jobq.StateReserved} {
		rows, err := in.JobsPage(t.Context(), state, jobq.JobFilter{}, 1000, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			waiting = append(waiting, r.Metadata[jobq.MetadataTick])
		}
	}
	slices.Sort(ran)
	enqueued := slices.Sorted(slices.Values(append(slices.Clone(ran), waiting...)))
	// The ticks after the window, enqueued while the test waited for the
	// 20th to run: consecutive, from the 21st.
	var after []string
	for k := range len(enqueued) - window {
		after = append(after, last.Add(time.Duration(k+1)*time.Second).UTC().Format(time.RFC3339))
	}
	t.Logf("schedule created %s; %d workers for %d ticks: %d jobs enqueued (ran %d, waiting %d, %d after the window); per process: enqueued %v, refused by the store %v",
		created.UTC().Format(time.RFC3339Nano), workers, window, len(enqueued), len(ran), len(waiting), len(after), perProcess, refused)
	if !slices.Equal(enqueued, append(slices.Clone(want), after...)) || !slices.Equal(ran[:min(window, len(ran))], want) || len(slices.Compact(slices.Clone(ran))) != len(ran) {
		for _, l := range ledgers {
			raw, _ := os.ReadFile(l + ".log")
			t.Logf("log of %s:\n%s", filepath.Base(l), raw)
		}
		t.Fatalf("ticks run %v, waiting %v; want each of %v and of the ticks after it enqueued once, the %d run once", ran, waiting, want, window)
	}
	if sum(perProcess) != len(enqueued) {
		t.Errorf("the processes logged %v enqueues, %d in all; want %d", perProcess, sum(perProcess), len(enqueued))
	}
	lastTick := last.Add(time.Duration(len(after)) * time.Second)
	s, err := in.Schedule(t.Context(), "every-second")
	if err != nil || !s.LastTick.Equal(lastTick) {
		t.Fatalf("schedule after the run: %+v, %v; want last tick %v", s, err, lastTick)
	}
}

// ticksRan reads a cron child's ledger: one tick per line.
func ticksRan(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		tick, _, _ := strings.Cut(sc.Text(), " ")
		out = append(out, tick)
	}
	return out
}

func countLines(t *testing.T, path, substr string) int {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(raw), substr)
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}
