//go:build !unix

package redistest

// Pause would freeze the server; without SIGSTOP the test is skipped.
func (s *Server) Pause() {
	s.tb.Helper()
	s.tb.Skip("redistest: pausing redis-server needs SIGSTOP (a Unix system)")
}

// Resume lets a paused server go on; see Pause.
func (s *Server) Resume() {}
