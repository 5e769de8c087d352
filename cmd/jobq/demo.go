package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/redact"
)

// The demo works its own queue, so its jobs and failures never mix with a
// real "default" queue sharing the file, and `--queue demo` scopes the
// inspection commands it suggests.
const demoQueue = "demo"

// The demo's settings: short backoffs so retries happen while one watches.
const (
	demoConcurrency = 8
	demoRetryBase   = 200 * time.Millisecond
	demoRetryMax    = 2 * time.Second
	demoPoll        = 100 * time.Millisecond // retries are found by polling: keep it short
	demoDeadline    = 25 * time.Second       // give up waiting well inside the promised 30 s
	demoGrace       = 3 * time.Second        // wait this long for jobs of earlier runs once ours are done
)

// The sample job types.
const (
	demoEmail     = "email.welcome"
	demoThumbnail = "image.thumbnail"
	demoPartner   = "partner.sync"
	demoCharge    = "payment.charge"
	demoReport    = "report.nightly"
)

type welcomeArgs struct {
	To string `json:"to"`
}

// Kind names the job type, so registering and enqueueing cannot disagree.
func (welcomeArgs) Kind() string { return demoEmail }

type thumbnailArgs struct {
	Image      string `json:"image"`
	Width      int    `json:"width"`
	SimulateMs int    `json:"simulate_ms"`
}

// Kind names the job type, so registering and enqueueing cannot disagree.
func (thumbnailArgs) Kind() string { return demoThumbnail }

type partnerArgs struct {
	Partner string `json:"partner"`
	Account string `json:"account"`
}

// Kind names the job type, so registering and enqueueing cannot disagree.
func (partnerArgs) Kind() string { return demoPartner }

type chargeArgs struct {
	Customer    string `json:"customer"`
	AmountCents int64  `json:"amount_cents"`
}

// Kind names the job type, so registering and enqueueing cannot disagree.
func (chargeArgs) Kind() string { return demoCharge }

type reportArgs struct {
	Report string `json:"report"`
}

// Kind names the job type, so registering and enqueueing cannot disagree.
func (reportArgs) Kind() string { return demoReport }

func (a *app) newDemoCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "demo",
		Short: "Watch sample jobs succeed, retry and fail, then inspect the failures",
		Long: `Register sample handlers (a welcome email, a slow thumbnail, a flaky partner
API that fails twice then succeeds, a charge whose payload is malformed, a
nightly report that always fails), enqueue a mix of them on queue "demo", run
a worker in this process with short backoffs, show live counts, and end with
a summary and the commands to inspect and replay the failed jobs, which stay
in --db. Needs no server: the default is the SQLite file jobq.db. Takes a few
seconds.`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withBackend(cmd.Context(), mayCreate, func(b backend.Backend) error {
				return a.runDemo(cmd.Context(), b)
			})
		},
	}
}

// demoRegistry registers the sample handlers. Each is an ordinary typed
// handler on args that name their own type, written as a user would.
func demoRegistry() *jobq.Registry {
	reg := jobq.NewRegistry()
	jobq.HandleArgs(reg, func(ctx context.Context, args welcomeArgs) error {
		return pause(ctx, time.Duration(5+len(args.To))*time.Millisecond) // "send" it
	})
	jobq.HandleArgs(reg, func(ctx context.Context, args thumbnailArgs) error {
		return pause(ctx, time.Duration(args.SimulateMs)*time.Millisecond)
	})
	jobq.HandleArgs(reg, func(ctx context.Context, args partnerArgs) error {
		if job, _ := jobq.JobFromContext(ctx); job.Attempt <= 2 {
			return fmt.Errorf("call %s API: 503 Service Unavailable", args.Partner)
		}
		return pause(ctx, 20*time.Millisecond)
	})
	jobq.HandleArgs(reg, func(ctx context.Context, args chargeArgs) error {
		return pause(ctx, 30*time.Millisecond)
	})
	jobq.HandleArgs(reg, func(ctx context.Context, args reportArgs) error {
		return fmt.Errorf("build %s report: connect to warehouse db.internal:5432: connection refused", args.Report)
	}, jobq.HandlerOptions{MaxAttempts: 3})
	return reg
}

// pause simulates work, giving up when the job's context ends.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}

// demoJobs is the mix to enqueue: 24 jobs, the kinds interleaved so the
// interesting ones start early. Ends: 22 complete (3 of them after two
// retries), the malformed charge fails at once, the report after 3 attempts.
func demoJobs() []jobq.JobSpec {
	var emails, thumbs, partners, charges, reports []jobq.JobSpec
	add := func(to *[]jobq.JobSpec, typ string, payload any) {
		*to = append(*to, jobq.JobSpec{Type: typ, Payload: payload, Options: []jobq.EnqueueOption{jobq.Queue(demoQueue)}})
	}
	// Type "": each payload names its own (Kind).
	for i, name := range []string{"ada", "grace", "alan", "edsger", "barbara", "ken", "dennis", "margaret", "donald", "frances", "john", "radia"} {
		add(&emails, "", welcomeArgs{To: fmt.Sprintf("%s%d@example.com", name, i+1)})
	}
	for i := range 5 {
		add(&thumbs, "", thumbnailArgs{Image: fmt.Sprintf("uploads/photo-%d.jpg", i+1), Width: 256, SimulateMs: 1000 + 250*i})
	}
	for _, p := range []string{"acme", "globex", "initech"} {
		add(&partners, "", partnerArgs{Partner: p, Account: "acct-" + p})
	}
	add(&charges, "", chargeArgs{Customer: "cus_1001", AmountCents: 1999})
	// Valid JSON, so Enqueue takes it, but the amount is a string: the
	// typed handler cannot decode it, and no retry can fix that. Raw
	// JSON names no type: it is given.
	add(&charges, demoCharge, json.RawMessage(`{"customer":"cus_1002","amount_cents":"49.90"}`))
	add(&charges, "", chargeArgs{Customer: "cus_1003", AmountCents: 500})
	add(&reports, "", reportArgs{Report: "revenue"})

	var out []jobq.JobSpec
	for kinds := [][]jobq.JobSpec{thumbs, partners, charges, reports, emails}; len(out) < 24; {
		for i := range kinds {
			if len(kinds[i]) > 0 {
				out = append(out, kinds[i][0])
				kinds[i] = kinds[i][1:]
			}
		}
	}
	return out
}

// demoJob is what the demo learns about one of this run's jobs from the
// worker's events.
type demoJob struct {
	id       int64
	typ      string
	retries  []time.Duration // the delays the worker chose
	attempts int
	done     bool
	failed   bool
}

// demoRun tracks this run's jobs; only the display goroutine touches it.
type demoRun struct {
	jobs    map[int64]*demoJob
	order   []int64
	pending int // jobs not yet done or failed
	earlier int // attempts of jobs enqueued by earlier runs
}

func (r *demoRun) apply(ev jobq.Event) *demoJob {
	j, ok := r.jobs[ev.Job.ID]
	if !ok {
		r.earlier++
		return nil
	}
	j.attempts = ev.Job.Attempt
	switch ev.Kind {
	case jobq.EventDone:
		j.done = true
		r.pending--
	case jobq.EventRetry:
		j.retries = append(j.retries, ev.RetryDelay)
	case jobq.EventFailed:
		j.failed = true
		r.pending--
	}
	return j
}

func (r *demoRun) count(pred func(*demoJob) bool) int {
	n := 0
	for _, j := range r.jobs {
		if pred(j) {
			n++
		}
	}
	return n
}

func (a *app) runDemo(ctx context.Context, b backend.Backend) error {
	if _, inline := backend.As[backend.Inline](b); inline {
		return usagef("the demo needs a backend that stores jobs for a worker (sqlite:PATH, memory:); %s runs each job inside Enqueue", a.db)
	}
	reg := demoRegistry()
	client, err := jobq.NewClient(b, jobq.ClientConfig{Registry: reg})
	if err != nil {
		return err
	}
	in := jobq.NewInspector(b)
	before, err := queueStats(ctx, in, demoQueue)
	if err != nil {
		return err
	}
	specs := demoJobs()
	res, err := client.EnqueueMany(ctx, specs)
	if err != nil {
		return err
	}
	run := &demoRun{jobs: map[int64]*demoJob{}, pending: len(res)}
	for i, r := range res {
		run.jobs[r.ID] = &demoJob{id: r.ID, typ: specs[i].Type}
		run.order = append(run.order, r.ID)
	}

	fmt.Fprintf(a.out, "jobq demo: enqueued %d jobs on queue %q in %s\n", len(res), demoQueue, a.db)
	fmt.Fprintf(a.out, "worker: %d at a time, retry backoff %s × 2^(attempt−1) ±20%% (cap %s), 3 attempts\n",
		demoConcurrency, demoRetryBase, demoRetryMax)
	if live := before.Pending + before.Scheduled + before.Reserved; live > 0 {
		fmt.Fprintf(a.out, "queue %q still held %d unfinished jobs from an earlier run: they run too, but the summary counts this run's only\n", demoQueue, live)
	}
	fmt.Fprintln(a.out)

	events := make(chan jobq.Event, 4*len(res))
	w, err := jobq.NewWorker(b, reg, jobq.WorkerConfig{
		Queues:          []string{demoQueue},
		Concurrency:     demoConcurrency,
		Retry:           jobq.RetryPolicy{Base: demoRetryBase, Max: demoRetryMax},
		PollInterval:    demoPoll,
		ShutdownTimeout: 5 * time.Second,
		Logger:          slog.New(withoutJobLines{slog.NewTextHandler(a.errOut, &slog.HandlerOptions{Level: slog.LevelWarn})}),
		Hooks:           []jobq.WorkerHooks{{Finished: func(ev jobq.Event) { events <- ev }}},
	})
	if err != nil {
		return err
	}
	wctx, stopWorker := context.WithCancel(ctx)
	defer stopWorker()
	ran := make(chan error, 1)
	start := time.Now()
	go func() { ran <- w.Run(wctx) }()

	screen := newDemoScreen(a.out, isTerminal(a.out), start)
	outcome := a.watchDemo(ctx, in, w, run, events, screen)
	stopWorker()
	// Keep taking events while the worker stops, so no handler blocks in
	// the Finished hook; once Run returns no attempt is left to report.
	for stopped := false; !stopped; {
		select {
		case err := <-ran:
			if err != nil {
				return err
			}
			stopped = true
		case ev := <-events:
			screen.event(ev, run.apply(ev))
		}
	}
	for len(events) > 0 {
		ev := <-events
		screen.event(ev, run.apply(ev))
	}
	// The summary is read even after Ctrl-C: it says what was left.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	after, err := queueStats(rctx, in, demoQueue)
	if err != nil {
		return err
	}
	screen.status(after, run)
	screen.end()
	return a.demoSummary(rctx, in, run, after, time.Since(start), outcome)
}

// watchDemo shows events and counts until this run's jobs have all ended
// (and the queue is empty, or jobs of earlier runs had demoGrace to finish),
// ctx ends, or demoDeadline passes. It returns why it stopped: "" when all
// ended, else a sentence for the summary.
func (a *app) watchDemo(ctx context.Context, in *jobq.Inspector, w *jobq.Worker, run *demoRun, events <-chan jobq.Event, screen *demoScreen) string {
	tick := time.NewTicker(screen.every)
	defer tick.Stop()
	deadline := time.NewTimer(demoDeadline)
	defer deadline.Stop()
	var oursDone time.Time
	for {
		select {
		case <-ctx.Done():
			return "interrupted"
		case <-deadline.C:
			return fmt.Sprintf("stopped waiting after %s", demoDeadline)
		case ev := <-events:
			screen.event(ev, run.apply(ev))
			continue
		case <-tick.C:
		}
		s, err := queueStats(ctx, in, demoQueue)
		if err != nil {
			if ctx.Err() != nil {
				return "interrupted"
			}
			screen.note("read stats: " + err.Error())
			continue
		}
		s.Reserved = max(s.Reserved, int64(w.Busy()))
		screen.status(s, run)
		if run.pending > 0 {
			continue
		}
		if oursDone.IsZero() {
			oursDone = time.Now()
		}
		if s.Pending+s.Scheduled+s.Reserved == 0 || time.Since(oursDone) > demoGrace {
			return ""
		}
	}
}

// queueStats returns the counts of one queue (zero when it has no jobs).
func queueStats(ctx context.Context, in *jobq.Inspector, queue string) (jobq.QueueStats, error) {
	all, err := in.Stats(ctx)
	if err != nil {
		return jobq.QueueStats{}, err
	}
	for _, s := range all {
		if s.Queue == queue {
			return s, nil
		}
	}
	return jobq.QueueStats{Queue: queue}, nil
}

// demoSummary prints what this run did, read back from the backend where
// `jobq stats` and `jobq failed list` read, so the numbers agree with them.
func (a *app) demoSummary(ctx context.Context, in *jobq.Inspector, run *demoRun, q jobq.QueueStats, took time.Duration, stopped string) error {
	failedRows, err := demoFailedRows(ctx, in, run)
	if err != nil {
		return err
	}
	out := a.out
	fmt.Fprintln(out)
	switch {
	case stopped != "" && run.pending > 0:
		fmt.Fprintf(out, "Summary (%s after %.1fs; %d of this run's jobs had not finished and stay on queue %q for the next run):\n", stopped, took.Seconds(), run.pending, demoQueue)
	case stopped != "":
		fmt.Fprintf(out, "Summary (%s after %.1fs, once the jobs in flight finished):\n", stopped, took.Seconds())
	default:
		fmt.Fprintf(out, "Summary of this run (%d jobs, %.1fs):\n", len(run.jobs), took.Seconds())
	}

	completed := map[string]int{}
	for _, j := range run.jobs {
		if j.done {
			completed[j.typ]++
		}
	}
	fmt.Fprintf(out, "  completed %3d  %s\n", run.count(func(j *demoJob) bool { return j.done }), byType(completed))

	retried := run.count(func(j *demoJob) bool { return len(j.retries) > 0 })
	retries := 0
	for _, j := range run.jobs {
		retries += len(j.retries)
	}
	fmt.Fprintf(out, "  retried   %3d  jobs, %d retries; the delays the worker chose:\n", retried, retries)
	for _, id := range run.order {
		j := run.jobs[id]
		if len(j.retries) == 0 {
			continue
		}
		delays := make([]string, len(j.retries))
		for i, d := range j.retries {
			delays[i] = d.Round(time.Millisecond).String()
		}
		end := "still waiting"
		switch {
		case j.done:
			end = fmt.Sprintf("completed on attempt %d", j.attempts)
		case j.failed:
			end = fmt.Sprintf("failed after attempt %d", j.attempts)
		}
		fmt.Fprintf(out, "                 job %-4d %-16s waited %s, %s\n", j.id, j.typ, strings.Join(delays, " then "), end)
	}

	fmt.Fprintf(out, "  failed    %3d  moved to failed_jobs, where they stay for you to inspect:\n", len(failedRows))
	for _, f := range failedRows {
		fmt.Fprintf(out, "                 job %-4d %-16s %s: %s\n", f.JobID, f.Type, plural(f.Attempts, "attempt"), firstLine(redact.Default.Text(f.Error), 160))
	}
	if run.earlier > 0 {
		fmt.Fprintf(out, "  (also ran %d attempts of jobs left on queue %q by earlier runs)\n", run.earlier, demoQueue)
	}

	fmt.Fprintf(out, "\nQueue %q now: %d pending, %d scheduled, %d reserved, %d failed", demoQueue, q.Pending, q.Scheduled, q.Reserved, q.Failed)
	if earlier := q.Failed - int64(len(failedRows)); earlier > 0 {
		fmt.Fprintf(out, " (%d from this run, %d from earlier runs)", len(failedRows), earlier)
	}
	fmt.Fprintln(out, ".")

	db := ""
	if a.db != defaultDB {
		db = " --db " + shellQuote(a.db)
	}
	jobqCmd, install := demoCommand()
	fmt.Fprintln(out, "\nInspect and replay the failed jobs:")
	if install != "" {
		fmt.Fprintln(out, install)
	}
	fmt.Fprintf(out, "  %s stats%s\n", jobqCmd, db)
	fmt.Fprintf(out, "  %s failed list --queue %s%s\n", jobqCmd, demoQueue, db)
	if len(failedRows) > 0 {
		fmt.Fprintf(out, "  %s failed show %d%s\n", jobqCmd, failedRows[0].JobID, db)
	} else {
		fmt.Fprintf(out, "  %s failed show ID%s\n", jobqCmd, db)
	}
	fmt.Fprintf(out, "  %s failed retry --all --queue %s%s\n", jobqCmd, demoQueue, db)
	fmt.Fprintf(out, "Replayed jobs wait on queue %q; run `%s demo%s` again to work them (the malformed charge fails again).\n", demoQueue, jobqCmd, db)
	if strings.HasPrefix(a.db, "memory:") {
		fmt.Fprintln(out, "(memory: keeps nothing after the demo exits; use a sqlite: file to inspect afterwards.)")
	}
	if stopped == "interrupted" {
		return errors.New("demo interrupted")
	}
	if stopped != "" {
		return fmt.Errorf("demo %s", stopped)
	}
	return nil
}

// demoCommand is how the reader runs jobq again for the commands the
// summary suggests, found from how the demo itself was run (see
// jobqCommand), with a line telling how to install jobq when that is not
// known.
func demoCommand() (cmd, install string) {
	exe, _ := os.Executable()
	var pkg, version string
	if bi, ok := debug.ReadBuildInfo(); ok {
		pkg, version = bi.Path, bi.Main.Version
	}
	_, err := os.Stat(filepath.Join("cmd", "jobq", "main.go"))
	return jobqCommand(os.Args[0], exe, pkg, version, err == nil)
}

// jobqCommand returns the command that runs this jobq again, given how it
// was started: arg0 as typed, the executable's path, the main package's
// path and module version, and whether the working directory is a clone of
// jobq's module (it has cmd/jobq). Under go run the binary is deleted when
// it exits, so the command is go run again: "go run ./cmd/jobq" in the
// clone, else the package path (at its version when it has one). When not
// even that is known, it is "jobq" with install, a line saying how to
// install it first. A binary run by a path (./jobq) is named as typed;
// anything else as "jobq".
func jobqCommand(arg0, exe, pkg, version string, inClone bool) (cmd, install string) {
	if goRunBinary(exe) {
		switch {
		case inClone:
			return "go run ./cmd/jobq", ""
		case pkg != "" && pkg != "command-line-arguments" && version != "" && version != "(devel)":
			return "go run " + shellQuote(pkg+"@"+version), ""
		case pkg != "" && pkg != "command-line-arguments":
			return "go run " + shellQuote(pkg), ""
		}
		return "jobq", "(These need the jobq command: run `go install ./cmd/jobq` once in your clone of jobq; it installs into $(go env GOPATH)/bin.)"
	}
	if strings.TrimSuffix(filepath.Base(arg0), ".exe") == "jobq" && strings.ContainsAny(arg0, `/\`) {
		return shellQuote(arg0), ""
	}
	return "jobq", ""
}

// goRunBinary reports whether exe was built by go run: into $WORK/b001/exe/
// under a go-build temporary directory, or (Go 1.24 on, which caches go
// run's executables) into the build cache, $GOCACHE/xx/<hex hash>-d/.
func goRunBinary(exe string) bool {
	dir := filepath.Dir(exe)
	if filepath.Base(dir) == "exe" && strings.HasPrefix(filepath.Base(filepath.Dir(filepath.Dir(dir))), "go-build") {
		return true
	}
	return goCacheEntry.MatchString(filepath.Base(dir)) && goCacheShard.MatchString(filepath.Base(filepath.Dir(dir)))
}

var (
	goCacheEntry = regexp.MustCompile(`^[0-9a-f]{64}-d$`)
	goCacheShard = regexp.MustCompile(`^[0-9a-f]{2}$`)
)

// demoFailedRows returns the failed_jobs rows of this run's jobs, oldest
// first, paging through the queue's failed jobs.
func demoFailedRows(ctx context.Context, in *jobq.Inspector, run *demoRun) ([]*jobq.FailedJob, error) {
	want := run.count(func(j *demoJob) bool { return j.failed })
	var rows []*jobq.FailedJob
	var before int64
	for len(rows) < want {
		page, err := in.FailedPage(ctx, jobq.FailedFilter{Queue: demoQueue}, 100, before)
		if err != nil {
			return nil, err
		}
		for _, f := range page {
			if _, ours := run.jobs[f.JobID]; ours {
				rows = append(rows, f)
			}
		}
		if len(page) < 100 {
			break
		}
		before = page[len(page)-1].ID
	}
	slices.Reverse(rows)
	return rows, nil
}

// plural is "1 attempt", "3 attempts".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// byType renders counts as "a 3, b 1" in a stable order.
func byType(counts map[string]int) string {
	types := make([]string, 0, len(counts))
	for t := range counts {
		types = append(types, t)
	}
	slices.Sort(types)
	parts := make([]string, len(types))
	for i, t := range types {
		parts[i] = fmt.Sprintf("%s %d", t, counts[t])
	}
	if len(parts) == 0 {
		return ""
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_@%+=:,./-]+$`)

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if shellSafe.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// demoScreen prints the demo's progress: notable attempts as lines, and the
// counts either redrawn in place (terminal) or as a line every second.
type demoScreen struct {
	w     io.Writer
	tty   bool
	every time.Duration
	start time.Time
	last  string // the status line drawn last (tty)
}

func newDemoScreen(w io.Writer, tty bool, start time.Time) *demoScreen {
	s := &demoScreen{w: w, tty: tty, every: time.Second, start: start}
	if tty {
		s.every = 100 * time.Millisecond
	}
	return s
}

// line prints one permanent line, keeping the status line below it.
func (s *demoScreen) line(text string) {
	if s.tty {
		fmt.Fprintf(s.w, "\r\x1b[K%s\n%s", text, s.last)
		return
	}
	fmt.Fprintln(s.w, text)
}

func (s *demoScreen) note(text string) { s.line("  " + text) }

// event prints the attempts worth seeing: retries, failures, and the
// success of a job that had failed before. j is nil for a job of an
// earlier run.
func (s *demoScreen) event(ev jobq.Event, j *demoJob) {
	at := fmt.Sprintf("%5.1fs", time.Since(s.start).Seconds())
	who := fmt.Sprintf("job %-4d %-16s attempt %d/%d", ev.Job.ID, ev.Job.Type, ev.Job.Attempt, ev.Job.MaxAttempts)
	if j == nil {
		j = &demoJob{}
		who += " (earlier run)"
	}
	switch ev.Kind {
	case jobq.EventRetry:
		s.line(fmt.Sprintf("%s  retry   %s failed: %s; next try in %s", at, who, firstLine(ev.Err.Error(), 100), ev.RetryDelay.Round(time.Millisecond)))
	case jobq.EventFailed:
		s.line(fmt.Sprintf("%s  FAILED  %s: %s; moved to failed_jobs", at, who, firstLine(ev.Err.Error(), 100)))
	case jobq.EventDone:
		if len(j.retries) > 0 {
			s.line(fmt.Sprintf("%s  done    %s succeeded after %d retries", at, who, len(j.retries)))
		}
	}
}

// status shows the queue's counts (from the backend) and this run's tallies.
func (s *demoScreen) status(q jobq.QueueStats, run *demoRun) {
	text := fmt.Sprintf("%5.1fs  queue: %d pending, %d scheduled, %d running | this run: %d done, %d retried, %d failed",
		time.Since(s.start).Seconds(), q.Pending, q.Scheduled, q.Reserved,
		run.count(func(j *demoJob) bool { return j.done }),
		run.count(func(j *demoJob) bool { return len(j.retries) > 0 }),
		run.count(func(j *demoJob) bool { return j.failed }))
	if s.tty {
		s.last = text
		fmt.Fprintf(s.w, "\r\x1b[K%s", text)
		return
	}
	// Not a terminal: a line only when the counts changed, so a log holds
	// the story and not a line per second of nothing happening.
	if counts := text[strings.Index(text, "queue"):]; counts != s.last {
		s.last = counts
		fmt.Fprintln(s.w, text)
	}
}

// end finishes the status line on a terminal.
func (s *demoScreen) end() {
	if s.tty {
		fmt.Fprintln(s.w)
	}
}

// withoutJobLines drops the worker's lines about one job (those with a
// job_id: retries, failures), which the demo prints in its own words; the
// worker's other warnings and errors go through.
type withoutJobLines struct{ slog.Handler }

func (h withoutJobLines) Handle(ctx context.Context, r slog.Record) error {
	aboutJob := false
	r.Attrs(func(a slog.Attr) bool {
		aboutJob = a.Key == "job_id"
		return !aboutJob
	})
	if aboutJob {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}
