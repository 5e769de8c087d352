package redis

import (
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/rueidis"
)

// staleConnError is the failure of a write to a connection that was
// found dead before anything was written to it.
type staleConnError struct{ err error }

func (e *staleConnError) Error() string {
	return "connection closed while idle: " + e.err.Error()
}

func (e *staleConnError) Unwrap() error { return e.err }

func isStaleConn(err error) bool {
	var s *staleConnError
	return err != nil && errors.As(err, &s)
}

// checkedConn keeps a pooled connection that the server closed while it
// was idle (a restart, an idle timeout) from failing the call that takes
// it next, as go-redis's pool did: before a write on a connection idle for
// checkIdle or more it looks whether the socket has anything to read,
// which it should not between a reply and the next command, and fails the
// write, before anything is sent, when it has (see do). The look is a
// system call, a noticeable share of a round trip (docs/performance.md), so
// a busy connection goes without it: a server that restarts within
// checkIdle of a call fails the next call on that connection once, as any
// dropped connection does. A connection whose reads run beside its writes
// (pub/sub, pipelining) may have data in flight, so once seen so it is not
// checked again.
//
// Only the first write after a read is checked, before any byte of the
// request goes out. rueidis writes a request larger than its buffer (a
// pipeline, a large batch) in several writes, and by the second the
// server may have run the pipeline's first command and sent its reply:
// that reply, found on the socket, would fail the write as if the
// connection had died unused, and do would send the whole pipeline again,
// running its first command twice.
type checkedConn struct {
	net.Conn
	rc      syscall.RawConn // nil: never checked
	reading atomic.Bool
	async   atomic.Bool
	wrote   atomic.Bool  // a request is being written: bytes went out since the last read
	used    atomic.Int64 // when its last reply was read (ns since dial)
	dialed  time.Time
}

// checkIdle is how long a connection is idle before a write looks
// whether the server closed it.
const checkIdle = time.Second

func (c *checkedConn) Read(b []byte) (int, error) {
	c.reading.Store(true)
	n, err := c.Conn.Read(b)
	c.reading.Store(false)
	c.wrote.Store(false)
	c.used.Store(int64(time.Since(c.dialed)))
	return n, err
}

func (c *checkedConn) Write(b []byte) (int, error) {
	if c.reading.Load() {
		c.async.Store(true)
	} else if c.rc != nil && !c.async.Load() && !c.wrote.Load() && time.Since(c.dialed)-time.Duration(c.used.Load()) >= checkIdle {
		if err := peekDead(c.rc); err != nil {
			return 0, &staleConnError{err}
		}
	}
	c.wrote.Store(true)
	return c.Conn.Write(b)
}

// faultFunc is the client's fault-injection hook, for tests of writes
// whose outcome the caller cannot know. It sees every command twice:
// before it is sent (sent false), when an error fails it unsent, as a
// connection found dead does; and once its reply came (sent true), when an
// error replaces that reply and those of the commands after it in the same
// pipeline, as a connection lost while reading them would: the command
// ran, and its caller sees a failure.
type faultFunc func(cmd faultCmd, sent bool) error

// faultCmd is a command as the fault hook sees it.
type faultCmd struct {
	name   string // the command, upper case: EVALSHA, EVAL, MULTI, …
	script string // for EVALSHA and EVAL, the script's name ("" if unknown)
}

// describe names cmd for the fault hook; only called when one is set.
func describe(cmd rueidis.Completed) faultCmd {
	args := cmd.Commands()
	fc := faultCmd{name: strings.ToUpper(args[0])}
	if len(args) > 1 {
		switch fc.name {
		case "EVALSHA":
			fc.script = scriptBySHA()[args[1]]
		case "EVAL":
			sum := sha1.Sum([]byte(args[1]))
			fc.script = scriptBySHA()[hex.EncodeToString(sum[:])]
		}
	}
	return fc
}

// scriptBySHA maps each script's SHA1 to its name.
var scriptBySHA = sync.OnceValue(func() map[string]string {
	m := make(map[string]string, len(allScripts))
	for _, s := range allScripts {
		m[s.sha] = s.name
	}
	return m
})

// notSentError is the failure of a command that never reached the server,
// so nothing of it ran: its caller may undo what it prepared for it (the
// unique keys reserved for an insert). Any other failure of a write leaves
// its outcome unknown: it may have run and its reply been lost.
type notSentError struct{ err error }

func (e *notSentError) Error() string { return e.err.Error() }
func (e *notSentError) Unwrap() error { return e.err }

// isNotSent reports whether err says its command never reached the
// server.
func isNotSent(err error) bool {
	var ns *notSentError
	return err != nil && errors.As(err, &ns)
}

// unsent marks the errors of commands the client knows it did not send:
// none of it was written to a connection (a connection found dead before
// the write, every try), or no connection could be made.
func unsent(r rueidis.RedisResult) rueidis.RedisResult {
	err := r.Error()
	if err == nil || isNotSent(err) {
		return r
	}
	var op *net.OpError
	if isStaleConn(err) || (errors.As(err, &op) && op.Op == "dial") || errors.Is(err, rueidis.ErrNoAddr) {
		return rueidis.NewErrorResult(&notSentError{err})
	}
	return r
}
