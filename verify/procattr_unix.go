//go:build unix && !linux

package verify

import "syscall"

// procAttr puts a worker in a process group of its own, so a Ctrl-C in
// the terminal reaches the verifier alone, which stops the workers in
// order. (A worker outliving a killed verifier sees its stdin close and
// stops.)
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
