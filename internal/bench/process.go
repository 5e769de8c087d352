package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jobq/jobq"
)

// A worker process (Config.WorkerProcess) runs ServeWorker and talks to
// the bench over its standard input and output, one line a message.
//
// The bench writes:
//
//	go      start working the queue (sent once, when the clock starts)
//	cost    reply with a cost line now
//
// The worker process writes:
//
//	ready              the store is open and the worker made: it waits for go
//	s REF AT           a measured job's handler started (a stamp, UnixNano)
//	d OK OTHER         attempts written so far: successful, and not
//	c CPU ALLOC GCS    its cost: CPU ns (-1: unknown), bytes allocated, GCs
//
// It counts an attempt once the store has its outcome (the Written hook),
// so "all done" means written; it writes a job's stamp before the count
// that includes the job; and it batches its reports, at most one every
// reportEvery. It stops, reporting what is left, on SIGTERM (which ends
// ctx) or when its standard input ends (the bench is gone).

// reportEvery is how often at most a worker process reports: the most a
// drain's clock can run late by.
const reportEvery = 2 * time.Millisecond

// ServeWorker is the worker side of one workload in a worker process
// (`jobq bench-worker`, which `jobq bench --worker-process` starts): it
// makes the workload's worker on queue with cfg's Backend, Workers,
// KeepCompleted and Log, says ready on out, starts working when in says
// go, and reports as described above until ctx ends or in does. It
// returns once the worker has stopped and written every outcome.
func ServeWorker(ctx context.Context, cfg Config, queue, workload string, in io.Reader, out io.Writer) error {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	if _, ok := workloads[workload]; !ok {
		return fmt.Errorf("%w: unknown workload %q", jobq.ErrInvalidInput, workload)
	}
	t := newTally(nil)
	w, err := newWorker(cfg, queue, handlerFor(workload, t.record), jobq.WorkerHooks{Written: t.count})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The reader ends with in: in a worker process, when the bench closes
	// it or exits (and otherwise with the process).
	cmds := make(chan string)
	go func() {
		defer close(cmds)
		sc := bufio.NewScanner(in)
		for sc.Scan() {
			select {
			case cmds <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
	}()

	bw := bufio.NewWriter(out)
	var sentOK, sentOther int64
	report := func() error {
		// The counts first, then the stamps: a job counted has its stamp
		// recorded already (its handler returned before it was written),
		// so every counted job's stamp goes out before the count.
		ok, other := t.ok.Load(), t.other.Load()
		for _, s := range t.take() {
			fmt.Fprintf(bw, "s %d %d\n", s.Ref, s.At)
		}
		if ok != sentOK || other != sentOther {
			fmt.Fprintf(bw, "d %d %d\n", ok, other)
			sentOK, sentOther = ok, other
		}
		return bw.Flush()
	}
	if _, err := io.WriteString(bw, "ready\n"); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}

	var (
		ran      chan error // nil until go
		stopping = ctx.Done()
		flush    = time.NewTimer(time.Hour)
		armed    bool
		last     time.Time
	)
	flush.Stop()
	defer flush.Stop()
	// wait stops the worker, if it runs, and returns what it returned.
	wait := func() error {
		cancel()
		if ran == nil {
			return nil
		}
		err := <-ran
		ran = nil
		return err
	}
	for {
		select {
		case cmd, ok := <-cmds:
			if !ok { // the bench is gone
				cmds = nil
				cancel()
				continue
			}
			switch cmd {
			case "go":
				if ran == nil {
					ran = make(chan error, 1)
					go func() { ran <- w.Run(ctx) }()
				}
			case "cost":
				c := costNow()
				fmt.Fprintf(bw, "c %d %d %d\n", c.cpu.Nanoseconds(), c.alloc, c.gcs)
				if err := bw.Flush(); err != nil {
					return errors.Join(err, wait())
				}
			default:
				return errors.Join(fmt.Errorf("worker process: unknown command %q", cmd), wait())
			}
		case <-t.notify:
			if armed {
				continue
			}
			if d := reportEvery - time.Since(last); d > 0 {
				flush.Reset(d)
				armed = true
				continue
			}
			last = time.Now()
			if err := report(); err != nil {
				return errors.Join(err, wait())
			}
		case <-flush.C:
			armed = false
			last = time.Now()
			if err := report(); err != nil {
				return errors.Join(err, wait())
			}
		case <-stopping:
			stopping = nil
			if ran == nil { // stopped before it began
				return nil
			}
		case err := <-ran: // stopped: ctx ended, or the worker failed
			ran = nil
			return errors.Join(err, report())
		}
	}
}

// reportFields is how many fields each report line has.
var reportFields = map[string]int{"s": 3, "d": 3, "c": 4}

// proc is the worker side in a worker process (Config.WorkerProcess): its
// reports feed a tally in this process.
type proc struct {
	*tally
	cmd   *exec.Cmd
	in    io.WriteCloser
	errs  *tailWriter
	stall time.Duration
	// ready is closed at the worker process's ready; costs gets its cost
	// replies.
	ready chan struct{}
	costs chan cost
	// exited is closed once the worker process's output ended and it was
	// reaped; readErr and waitErr are then what went wrong.
	exited           chan struct{}
	readErr, waitErr error
	stopped          bool
	stopErr          error
}

// startProc starts the worker process and waits, at most cfg.Stall, until
// it is ready. On any error it is ended and reaped.
func startProc(ctx context.Context, cfg Config, queue, workload string, credits chan struct{}) (*proc, error) {
	cmd := cfg.WorkerProcess(queue, workload)
	p := &proc{
		tally: newTally(credits), cmd: cmd, stall: cfg.Stall,
		errs:  &tailWriter{w: cfg.WorkerStderr, prefix: "worker process: "},
		ready: make(chan struct{}), costs: make(chan cost, 1), exited: make(chan struct{}),
	}
	p.quit, p.quitErr = p.exited, p.exitErr
	cmd.Stderr = p.errs
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("start worker process: %w", err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		in.Close()
		return nil, fmt.Errorf("start worker process: %w", err)
	}
	p.in = in
	if err := cmd.Start(); err != nil { // closes the pipes
		return nil, fmt.Errorf("start worker process: %w", err)
	}
	go func() {
		p.readErr = p.read(out)
		p.waitErr = cmd.Wait() // after every read, as exec requires
		p.errs.flush()
		close(p.exited)
	}()
	timer := time.NewTimer(cfg.Stall)
	defer timer.Stop()
	select {
	case <-p.ready:
		return p, nil
	case <-p.exited:
		if p.readErr != nil {
			return nil, p.readErr
		}
		return nil, fmt.Errorf("worker process quit before it was ready: %s", p.status())
	case <-timer.C:
		err = fmt.Errorf("worker process not ready after %s%s", cfg.Stall, p.errs.last())
	case <-ctx.Done():
		err = ctx.Err()
	}
	p.kill()
	return nil, err
}

// read reads the worker process's reports until its output ends. A line
// it cannot read kills the worker process (whose output then ends) and is
// the error it returns.
func (p *proc) read(r io.Reader) error {
	var (
		sc                = bufio.NewScanner(r)
		okSeen, otherSeen int64
		ready             bool
		bad               error
	)
	for sc.Scan() {
		if bad != nil {
			continue
		}
		line := sc.Text()
		f := strings.Fields(line)
		if line == "ready" && !ready {
			ready = true
			close(p.ready)
			continue
		}
		if len(f) == 0 || reportFields[f[0]] != len(f) {
			bad = fmt.Errorf("worker process said %q: not what the bench asked of it", line)
		}
		nums := make([]int64, len(f))
		for i := 1; i < len(f) && bad == nil; i++ {
			if nums[i], bad = strconv.ParseInt(f[i], 10, 64); bad != nil {
				bad = fmt.Errorf("worker process said %q: %w", line, bad)
			}
		}
		if bad != nil {
			_ = p.cmd.Process.Kill() // it is not what we think: end it, and the wait
			continue
		}
		switch f[0] {
		case "s":
			p.record(stamp{Ref: nums[1], At: nums[2]})
		case "d":
			p.add(nums[1]-okSeen, nums[2]-otherSeen)
			okSeen, otherSeen = nums[1], nums[2]
		case "c":
			select {
			case p.costs <- cost{cpu: time.Duration(nums[1]), alloc: uint64(nums[2]), gcs: uint32(nums[3])}:
			default: // a reply nobody waits for any more
			}
		}
	}
	if bad != nil {
		return bad
	}
	return sc.Err()
}

// exitErr says why the worker process quit (once exited is closed): a
// line it should not have written, or its exit status and the last line
// of its standard error.
func (p *proc) exitErr() error {
	if p.readErr != nil {
		return p.readErr
	}
	return fmt.Errorf("worker process quit: %s", p.status())
}

// status is the worker process's exit status and the last line of its
// standard error, once exited is closed.
func (p *proc) status() string {
	st := "exit status 0"
	if p.waitErr != nil {
		st = p.waitErr.Error()
	}
	return st + p.errs.last()
}

func (p *proc) begin() error {
	if _, err := io.WriteString(p.in, "go\n"); err != nil {
		return fmt.Errorf("start worker process's worker: %w", err)
	}
	return nil
}

// cost is this process's cost plus the worker process's, which it asks
// for and waits for (at most stall).
func (p *proc) cost() (cost, error) {
	c := costNow()
	select {
	case <-p.costs: // a late reply to an earlier request
	default:
	}
	if _, err := io.WriteString(p.in, "cost\n"); err != nil {
		return c, fmt.Errorf("ask the worker process's cost: %w", err)
	}
	timer := time.NewTimer(p.stall)
	defer timer.Stop()
	select {
	case w := <-p.costs:
		return c.plus(w), nil
	case <-p.exited:
		return c, p.exitErr()
	case <-timer.C:
		return c, fmt.Errorf("worker process did not report its cost in %s", p.stall)
	}
}

// stop sends the worker process SIGTERM, its graceful stop (or, where
// there is no SIGTERM, closes its input, which stops it too), and waits
// for it to exit; one that has not exited after stall is killed.
func (p *proc) stop() error {
	if p.stopped {
		return p.stopErr
	}
	p.stopped = true
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		p.in.Close()
	}
	timer := time.NewTimer(p.stall)
	defer timer.Stop()
	select {
	case <-p.exited:
	case <-timer.C:
		p.kill()
		p.stopErr = fmt.Errorf("worker process did not stop within %s of SIGTERM: killed%s", p.stall, p.errs.last())
		return p.stopErr
	}
	if p.readErr != nil {
		p.stopErr = p.readErr
	} else if p.waitErr != nil {
		p.stopErr = fmt.Errorf("worker process did not stop cleanly: %s", p.status())
	}
	return p.stopErr
}

// kill ends the worker process at once and reaps it.
func (p *proc) kill() {
	_ = p.cmd.Process.Kill() // fails only when it has exited already
	<-p.exited
}

// tailWriter passes the worker process's standard error on to w (when
// set), each line prefixed, and keeps its last line for errors.
type tailWriter struct {
	w      io.Writer
	prefix string
	mu     sync.Mutex
	buf    []byte // a line not ended yet
	tail   string // the last non-empty line
}

func (t *tailWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	for {
		i := bytes.IndexByte(t.buf, '\n')
		if i < 0 {
			break
		}
		t.line(t.buf[:i])
		t.buf = t.buf[i+1:]
	}
	if len(t.buf) > 64<<10 { // no newline for that long: pass it on as it is
		t.line(t.buf)
		t.buf = nil
	}
	return len(p), nil
}

func (t *tailWriter) line(l []byte) {
	s := strings.TrimSpace(string(l))
	if s == "" {
		return
	}
	t.tail = s
	if t.w != nil {
		fmt.Fprintf(t.w, "%s%s\n", t.prefix, s)
	}
}

// flush passes on an unfinished last line.
func (t *tailWriter) flush() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.buf) > 0 {
		t.line(t.buf)
		t.buf = nil
	}
}

// last is ": " and the last line, or "" when there was none.
func (t *tailWriter) last() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.tail == "" {
		return ""
	}
	return ": " + t.tail
}
