// Package localserver starts private PostgreSQL and Redis servers on this
// machine, each in a temporary directory on a free port, for the callers
// that must stop, kill and restart a server without disturbing a shared
// one: the backends' fault tests (through pgtest and redistest) and
// jobq verify's restart fault.
package localserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// StartTimeout bounds a server's start, PostgreSQL's crash recovery after
// an immediate stop and Redis's loading of its append-only file included.
const StartTimeout = 60 * time.Second

// FreePort asks the kernel for a port of 127.0.0.1 that is free right now.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// lastLines is the last n lines of s: the end of a server's log for an
// error.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// logTail is the end of the log file at path, or "" when there is none.
func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return lastLines(string(b), 20)
}

// redisPing sends PING in Redis's protocol and wants +PONG: a server still
// loading its append-only file answers -LOADING instead.
func redisPing(ctx context.Context, port int) error {
	d := net.Dialer{Timeout: time.Second}
	c, err := d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return errors.New(strings.TrimSpace(line))
	}
	return nil
}

// errorf wraps err with what was being done and the end of a log.
func errorf(log, format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	if log != "" {
		err = fmt.Errorf("%w\n%s", err, log)
	}
	return err
}
