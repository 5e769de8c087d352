package localserver

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// Redis is a private redis-server in a directory of its own, whose
// append-only and snapshot files outlive a Kill, so Start brings back
// what its persistence kept.
type Redis struct {
	// URL reaches the server's database 0.
	URL  string
	Port int
	Dir  string // the server's working directory: AOF, RDB and log
	// SysProcAttr, when set, is the server process's (say, to have it
	// killed with its parent).
	SysProcAttr *syscall.SysProcAttr

	path   string
	args   []string
	cmd    *exec.Cmd
	exited chan struct{}
}

// NewRedis prepares a server that Start then starts: redis-server from
// PATH, on a free port of 127.0.0.1, with args added to its command line
// after the defaults, which keep nothing on disk (--save "" --appendonly
// no; give "--appendonly", "yes" to keep what it acknowledges).
func NewRedis(args ...string) (*Redis, error) {
	path, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("private redis: no redis-server on PATH: %w", err)
	}
	r := &Redis{path: path}
	if r.Dir, err = os.MkdirTemp("", "jobq-redis-"); err != nil {
		return nil, fmt.Errorf("private redis: %w", err)
	}
	if r.Port, err = FreePort(); err != nil {
		_ = os.RemoveAll(r.Dir)
		return nil, fmt.Errorf("private redis: free port: %w", err)
	}
	r.URL = fmt.Sprintf("redis://127.0.0.1:%d/0", r.Port)
	r.args = append([]string{"--port", strconv.Itoa(r.Port), "--bind", "127.0.0.1", "--dir", r.Dir,
		"--save", "", "--appendonly", "no", "--logfile", r.log()}, args...)
	return r, nil
}

func (r *Redis) log() string { return filepath.Join(r.Dir, "log") }

// Start starts the (stopped) server and returns once it answers PING,
// having loaded its files.
func (r *Redis) Start(ctx context.Context) error {
	cmd := exec.Command(r.path, r.args...)
	cmd.SysProcAttr = r.SysProcAttr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	r.cmd, r.exited = cmd, exited
	ctx, cancel := context.WithTimeout(ctx, StartTimeout)
	defer cancel()
	for {
		err := redisPing(ctx, r.Port)
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			r.cmd = nil
			return errorf(logTail(r.log()), "redis-server on port %d exited at start", r.Port)
		case <-ctx.Done():
			r.Kill()
			return errorf(logTail(r.log()), "redis-server on port %d did not answer: %v", r.Port, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Kill stops the server as a crash does (SIGKILL: what its persistence
// wrote survives) and waits for it to exit. A server that is not running
// is left alone.
func (r *Redis) Kill() {
	if r.cmd == nil {
		return
	}
	_ = r.cmd.Process.Kill()
	<-r.exited
	r.cmd = nil
}

// Close kills the server and removes its directory.
func (r *Redis) Close() {
	r.Kill()
	_ = os.RemoveAll(r.Dir)
}

// Signal sends sig to the running server (SIGSTOP and SIGCONT freeze and
// thaw it, as a server stuck in a long command would be).
func (r *Redis) Signal(sig os.Signal) error {
	if r.cmd == nil {
		return fmt.Errorf("redis-server on port %d is not running", r.Port)
	}
	return r.cmd.Process.Signal(sig)
}
