//go:build !(linux || darwin || dragonfly || freebsd || netbsd || openbsd || solaris || illumos)

package redis

import "syscall"

// peekDead cannot look at a socket without reading it here: a connection
// the server closed while idle fails its next call.
func peekDead(syscall.RawConn) error { return nil }
