//go:build unix

package verify

import (
	"os"
	"syscall"
)

// stopProcess freezes p (SIGSTOP): it keeps its connections and its
// leases run out, as a process stuck in a long GC pause, swapped out or
// on a frozen VM does.
func stopProcess(p *os.Process) error { return p.Signal(syscall.SIGSTOP) }

// continueProcess lets a stopped process go on (SIGCONT).
func continueProcess(p *os.Process) error { return p.Signal(syscall.SIGCONT) }

// terminateProcess asks p to stop gracefully (SIGTERM).
func terminateProcess(p *os.Process) error { return p.Signal(syscall.SIGTERM) }
