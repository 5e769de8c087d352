package verify

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/postgres"
	"github.com/jobq/jobq/backend/redis"
	"github.com/jobq/jobq/internal/faultproxy"
	"github.com/jobq/jobq/internal/lifecycle"
	"github.com/jobq/jobq/internal/runner"
	"github.com/jobq/jobq/internal/ticker"
)

// verifierProc names the verifier in its own history file.
const verifierProc = "verifier"

// Run runs one verification: it enqueues cfg.Jobs jobs on a queue of its
// own while cfg.Procs workers run them and the faults of cfg.Faults go
// on for cfg.Duration; then it stops the faults, waits for the queue to
// drain (up to cfg.DrainTimeout), stops the workers, and checks the
// history every worker wrote against what the backend holds. The report
// says what held; an anomaly is not an error. Run returns an error when
// the run could not be made (a bad Config, wrapping jobq.ErrInvalidInput;
// a backend or worker that does not start; ctx ended).
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if cfg.Seed == 0 {
		cfg.Seed = mrand.Uint64()
	}
	r := &verifier{cfg: cfg, id: newRunID(), started: time.Now()}
	r.queue = "verify-" + r.id
	r.queues = []string{r.queue}
	if qs := cfg.keyQueues(r.queue); len(qs) > 0 {
		r.queues = r.queues[:0]
		for _, q := range qs {
			r.queues = append(r.queues, q.name)
		}
	}
	defer r.close()
	var rep *Report
	err = r.setup(ctx)
	if err == nil {
		rep, err = r.run(ctx)
	}
	if err != nil && r.tempDir && !cfg.Keep {
		// The error says what went wrong; a partial history proves nothing.
		r.removeDir = true
	}
	return rep, err
}

// newRunID is 8 random lower-case letters and digits.
func newRunID() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	var b [8]byte
	_, _ = rand.Read(b[:])
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b[:])
}

// verifier is the state of one Run.
type verifier struct {
	cfg     Config
	id      string
	queue   string
	queues  []string // the run's queues: queue, or the keyed workload's
	started time.Time

	dir       string
	tempDir   bool
	removeDir bool // close removes dir: a temporary history nobody needs
	events    *historyWriter
	logFile   *os.File // the verifier's backends' logs
	broker    *privateBroker
	db        string // the backend's URL (the private broker's, when there is one)
	workDB    string // the workers' (and producer's) URL: through the proxy with proxy faults
	mem       backend.Backend
	direct    backend.Backend // the verifier's own reads, never through the proxy
	prodB     backend.Backend // the producer's writes, through the proxy like the workers'
	proxy     *faultproxy.Proxy
	fleet     *fleet
	prod      *producer

	infra  lifecycle.Group // the proxy, then the workers
	side   lifecycle.Group // the progress line
	faults lifecycle.Group // one loop per fault

	injected [7]atomic.Int64 // by faultKinds, for the progress line
}

// faultKinds index verifier.injected.
var faultKinds = [...]string{"kill", "pause", "cut", "blackhole", "latency", "restart", "replay"}

func (r *verifier) count(kind string) {
	for i, k := range faultKinds {
		if k == kind {
			r.injected[i].Add(1)
		}
	}
}

// redact scrubs the backend URL's secrets (also as the workers see it,
// through the proxy) from text shown to the user.
func (r *verifier) redact(s string) string {
	s = backend.Redact(s, r.db)
	if r.workDB != "" {
		s = backend.Redact(s, r.workDB)
	}
	return s
}

// setup makes the history directory, starts the private broker and the
// proxy, and opens the verifier's backends.
func (r *verifier) setup(ctx context.Context) error {
	if err := r.makeDir(); err != nil {
		return err
	}
	var err error
	if r.events, err = createHistory(historyFile(r.dir, verifierProc), verifierProc, 0); err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	r.db = r.cfg.DB
	if r.cfg.Broker != "" {
		if r.broker, err = startBroker(ctx, r.cfg.Broker); err != nil {
			return err
		}
		r.db = r.broker.url
	}
	r.workDB = r.db
	if schemeOf(r.db) == "memory" {
		r.mem = newMemory()
		r.direct, r.prodB = r.mem, r.mem
		return nil
	}
	if r.direct, err = r.open(ctx, r.db); err != nil {
		return fmt.Errorf("verify: open the backend: %w", err)
	}
	r.prodB = r.direct
	if !r.cfg.has(FaultProxy) {
		return nil
	}
	target, err := proxyTarget(r.db)
	if err != nil {
		return &configError{msg: "fault proxy " + err.Error()}
	}
	if r.proxy, err = faultproxy.Listen("127.0.0.1:0", target); err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	r.proxy.SetLatency(r.cfg.ProxyLatency)
	r.infra.Start(context.WithoutCancel(ctx), lifecycle.Component{Name: "proxy", Run: func(ctx context.Context) { _ = r.proxy.Run(ctx) }})
	r.workDB = proxiedURL(r.db, r.proxy.Addr())
	if r.prodB, err = r.open(ctx, r.workDB); err != nil {
		return fmt.Errorf("verify: open the backend through the proxy: %w", err)
	}
	return nil
}

// open opens the verifier's own connection to url. The server backends'
// warnings (reconnects while the proxy cuts or the broker restarts) go
// to verifier.out in the history directory rather than to the terminal:
// they are the faults doing their work.
func (r *verifier) open(ctx context.Context, url string) (backend.Backend, error) {
	if r.logFile == nil {
		f, err := os.Create(filepath.Join(r.dir, verifierProc+".out"))
		if err != nil {
			return nil, fmt.Errorf("verify: log file: %w", err)
		}
		r.logFile = f
	}
	log := slog.New(slog.NewTextHandler(r.logFile, &slog.HandlerOptions{Level: slog.LevelWarn}))
	switch schemeOf(url) {
	case "postgres":
		b, err := postgres.Open(ctx, url, postgres.Options{Logger: log})
		if err != nil {
			return nil, err
		}
		return b, nil
	case "redis":
		b, err := redis.Open(ctx, url, redis.Options{Logger: log})
		if err != nil {
			return nil, err
		}
		return b, nil
	}
	return backend.Open(ctx, url)
}

// makeDir creates the history directory.
func (r *verifier) makeDir() error {
	if r.cfg.HistoryDir == "" {
		dir, err := os.MkdirTemp("", "jobq-verify-"+r.id+"-")
		if err != nil {
			return fmt.Errorf("verify: history directory: %w", err)
		}
		r.dir, r.tempDir = dir, true
		return nil
	}
	if err := os.MkdirAll(r.cfg.HistoryDir, 0o755); err != nil {
		return fmt.Errorf("verify: history directory: %w", err)
	}
	if ents, err := os.ReadDir(r.cfg.HistoryDir); err != nil || len(ents) > 0 {
		return &configError{msg: fmt.Sprintf("history directory %s is not empty: give a new or empty one", r.cfg.HistoryDir)}
	}
	r.dir = r.cfg.HistoryDir
	return nil
}

// close stops whatever still runs and releases what setup made.
func (r *verifier) close() {
	r.faults.Stop()
	r.infra.Stop()
	r.side.Stop()
	if r.prodB != nil && r.prodB != r.direct {
		_ = r.prodB.Close()
	}
	if r.direct != nil {
		_ = r.direct.Close()
	}
	if r.broker != nil {
		r.broker.close()
	}
	if r.events != nil {
		_ = r.events.Close()
	}
	if r.logFile != nil {
		_ = r.logFile.Close()
	}
	if r.removeDir {
		_ = os.RemoveAll(r.dir)
	}
}

// workerSpec is the template of every worker's WorkerSpec.
func (r *verifier) workerSpec() WorkerSpec {
	return WorkerSpec{
		DB: r.workDB, Queue: r.queue, Queues: r.queues, Run: r.id, Concurrency: r.cfg.Concurrency,
		Lease: r.cfg.Lease, Sweep: r.cfg.Lease / 4, Poll: 100 * time.Millisecond,
		Deadlines: r.cfg.Deadlines > 0,
	}
}

// startWorkers starts the worker processes (or, on memory:, the
// in-process workers).
func (r *verifier) startWorkers(ctx context.Context) {
	spec := r.workerSpec()
	if r.mem != nil {
		for i := range r.cfg.Procs {
			r.infra.Start(ctx, lifecycle.Component{Name: "worker", Run: func(ctx context.Context) { r.runInProcess(ctx, i, spec) }})
		}
		return
	}
	var skew time.Duration
	if r.cfg.has(FaultSkew) {
		skew = r.cfg.Skew
	}
	r.fleet = newFleet(r.cfg.WorkerCommand, r.dir, r.cfg.Procs, spec, skew, r.events, r.redact)
	for slot := range r.cfg.Procs {
		r.infra.Start(ctx, lifecycle.Component{Name: "worker slot", Run: func(ctx context.Context) { r.fleet.runSlot(ctx, slot) }})
	}
}

// runInProcess runs in-process worker i on the memory backend until ctx
// ends.
func (r *verifier) runInProcess(ctx context.Context, i int, spec WorkerSpec) {
	spec.Proc = fmt.Sprintf("w%d.0", i)
	spec.History = historyFile(r.dir, spec.Proc)
	h, err := createHistory(spec.History, spec.Proc, 0)
	if err != nil {
		r.events.write("error", str("worker", spec.Proc), str("err", err.Error()))
		return
	}
	out, err := os.Create(filepath.Join(r.dir, spec.Proc+".out"))
	if err != nil {
		_ = h.Close()
		return
	}
	defer out.Close()
	r.events.write(evSpawn, str("worker", spec.Proc), num("pid", int64(os.Getpid())), str("skew", "0s"))
	log := slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if err := work(ctx, r.mem, spec, h, log); err != nil {
		fmt.Fprintln(out, err)
	}
	_ = h.Close()
}

// fleetFailed is closed when the worker processes cannot run; nil (never)
// in process.
func (r *verifier) fleetFailed() <-chan struct{} {
	if r.fleet == nil {
		return nil
	}
	return r.fleet.failed
}

// run is the run proper, once set up.
func (r *verifier) run(ctx context.Context) (*Report, error) {
	cfg := r.cfg
	client, err := jobq.NewClient(r.prodB, jobq.ClientConfig{MaxAttempts: cfg.MaxAttempts})
	if err != nil {
		return nil, fmt.Errorf("verify: %w", err)
	}
	if err := r.setupKeys(ctx); err != nil {
		return nil, err
	}
	if err := r.setupDeadlines(ctx); err != nil {
		return nil, err
	}
	r.prod = newProducer(client, cfg, r.queue, r.id, r.rng(streamWorkload), r.events)
	r.startWorkers(ctx)
	if cfg.Progress != nil {
		r.side.Start(ctx, lifecycle.Component{Name: "progress", Run: r.progress})
	}
	if cfg.Workflows > 0 {
		r.side.Start(ctx, lifecycle.Component{Name: "workflow check", Run: r.checkWorkflows})
	}
	if cfg.Ordered {
		// Not a fault: without the operator a held key never drains.
		// It goes on through the drain, until the workers stop.
		r.side.Start(ctx, lifecycle.Component{Name: "key replayer", Run: r.keyReplayer})
	}
	prodCtx, stopProd := context.WithCancel(ctx)
	prodDone := make(chan error, 1)
	go func() { prodDone <- r.prod.run(prodCtx) }()
	defer func() {
		stopProd()
		if prodDone != nil {
			<-prodDone
		}
	}()
	r.startFaults(ctx)

	// The faults go on for the whole duration, whenever the enqueues end.
	timer := time.NewTimer(cfg.Duration)
	defer timer.Stop()
	enqueued := false
	for waiting := true; waiting; {
		select {
		case <-timer.C:
			waiting = false
		case <-ctx.Done():
			return nil, fmt.Errorf("verify: %w", context.Cause(ctx))
		case <-r.fleetFailed():
			return nil, r.fleet.err
		case err := <-prodDone:
			prodDone = nil
			if err != nil {
				return nil, err
			}
			enqueued = true
		}
	}
	r.faults.Stop()
	r.events.write("faults-end")

	drainCtx, cancel := context.WithTimeout(ctx, cfg.DrainTimeout)
	defer cancel()
	if !enqueued {
		select {
		case err := <-prodDone:
			prodDone = nil
			if err != nil {
				if drainCtx.Err() != nil && ctx.Err() == nil {
					return nil, fmt.Errorf("verify: the jobs were not all enqueued within the drain timeout (%s): %d of %d", cfg.DrainTimeout, r.prod.enqueued.Load(), cfg.Jobs)
				}
				return nil, err
			}
		case <-r.fleetFailed():
			return nil, r.fleet.err
		}
	}
	drainFrom := time.Now()
	drained, err := r.waitDrained(drainCtx)
	if err != nil && ctx.Err() != nil {
		return nil, fmt.Errorf("verify: %w", context.Cause(ctx))
	}
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return nil, err
	}
	drain := time.Since(drainFrom)
	r.events.write("drained", str("ok", fmt.Sprint(drained)))

	r.infra.Stop() // the workers, then the proxy
	r.side.Stop()
	select {
	case <-r.fleetFailed():
		return nil, r.fleet.err
	default:
	}
	return r.verdict(ctx, drained, drain)
}

// rng is a random source of the run's seed for one user (stream).
func (r *verifier) rng(stream uint64) *mrand.Rand { return seeded(r.cfg.Seed, stream) }

// streamWorkload is the stream of the producer's plan (durations,
// failures); the fault injectors draw from streams 1 to 3; the keyed
// workload's choice of keys from streamKeys, and the deadline workload's
// deadlines from streamDeadlines, so that such a run plans the same
// durations and failures as a plain one of the same seed.
const (
	streamWorkload  = 0
	streamKeys      = 4
	streamDeadlines = 5
)

// seeded is a random source of seed for one user (stream): the same seed
// and stream give the same draws.
func seeded(seed, stream uint64) *mrand.Rand { return mrand.New(mrand.NewPCG(seed, stream)) }

// waitDrained polls the queue's counts until nothing is pending,
// scheduled or reserved. It reports false when ctx ended first.
func (r *verifier) waitDrained(ctx context.Context) (bool, error) {
	for {
		s, err := r.queueStats(ctx)
		if err == nil && s.Pending+s.Scheduled+s.Reserved == 0 {
			return true, nil
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-r.fleetFailed():
			return false, r.fleet.err
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// queueStats are the run queues' counts, added up (zero when they hold
// nothing).
func (r *verifier) queueStats(ctx context.Context) (backend.QueueStats, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	all, err := r.direct.QueueStats(ctx)
	if err != nil {
		return backend.QueueStats{}, err
	}
	sum := backend.QueueStats{Queue: r.queue}
	for _, s := range all {
		if slices.Contains(r.queues, s.Queue) {
			sum.Pending += s.Pending
			sum.Scheduled += s.Scheduled
			sum.Reserved += s.Reserved
			sum.Failed += s.Failed
		}
	}
	return sum, nil
}

// verdict reads the history and the backend's final state, checks them,
// and cleans up after the run.
func (r *verifier) verdict(ctx context.Context, drained bool, drain time.Duration) (*Report, error) {
	if err := r.events.Err(); err != nil {
		return nil, err
	}
	recs, err := readHistory(r.dir)
	if err != nil {
		return nil, fmt.Errorf("verify: %w", err)
	}
	fs, err := r.finalState(ctx, recs)
	if err != nil {
		return nil, err
	}
	rep := &Report{
		RunID: r.id, Queue: r.queue, Backend: backend.RedactURL(r.db), Faults: r.cfg.Faults, Config: r.cfg,
		Unfenced: runner.Unfenced(), Injected: map[string]int{}, anomalyCount: map[string]int{},
		Drain: drain, Drained: drained,
	}
	rep.Config.DB = rep.Backend // the report may be shown: never the password
	rep.Config.Progress = nil
	if r.broker != nil {
		rep.Backend = "private " + r.broker.kind + " (" + r.db + ")"
	}
	check(recs, fs, r.cfg.MaxAttempts, r.id, r.cfg.MaxAnomalies, rep)
	if !r.cfg.Keep {
		for _, q := range r.queues {
			pctx, cancel := context.WithTimeout(ctx, time.Minute)
			_, err := r.direct.FailedPurge(pctx, backend.FailedPurgeParams{Filter: backend.FailedFilter{Queue: q}})
			cancel()
			if err != nil {
				return nil, fmt.Errorf("verify: purge the run's failed jobs: %w", err)
			}
		}
	}
	if r.tempDir && !r.cfg.Keep && rep.OK() {
		r.removeDir = true
	} else {
		rep.HistoryDir = r.dir
	}
	rep.Elapsed = time.Since(r.started)
	return rep, nil
}

// finalState reads what the backend holds of the run: its counts, its
// failed jobs, the jobs still live among those the history does not
// show ended, and its workflows.
func (r *verifier) finalState(ctx context.Context, recs []*record) (finalState, error) {
	fs := finalState{acked: r.prod.ackedJobs(), live: map[int64]*backend.JobRow{}}
	var err error
	if r.cfg.Workflows > 0 {
		if fs.wf, err = r.workflowState(ctx); err != nil {
			return fs, err
		}
		fs.wf.ackTasks(fs.acked)
	}
	if r.cfg.Keys > 0 {
		if fs.keys, err = r.keyState(ctx); err != nil {
			return fs, err
		}
	}
	if r.cfg.Unique > 0 {
		fs.unique = &uniqueFinal{identity: r.cfg.identityOf}
		fs.unique.ackMono, fs.unique.dups = r.prod.uniqueAcks()
	}
	if r.cfg.Deadlines > 0 {
		fs.deadlines = &deadlineFinal{tolerance: r.cfg.ClockTolerance}
		fs.deadlines.planned, fs.deadlines.givenUp = r.prod.deadlineState()
	}
	if fs.stats, err = r.queueStats(ctx); err != nil {
		return fs, fmt.Errorf("verify: read the queue's counts: %w", err)
	}
	if fs.failed, err = r.failedJobs(ctx); err != nil {
		return fs, fmt.Errorf("verify: list the queue's failed jobs: %w", err)
	}
	ended := map[int64]bool{}
	for _, f := range fs.failed {
		ended[f.JobID] = true
	}
	candidates := map[int64]bool{}
	for _, rec := range recs {
		if rec.ev == evWritten && rec.val == "done" {
			ended[rec.job] = true
		}
		if rec.job != 0 {
			candidates[rec.job] = true
		}
	}
	for id := range fs.acked {
		candidates[id] = true
	}
	for id := range candidates {
		if ended[id] {
			continue
		}
		row, err := r.direct.JobGet(ctx, id)
		switch {
		case errors.Is(err, backend.ErrNotFound):
		case err != nil:
			return fs, fmt.Errorf("verify: read job %d: %w", id, err)
		default:
			fs.live[id] = row
		}
	}
	return fs, nil
}

// progress prints a progress line every ProgressEvery.
func (r *verifier) progress(ctx context.Context) {
	ticker.Loop(ctx, r.cfg.ProgressEvery, r.printProgress)
}

func (r *verifier) printProgress(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.ProgressEvery)
	defer cancel()
	enq := r.prod.enqueued.Load()
	var faults []string
	for i, k := range faultKinds {
		if n := r.injected[i].Load(); n > 0 {
			faults = append(faults, fmt.Sprintf("%s=%d", k, n))
		}
	}
	if len(faults) == 0 {
		faults = []string{"none"}
	}
	el := time.Since(r.started).Round(time.Second)
	s, err := r.queueStats(ctx)
	if err != nil {
		fmt.Fprintf(r.cfg.Progress, "verify %s: enqueued %d/%d, backend unreachable (%s), faults %s\n", el, enq, r.cfg.Jobs, errClass(err), strings.Join(faults, " "))
		return
	}
	live := s.Pending + s.Scheduled + s.Reserved
	done := max(0, enq-live-s.Failed)
	fmt.Fprintf(r.cfg.Progress, "verify %s: enqueued %d/%d, done %d, failed %d, in flight %d, waiting %d, faults %s\n",
		el, enq, r.cfg.Jobs, done, s.Failed, s.Reserved, s.Pending+s.Scheduled, strings.Join(faults, " "))
}
