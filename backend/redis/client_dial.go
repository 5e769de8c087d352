package redis

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"
)

// dialer makes the client's connections (rueidis's DialCtxFn) and keeps
// every network step of Open within Open's context and the call timeout.
//
// rueidis dials the connection NewClient makes under context.Background,
// and runs each new connection's AUTH, HELLO and SELECT under a timer of
// its own (the dial timeout, the call timeout here), so neither sees
// Open's context: a caller's deadline or a signal would wait for the
// timeout, and a TLS handshake that nothing bounded (a server that never
// answers the ClientHello, as a plain Redis does not) hung for good. So,
// while Open runs, the dialer closes the connections it made as soon as
// Open's context ends, which fails whatever step was waiting on them; and
// every TLS handshake has a deadline on its socket.
type dialer struct {
	timeout time.Duration // bounds the TCP dial (net.Dialer) and the TLS handshake

	mu      sync.Mutex
	opening context.Context // Open's, until opened; nil after
	aborted bool            // opening ended: its connections are closed, no more are made
	conns   []net.Conn      // made while opening
	unwatch func() bool
}

// newDialer returns a dialer that watches ctx (Open's) until opened.
func newDialer(ctx context.Context, timeout time.Duration) *dialer {
	d := &dialer{timeout: timeout, opening: ctx}
	d.unwatch = context.AfterFunc(ctx, d.abort)
	return d
}

// abort closes the connections made while opening, as its context ended.
func (d *dialer) abort() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.opening == nil {
		return
	}
	d.aborted = true
	for _, c := range d.conns {
		_ = c.Close()
	}
	d.conns = nil
}

// opened ends the watch of Open's context. It reports false when that
// context ended first: connections of the client may have been closed
// under it, so Open must fail.
func (d *dialer) opened() bool {
	ok := d.unwatch()
	d.mu.Lock()
	defer d.mu.Unlock()
	ok = ok && !d.aborted
	d.opening, d.conns = nil, nil
	return ok
}

// isOpening reports whether Open is still running.
func (d *dialer) isOpening() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.opening != nil
}

// track notes a connection made while opening, so that the end of Open's
// context closes it; false means that end came first (conn is not kept).
func (d *dialer) track(conn net.Conn) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.opening == nil {
		return true
	}
	if d.aborted {
		return false
	}
	d.conns = append(d.conns, conn)
	return true
}

// dial dials as rueidis does, with a checkedConn between the socket and
// TLS, if any.
func (d *dialer) dial(ctx context.Context, dst string, nd *net.Dialer, cfg *tls.Config) (net.Conn, error) {
	d.mu.Lock()
	octx := d.opening
	d.mu.Unlock()
	if octx != nil {
		if octx.Err() != nil {
			return nil, context.Cause(octx)
		}
		dctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		defer context.AfterFunc(octx, func() { cancel(context.Cause(octx)) })()
		ctx = dctx
	}
	conn, err := dialChecked(ctx, dst, nd)
	if err != nil {
		return nil, err
	}
	if !d.track(conn) {
		_ = conn.Close()
		return nil, context.Cause(octx)
	}
	if cfg == nil {
		return conn, nil
	}
	return d.handshake(ctx, octx, conn, dst, cfg)
}

// dialChecked dials a plain connection, wrapped in a checkedConn.
func dialChecked(ctx context.Context, dst string, nd *net.Dialer) (*checkedConn, error) {
	conn, err := nd.DialContext(ctx, "tcp", dst)
	if err != nil {
		return nil, err
	}
	cc := &checkedConn{Conn: conn, dialed: time.Now()}
	if sc, ok := conn.(syscall.Conn); ok {
		cc.rc, _ = sc.SyscallConn()
	}
	return cc, nil
}

// handshake starts TLS on conn. A deadline on the socket bounds it: the
// call timeout, or the earlier deadline of ctx or of Open's context octx
// (nil after Open); HandshakeContext alone ends only when ctx does, and
// rueidis gives no deadline to the dial NewClient makes.
func (d *dialer) handshake(ctx, octx context.Context, conn *checkedConn, dst string, cfg *tls.Config) (net.Conn, error) {
	// Under TLS the server may send data unasked (session tickets), so
	// only a plain connection is checked, as go-redis did.
	conn.rc = nil
	if cfg.ServerName == "" {
		// As tls.Dial does: verify the name dialled.
		host, _, err := net.SplitHostPort(dst)
		if err != nil {
			host = dst
		}
		cfg = cfg.Clone()
		cfg.ServerName = host
	}
	start := time.Now()
	deadline := start.Add(d.timeout)
	for _, c := range []context.Context{ctx, octx} {
		if c == nil {
			continue
		}
		if dl, ok := c.Deadline(); ok && dl.Before(deadline) {
			deadline = dl
		}
	}
	_ = conn.SetDeadline(deadline)
	tc := tls.Client(conn, cfg)
	err := tc.HandshakeContext(ctx)
	if err == nil {
		err = conn.SetDeadline(time.Time{})
	}
	if err != nil {
		_ = conn.Close()
		return nil, tlsHandshakeError(ctx, octx, err, time.Since(start))
	}
	return tc, nil
}

// connError is the failure of a connection's start (its TLS handshake,
// or the first reply of a plain one) that says what went wrong and, when
// the likely cause is a TLS URL for a plain port or the reverse, which
// scheme to use: classify makes it backend.ErrUnavailable.
type connError struct {
	hint string
	err  error // shown after the hint unless nil
	raw  error // what it unwraps to
}

func (e *connError) Error() string {
	if e.err == nil {
		return e.hint
	}
	return e.hint + ": " + e.err.Error()
}

func (e *connError) Unwrap() error { return e.raw }

// plainHint names the scheme to use when the server did not answer a
// TLS handshake as a TLS server does.
const plainHint = "is it a plain port? use redis:// for one without TLS"

// tlsHandshakeError explains a TLS handshake under ctx that failed with
// err after took; octx is Open's context (nil after Open).
func tlsHandshakeError(ctx, octx context.Context, err error, took time.Duration) error {
	// The end of Open's context ends the handshake by cancelling ctx or
	// by closing the connection (see abort), whichever comes first.
	if octx != nil && errors.Is(octx.Err(), context.Canceled) {
		return context.Cause(octx) // a signal, not a silent server
	}
	deadline := octx != nil && errors.Is(octx.Err(), context.DeadlineExceeded)
	if !deadline && errors.Is(ctx.Err(), context.Canceled) {
		return err
	}
	var netErr net.Error
	var rhe tls.RecordHeaderError
	switch {
	case deadline || errors.Is(err, context.DeadlineExceeded) || errors.As(err, &netErr) && netErr.Timeout():
		return &connError{hint: fmt.Sprintf("no answer to the TLS handshake within %s: %s", waited(took), plainHint), raw: err}
	case errors.As(err, &rhe):
		return &connError{hint: "the server answered the TLS handshake in another protocol: " + plainHint, err: err, raw: err}
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET):
		return &connError{hint: "the server closed the connection during the TLS handshake: " + plainHint, err: err, raw: err}
	}
	return &connError{hint: "TLS handshake", err: err, raw: err}
}

// waited is how long a dial waited for an answer, as its error says it:
// cut down to whole seconds from one second on, so a 1s limit reads 1s
// however late a loaded machine ran the timer (what was waited is at
// least that).
func waited(took time.Duration) time.Duration {
	if took >= time.Second {
		return took.Truncate(time.Second)
	}
	return took.Round(100 * time.Millisecond)
}

// plainOpenError explains the failure of the first reply of a plain
// connection (redis://) when the server closed it unanswered or answered
// in another protocol, as a TLS port does; other errors come back as they
// are.
func plainOpenError(err error) error {
	var me *connError
	switch {
	case errors.As(err, &me):
		return err
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET):
		return &connError{hint: "the server closed the connection without a reply: is it a TLS port (use rediss://), or not a Redis server at all?", err: err, raw: err}
	case strings.Contains(err.Error(), "unknown message type"):
		return &connError{hint: "the server answered in another protocol: is it a TLS port (use rediss://), or not a Redis server at all?", err: err, raw: err}
	}
	return err
}
