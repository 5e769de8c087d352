//go:build unix

package redistest

import "syscall"

// Pause freezes the server (SIGSTOP): it keeps its connections but
// answers nothing, as a server stuck in a long command or a network that
// drops packets does, until Resume.
func (s *Server) Pause() {
	s.tb.Helper()
	if err := s.r.Signal(syscall.SIGSTOP); err != nil {
		s.tb.Fatalf("redistest: pause redis-server: %v", err)
	}
}

// Resume lets a paused server go on (SIGCONT).
func (s *Server) Resume() {
	s.tb.Helper()
	if err := s.r.Signal(syscall.SIGCONT); err != nil {
		s.tb.Fatalf("redistest: resume redis-server: %v", err)
	}
}
