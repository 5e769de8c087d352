package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// Server is a private redis-server in a temporary directory, on its own
// port, for tests that stop, restart or reconfigure the server. It is
// stopped and its directory removed when the test that started it ends.
type Server struct {
	// URL reaches the server's database 0.
	URL  string
	Port int
	Dir  string // the working directory: AOF and RDB files live here

	tb   testing.TB
	args []string
	cmd  *exec.Cmd
}

// StartServer starts redis-server (looked up on PATH) with args added to
// its command line (e.g. "--appendonly", "yes"); by default it keeps
// nothing on disk (--save "" --appendonly no). When there is no
// redis-server the test is skipped (failed under CI=true).
func StartServer(tb testing.TB, args ...string) *Server {
	tb.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		Unavailable(tb, "no redis-server for a private server: %v", err)
	}
	dir, err := os.MkdirTemp("", "jobq-redistest-")
	if err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	port, err := freePort()
	if err != nil {
		tb.Fatalf("redistest: free port: %v", err)
	}
	s := &Server{URL: fmt.Sprintf("redis://127.0.0.1:%d/0", port), Port: port, Dir: dir, tb: tb}
	s.args = append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
		"--save", "", "--appendonly", "no", "--logfile", filepath.Join(dir, "log")}, args...)
	tb.Cleanup(func() {
		s.kill()
		_ = os.RemoveAll(dir)
	})
	s.Start()
	return s
}

// Start starts the (stopped) server on its port and waits until it
// answers.
func (s *Server) Start() {
	s.tb.Helper()
	s.cmd = exec.Command("redis-server", s.args...)
	if err := s.cmd.Start(); err != nil {
		s.tb.Fatalf("redistest: start redis-server: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := Client(s.URL)
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			err = c.Do(ctx, c.B().Ping().Build()).Error()
			cancel()
			c.Close()
		}
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(s.Dir, "log"))
			s.tb.Fatalf("redistest: redis-server on port %d did not answer: %v\n%s", s.Port, err, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop kills the server (SIGKILL: what a crash does; whatever the AOF
// holds survives) and waits for it to exit.
func (s *Server) Stop() {
	s.tb.Helper()
	s.kill()
}

// Restart kills the server and starts it again on the same port and
// directory.
func (s *Server) Restart() {
	s.tb.Helper()
	s.kill()
	s.Start()
}

func (s *Server) kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// freePort asks the kernel for a port that is free right now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
