package redistest

import (
	"context"
	"testing"

	"github.com/jobq/jobq/internal/localserver"
)

// Server is a private redis-server in a temporary directory, on its own
// port, for tests that stop, restart or reconfigure the server. It is
// stopped and its directory removed when the test that started it ends.
type Server struct {
	// URL reaches the server's database 0.
	URL  string
	Port int
	Dir  string // the working directory: AOF and RDB files live here

	tb testing.TB
	r  *localserver.Redis
}

// StartServer starts redis-server (looked up on PATH) with args added to
// its command line (e.g. "--appendonly", "yes"); by default it keeps
// nothing on disk (--save "" --appendonly no). When there is no
// redis-server the test is skipped (failed under CI=true).
func StartServer(tb testing.TB, args ...string) *Server {
	tb.Helper()
	r, err := localserver.NewRedis(args...)
	if err != nil {
		Unavailable(tb, "redistest: %v", err)
	}
	tb.Cleanup(r.Close)
	s := &Server{URL: r.URL, Port: r.Port, Dir: r.Dir, tb: tb, r: r}
	s.Start()
	return s
}

// Start starts the (stopped) server on its port and waits until it
// answers.
func (s *Server) Start() {
	s.tb.Helper()
	if err := s.r.Start(context.Background()); err != nil {
		s.tb.Fatalf("redistest: %v", err)
	}
}

// Stop kills the server (SIGKILL: what a crash does; whatever the AOF
// holds survives) and waits for it to exit.
func (s *Server) Stop() {
	s.tb.Helper()
	s.r.Kill()
}

// Restart kills the server and starts it again on the same port and
// directory.
func (s *Server) Restart() {
	s.tb.Helper()
	s.r.Kill()
	s.Start()
}
