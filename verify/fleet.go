package verify

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobq/jobq/internal/ticker"
)

// fleet runs the worker processes: a slot per process, each slot a loop
// that starts a process, waits for it to exit and starts the next (the
// supervisor that restarts killed workers). The kill and pause faults act
// on the processes it runs.
type fleet struct {
	cmd    []string
	dir    string
	spec   WorkerSpec    // the template: Proc, History and Skew are set per process
	skew   time.Duration // the skew fault's offset; 0 when it is off
	events *historyWriter
	redact func(string) string

	mu    sync.Mutex
	procs []*proc // by slot: the process running there, nil between two

	started  atomic.Int64 // processes started
	skewed   atomic.Int64 // of which with a skewed clock
	failOnce sync.Once
	failed   chan struct{} // closed with err set when the fleet cannot run
	err      error
}

// proc is one worker process.
type proc struct {
	name     string
	slot     int
	cmd      *exec.Cmd
	lifeline *os.File // the write end of the child's stdin
	out      string   // its stdout and stderr
	exited   chan struct{}
	exitMono int64 // when Wait returned; set before exited is closed
	waitErr  error

	paused, killed bool // under fleet.mu
}

func newFleet(cmd []string, dir string, procs int, spec WorkerSpec, skew time.Duration, events *historyWriter, redact func(string) string) *fleet {
	return &fleet{
		cmd: cmd, dir: dir, spec: spec, skew: skew, events: events, redact: redact,
		procs: make([]*proc, procs), failed: make(chan struct{}),
	}
}

// fail records the first reason the fleet cannot go on.
func (f *fleet) fail(err error) {
	f.failOnce.Do(func() {
		f.err = err
		close(f.failed)
	})
}

// Exits by itself that a slot tolerates in a row before the run fails: a
// worker that cannot start is a broken setup, not a fault to verify.
const maxUnexpectedExits = 5

// runSlot keeps a worker process running in slot until ctx ends, then
// stops it gracefully.
func (f *fleet) runSlot(ctx context.Context, slot int) {
	unexpected := 0
	for gen := 0; ; gen++ {
		p, err := f.start(slot, gen)
		if err != nil {
			f.fail(err)
			return
		}
		select {
		case <-p.exited:
		case <-ctx.Done():
			f.stop(p)
			f.exited(p)
			return
		}
		if f.exited(p) {
			unexpected = 0
			continue
		}
		unexpected++
		if unexpected >= maxUnexpectedExits {
			f.fail(fmt.Errorf("verify: worker %s exited by itself %d times running (%v); its output ends:\n%s", p.name, unexpected, p.waitErr, f.redact(tail(p.out, 2000))))
			return
		}
		// Back off a little, so a worker that cannot start does not spin.
		if !ticker.Sleep(ctx, time.Duration(unexpected)*200*time.Millisecond) {
			return
		}
	}
}

// start starts generation gen of slot's worker.
func (f *fleet) start(slot, gen int) (*proc, error) {
	name := fmt.Sprintf("w%d.%d", slot, gen)
	spec := f.spec
	spec.Proc, spec.History = name, historyFile(f.dir, name)
	if f.skew != 0 {
		// Alternate ahead and behind, so both meet on one store.
		spec.Skew = f.skew
		if slot%2 == 1 {
			spec.Skew = -f.skew
		}
	}
	env, err := json.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("verify: worker spec: %w", err)
	}
	outPath := filepath.Join(f.dir, name+".out")
	out, err := os.OpenFile(outPath, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("verify: worker output file: %w", err)
	}
	defer out.Close()
	stdin, lifeline, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("verify: worker stdin: %w", err)
	}
	cmd := exec.Command(f.cmd[0], f.cmd[1:]...)
	cmd.Env = append(os.Environ(), WorkerEnv+"="+string(env))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, out, out
	cmd.SysProcAttr = procAttr()
	err = cmd.Start()
	_ = stdin.Close() // the child has its own copy
	if err != nil {
		_ = lifeline.Close()
		return nil, fmt.Errorf("verify: start worker process %q: %w", f.cmd[0], err)
	}
	p := &proc{name: name, slot: slot, cmd: cmd, lifeline: lifeline, out: outPath, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		p.exitMono = monoNow()
		close(p.exited)
	}()
	f.started.Add(1)
	if spec.Skew != 0 {
		f.skewed.Add(1)
	}
	f.events.write(evSpawn, str("worker", name), num("pid", int64(cmd.Process.Pid)), str("skew", spec.Skew.String()))
	f.mu.Lock()
	f.procs[slot] = p
	f.mu.Unlock()
	return p, nil
}

// exited records that p has exited and reports whether it was killed by
// the kill fault (anything else is unexpected).
func (f *fleet) exited(p *proc) (killed bool) {
	f.mu.Lock()
	if f.procs[p.slot] == p {
		f.procs[p.slot] = nil
	}
	killed = p.killed
	f.mu.Unlock()
	_ = p.lifeline.Close()
	status := "0"
	if p.waitErr != nil {
		status = p.waitErr.Error()
	}
	f.events.writeAt(p.exitMono, evExit, str("worker", p.name), num("pid", int64(p.cmd.Process.Pid)), str("status", status), str("killed", fmt.Sprint(killed)))
	return killed
}

// stopTimeout is how long a worker gets to stop after SIGTERM before it
// is killed: its shutdown timeout and the flush of its last outcomes.
const stopTimeout = 5*workerShutdown + 5*time.Second

// stop stops p gracefully: it is let go on should it be paused, its stdin
// closes and it gets SIGTERM; past stopTimeout it is killed.
func (f *fleet) stop(p *proc) {
	_ = continueProcess(p.cmd.Process)
	_ = p.lifeline.Close()
	_ = terminateProcess(p.cmd.Process)
	t := time.NewTimer(stopTimeout)
	defer t.Stop()
	select {
	case <-p.exited:
	case <-t.C:
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// running lists the processes that run unpaused and are not being killed.
func (f *fleet) running() []*proc {
	var out []*proc
	for _, p := range f.procs {
		if p != nil && !p.paused && !p.killed {
			out = append(out, p)
		}
	}
	return out
}

// kill sends SIGKILL to a random running worker (never a paused one: its
// resume is what the pause fault tests). It reports whether there was one.
func (f *fleet) kill(rng *rand.Rand) bool {
	f.mu.Lock()
	cands := f.running()
	if len(cands) == 0 {
		f.mu.Unlock()
		return false
	}
	p := cands[rng.IntN(len(cands))]
	p.killed = true
	f.mu.Unlock()
	f.events.write(evKill, str("worker", p.name), num("pid", int64(p.cmd.Process.Pid)))
	_ = p.cmd.Process.Kill()
	return true
}

// pause stops a random running worker (SIGSTOP) and returns it, or nil
// when none may be paused: one other worker is always left running, so
// the paused one's jobs are taken over. It prefers a worker other than
// last (the one just resumed): paused again at once, that one would
// never write the late outcomes the pause is for.
func (f *fleet) pause(rng *rand.Rand, last *proc) *proc {
	f.mu.Lock()
	cands := f.running()
	if len(cands) == 0 || (len(cands) == 1 && len(f.procs) > 1) {
		f.mu.Unlock()
		return nil
	}
	if len(cands) > 1 {
		for i, p := range cands {
			if p == last {
				cands = append(cands[:i], cands[i+1:]...)
				break
			}
		}
	}
	p := cands[rng.IntN(len(cands))]
	p.paused = true
	f.mu.Unlock()
	f.events.write(evPause, str("worker", p.name), num("pid", int64(p.cmd.Process.Pid)))
	if err := stopProcess(p.cmd.Process); err != nil {
		f.resume(p)
		return nil
	}
	return p
}

// resume lets a paused worker go on (SIGCONT).
func (f *fleet) resume(p *proc) {
	_ = continueProcess(p.cmd.Process)
	f.events.write(evResume, str("worker", p.name), num("pid", int64(p.cmd.Process.Pid)))
	f.mu.Lock()
	p.paused = false
	f.mu.Unlock()
}

// tail returns the last n bytes of the file at path.
func tail(path string, n int64) string {
	fh, err := os.Open(path)
	if err != nil {
		return "(no output: " + err.Error() + ")"
	}
	defer fh.Close()
	if st, err := fh.Stat(); err == nil && st.Size() > n {
		_, _ = fh.Seek(st.Size()-n, io.SeekStart)
	}
	b, _ := io.ReadAll(fh)
	return string(b)
}
