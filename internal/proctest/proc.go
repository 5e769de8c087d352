// Package proctest runs worker processes for tests that prove what one
// process alone cannot (no double claims across processes, a SIGKILL
// mid-job, a server restart under load): the test binary started again
// with an environment that makes its TestMain or init run a worker, and a
// slog handler for those workers that counts what they log.
package proctest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Proc is a child process of a test: the test binary run again, with an
// environment that makes it do something else than run tests (the
// package's TestMain or an init function looks at it).
type Proc struct {
	cmd    *exec.Cmd
	out    *Buffer
	exited chan struct{}
	err    error // cmd.Wait's result, set before exited is closed
}

// StartProc runs the test binary again with -test.run=^$ and env added to
// its environment, its stdout and stderr kept (see Output). The child's
// stdin is a pipe whose write end the test holds: when the test process
// dies without stopping the child (a test binary timeout), the child sees
// EOF (ChildContext) and stops rather than run on as an orphan. A child
// still running when tb ends is killed, and its output logged if tb
// failed.
func StartProc(tb testing.TB, env ...string) *Proc {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	stdin, lifeline, err := os.Pipe()
	if err != nil {
		tb.Fatalf("proctest: pipe: %v", err)
	}
	p := &Proc{cmd: cmd, out: &Buffer{}, exited: make(chan struct{})}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, p.out, p.out
	err = cmd.Start()
	_ = stdin.Close() // the child has its own copy
	if err != nil {
		_ = lifeline.Close()
		tb.Fatalf("proctest: start child process: %v", err)
	}
	go func() {
		p.err = cmd.Wait()
		if cmd.ProcessState != nil {
			// What a worker cost, for the test's log when it fails.
			fmt.Fprintf(p.out, "cpu time user=%s sys=%s\n", cmd.ProcessState.UserTime(), cmd.ProcessState.SystemTime())
		}
		close(p.exited)
	}()
	tb.Cleanup(func() {
		if p.Running() {
			_ = cmd.Process.Kill()
			<-p.exited
		}
		_ = lifeline.Close()
		if tb.Failed() {
			tb.Logf("child process %d (%v) output:\n%s", p.PID(), p.err, p.Output())
		}
	})
	return p
}

// ChildContext is the context a child process started by StartProc
// works under: cancelled by SIGTERM or SIGINT, or when the test process
// is gone (stdin reaches EOF).
func ChildContext() (context.Context, context.CancelFunc) {
	sigCtx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	ctx, cancel := context.WithCancel(sigCtx)
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	return ctx, func() { cancel(); stop() }
}

// PID is the child's process ID.
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// Running reports whether the child has not exited yet.
func (p *Proc) Running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Err is how the child exited (cmd.Wait's error), nil while it runs.
func (p *Proc) Err() error {
	if p.Running() {
		return nil
	}
	return p.err
}

// Output is everything the child wrote to stdout and stderr so far.
func (p *Proc) Output() string { return p.out.String() }

// Stop sends SIGTERM and fails tb unless the child exits 0 within a
// minute.
func (p *Proc) Stop(tb testing.TB) {
	tb.Helper()
	StopAll(tb, p)
}

// StopAll sends SIGTERM to every child at once, then fails tb unless each
// exits 0 within a minute. (A child built with -race takes about a second
// to exit: stopping them one after another adds up.)
func StopAll(tb testing.TB, procs ...*Proc) {
	tb.Helper()
	for _, p := range procs {
		if !p.Running() {
			tb.Fatalf("child process %d exited before it was stopped: %v\n%s", p.PID(), p.err, p.Output())
		}
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			tb.Fatalf("signal child process %d: %v", p.PID(), err)
		}
	}
	deadline := time.After(time.Minute)
	for _, p := range procs {
		select {
		case <-p.exited:
		case <-deadline:
			tb.Fatalf("child process %d still running a minute after SIGTERM", p.PID())
		}
		if p.err != nil {
			tb.Fatalf("child process %d exited with %v after SIGTERM, want exit 0\n%s", p.PID(), p.err, p.Output())
		}
	}
}

// Kill sends SIGKILL and waits until the child is gone.
func (p *Proc) Kill(tb testing.TB) {
	tb.Helper()
	if err := p.cmd.Process.Kill(); err != nil {
		tb.Fatalf("kill child process %d: %v", p.PID(), err)
	}
	<-p.exited
}

// Summary parses the last line of the child's output that starts with
// prefix and holds key=value integers.
func (p *Proc) Summary(tb testing.TB, prefix string) map[string]int64 {
	tb.Helper()
	var found string
	for line := range strings.Lines(p.Output()) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), prefix); ok {
			found = rest
		}
	}
	if found == "" {
		tb.Fatalf("child process %d printed no line starting %q:\n%s", p.PID(), prefix, p.Output())
	}
	m := map[string]int64{}
	for _, f := range strings.Fields(found) {
		k, v, _ := strings.Cut(f, "=")
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			tb.Fatalf("child process %d: summary field %q: %v", p.PID(), f, err)
		}
		m[k] = n
	}
	return m
}

// String names the child for messages.
func (p *Proc) String() string { return fmt.Sprintf("process %d", p.PID()) }

// Buffer is a bytes.Buffer safe for concurrent writers and readers: a
// child's output copier and the test reading it, or a worker's logger.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String is everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
