//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd || solaris || illumos

package redis

import (
	"errors"
	"io"
	"syscall"
)

// peekDead reports whether an idle connection, which should have nothing
// to read, was closed by the server (EOF) or has anything to read at all
// (an error or a reply nothing asked for): either way it cannot carry a
// command. It does not block and takes nothing from the socket.
func peekDead(rc syscall.RawConn) error {
	var dead error
	err := rc.Control(func(fd uintptr) {
		var buf [1]byte
		n, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case n == 0 && err == nil:
			dead = io.EOF
		case n > 0:
			dead = errors.New("unexpected data on an idle connection")
		case err == syscall.EAGAIN || err == syscall.EWOULDBLOCK:
		default:
			dead = err
		}
	})
	if err != nil {
		return err
	}
	return dead
}
