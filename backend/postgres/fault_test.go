package postgres

import (
	"encoding/binary"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The fault injector sits between pgx and the server (Options.wrapConn)
// and breaks one chosen statement's connection in one of two ways:
//
//   - loseReply: the server receives the statement and runs it to the end
//     (its ReadyForQuery comes back, so an implicit transaction has
//     committed, an explicit one is still open), then the connection drops
//     before the client reads a byte of the reply. The caller sees an
//     error for a write that was applied: a commit whose acknowledgement
//     was lost.
//   - failUnsent: the write fails before a byte of it leaves, the one
//     failure pgx reports as safe to retry (pgconn.SafeToRetry).
//
// It reads the protocol on both sides to tell which write executes the
// statement, and when the server is done with it. A statement is matched
// by its text wherever it executes: in a simple Query, or in a Bind of a
// statement whose Parse this connection saw (pgx prepares a statement once
// per connection and later sends only its name).

// faultMode is how an armed fault breaks the connection.
type faultMode int

const (
	loseReply faultMode = iota + 1
	failUnsent
)

// faultInjector arms one fault at a time for every connection of a
// Backend.
type faultInjector struct {
	mu      sync.Mutex
	pattern string // "" when disarmed
	skip    int    // matching executions to let through first
	mode    faultMode
	fired   chan struct{}
	seen    int // executions of statements matching the last pattern armed
	last    string
}

// arm makes the execution of a statement pattern names (see matches),
// after skip such executions went through, fail as mode says. The
// returned channel is closed when it fired.
func (f *faultInjector) arm(pattern string, skip int, mode faultMode) <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pattern != "" {
		panic("fault injector: armed twice")
	}
	f.pattern, f.skip, f.mode, f.last, f.seen = pattern, skip, mode, pattern, 0
	f.fired = make(chan struct{})
	return f.fired
}

// executions returns how many times a statement matching the pattern armed
// last was executed (sent to the server, or about to be) since arm.
func (f *faultInjector) executions() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seen
}

// take is told of each statement a connection is about to execute and
// says whether the fault fires on it.
func (f *faultInjector) take(query string) (faultMode, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.last != "" && matches(query, f.last) {
		f.seen++
	}
	if f.pattern == "" || !matches(query, f.pattern) {
		return 0, false
	}
	if f.skip > 0 {
		f.skip--
		return 0, false
	}
	f.pattern = ""
	close(f.fired)
	return f.mode, true
}

// matches says whether query is a statement pattern names: one whose text
// contains it, or for a bare keyword (commit, begin) that statement alone,
// since as a substring "commit" is also in the wake-up statement's
// synchronous_commit, which another call may send meanwhile.
func matches(query, pattern string) bool {
	if !strings.ContainsAny(pattern, " \t\n") {
		return strings.EqualFold(strings.TrimSpace(query), pattern)
	}
	return strings.Contains(query, pattern)
}

func (f *faultInjector) wrap(c net.Conn) net.Conn {
	return &faultConn{Conn: c, f: f, stmts: map[string]string{}}
}

// faultConn is one wrapped connection. pgconn never writes from two
// goroutines at once, nor reads from two; a read may run while a write
// does (its background reader during a slow write), so what both sides
// share is atomic.
type faultConn struct {
	net.Conn
	f *faultInjector

	// The client's side, touched by Write alone.
	out     []byte            // the start of a message the next write completes
	started bool              // the startup message, the one without a type byte, went by
	stmts   map[string]string // prepared statement name -> text, as parsed here

	// The server's side, touched by Read alone.
	in []byte // the start of a message header the next read completes
	// inSkip is how many bytes of the current message's body are still to
	// come.
	inSkip int

	owed   atomic.Int64 // ReadyForQuery messages the server still owes
	doomed atomic.Bool  // a lost reply was injected: Read drains and fails
}

// errReset is what the client sees of the dropped connection.
func (c *faultConn) errReset(op string) error {
	return &net.OpError{Op: op, Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: syscall.ECONNRESET}
}

func (c *faultConn) Write(p []byte) (int, error) {
	readies, mode, fire := c.scanOut(p)
	if fire && mode == failUnsent {
		_ = c.Conn.Close()
		return 0, c.errReset("write")
	}
	c.owed.Add(int64(readies))
	if fire {
		// Before the write, so a background read racing it drains too.
		c.doomed.Store(true)
	}
	return c.Conn.Write(p)
}

func (c *faultConn) Read(p []byte) (int, error) {
	if !c.doomed.Load() {
		n, err := c.Conn.Read(p)
		if !c.doomed.Load() {
			c.scanIn(p[:n])
			return n, err
		}
		// The fault was injected while this read waited: one pgx's
		// background reader began during an earlier write slower than
		// 15ms (common on a loaded machine) and left waiting when it
		// was stopped. Every earlier reply was read before the doomed
		// statement was sent, so what it got belongs to the doomed one:
		// swallow it like the rest. (Passed on, it was a lost reply
		// delivered: the call succeeded, and TestLostReplyClaim failed
		// under a CPU hog with err = nil.)
		if c.scanIn(p[:n]) || err != nil {
			_ = c.Conn.Close()
			return 0, c.errReset("read")
		}
	}
	// Let the server finish all it was sent (so a commit is durable and
	// an open transaction waits for its end), swallowing its replies, then
	// cut. A COPY waiting for its rows would wait for ever: cut there.
	buf := make([]byte, 4096)
	for c.owed.Load() > 0 {
		n, err := c.Conn.Read(buf)
		if c.scanIn(buf[:n]) || err != nil {
			break
		}
	}
	_ = c.Conn.Close()
	return 0, c.errReset("read")
}

// scanOut parses the client's messages in p: it returns how many of them
// the server answers with a ReadyForQuery, and whether the fault fires on
// one of them and how.
func (c *faultConn) scanOut(p []byte) (readies int, mode faultMode, fire bool) {
	c.out = append(c.out, p...)
	for {
		if !c.started {
			if len(c.out) < 4 {
				return
			}
			n := int(binary.BigEndian.Uint32(c.out))
			if len(c.out) < n {
				return
			}
			c.out, c.started = c.out[n:], true
			readies++ // the server says ReadyForQuery once logged in
			continue
		}
		if len(c.out) < 5 {
			return
		}
		n := 1 + int(binary.BigEndian.Uint32(c.out[1:]))
		if len(c.out) < n {
			return
		}
		typ, body := c.out[0], c.out[5:n]
		c.out = c.out[n:]
		var exec string
		switch typ {
		case 'Q': // Query: text
			readies++
			exec = cstring(body, 0)
		case 'S': // Sync
			readies++
		case 'P': // Parse: name, text, …
			name := cstring(body, 0)
			c.stmts[name] = cstring(body, len(name)+1)
		case 'B': // Bind: portal, statement, …
			portal := cstring(body, 0)
			exec = c.stmts[cstring(body, len(portal)+1)]
		case 'C': // Close: 'S' and a statement name, or 'P' and a portal
			if len(body) > 0 && body[0] == 'S' {
				delete(c.stmts, cstring(body, 1))
			}
		}
		if exec != "" && !fire {
			mode, fire = c.f.take(exec)
		}
	}
}

// scanIn counts the ReadyForQuery messages in the server's bytes p and
// reports whether one of them asks the client for COPY data.
func (c *faultConn) scanIn(p []byte) (copyIn bool) {
	for len(p) > 0 {
		if c.inSkip > 0 {
			k := min(c.inSkip, len(p))
			c.inSkip -= k
			p = p[k:]
			continue
		}
		k := min(5-len(c.in), len(p))
		c.in = append(c.in, p[:k]...)
		p = p[k:]
		if len(c.in) < 5 {
			return
		}
		switch c.in[0] {
		case 'Z':
			c.owed.Add(-1)
		case 'G', 'W': // CopyInResponse, CopyBothResponse
			copyIn = true
		}
		c.inSkip = int(binary.BigEndian.Uint32(c.in[1:])) - 4
		c.in = c.in[:0]
	}
	return
}

// cstring reads the NUL-terminated string at b[i:].
func cstring(b []byte, i int) string {
	if i > len(b) {
		return ""
	}
	b = b[i:]
	for j, x := range b {
		if x == 0 {
			return string(b[:j])
		}
	}
	return string(b)
}

// wantFired fails the test unless the armed fault fired.
func wantFired(t *testing.T, fired <-chan struct{}) {
	t.Helper()
	select {
	case <-fired:
	case <-time.After(time.Second):
		t.Fatal("the armed fault never fired: the statement was not executed")
	}
}
