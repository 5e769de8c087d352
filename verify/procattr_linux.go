package verify

import "syscall"

// procAttr puts a worker in a process group of its own, so a Ctrl-C in
// the terminal reaches the verifier alone (which stops the workers in
// order), and has the kernel kill it should the verifier die without
// stopping it (a worker it had stopped would otherwise stay frozen).
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
