package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/jobq/jobq/backend"
)

// errQueryTimeout is the cause of a context that ran out of QueryTimeout,
// as opposed to the caller's own deadline.
var errQueryTimeout = errors.New("query timeout")

// mapError turns a driver error from operation op into jobq's vocabulary.
// It is the only place that inspects pgx, pgconn and network errors:
//
//   - calls after Close: backend.ErrClosed;
//   - the caller's context ended: its error, wrapped (and, for a
//     deadline that ends Open, backend.ErrUnavailable too);
//   - QueryTimeout ran out, the server could not be reached, refused the
//     login, does not have the database, is shutting down, or the
//     connection broke: backend.ErrUnavailable, naming the host (and the
//     likely fix when the URL's TLS setting does not match the server's:
//     see tlsHint);
//   - bad data the server refused (invalid JSON text, a NUL byte):
//     backend.ErrInvalidInput;
//   - a missing table or schema: a *backend.SchemaError (ErrNoSchema);
//   - anything else (a bug): wrapped as is.
//
// The text never shows the URL's secrets (see redactError). ctx is the
// context the failed call ran under (after QueryTimeout was applied), so a
// timeout can be told from a cancellation.
func (b *Backend) mapError(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	return backend.RedactError(b.classify(ctx, op, err), b.url)
}

// classify is mapError before redaction.
func (b *Backend) classify(ctx context.Context, op string, err error) error {
	if b.closed.Load() {
		return fmt.Errorf("%s: %w", op, backend.ErrClosed)
	}
	if errors.Is(err, backend.ErrNotFound) || errors.Is(err, backend.ErrInvalidInput) ||
		errors.Is(err, backend.ErrSchemaTooNew) || errors.Is(err, backend.ErrUnavailable) {
		return fmt.Errorf("%s: %w", op, err)
	}
	if ctx != nil && ctx.Err() != nil {
		if errors.Is(context.Cause(ctx), errQueryTimeout) {
			return fmt.Errorf("%s: %w: postgres at %s did not answer within the query timeout: %w",
				op, backend.ErrUnavailable, b.host, context.DeadlineExceeded)
		}
		if b.opening.Load() && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			// Open's caller gave the server this long: to Open, no answer
			// in time is a server unavailable, as with the query timeout.
			return fmt.Errorf("%s: %w: postgres at %s did not answer before the deadline: %w",
				op, backend.ErrUnavailable, b.host, context.Cause(ctx))
		}
		return fmt.Errorf("%s: %w", op, context.Cause(ctx))
	}
	if unavailable(err) {
		return fmt.Errorf("%s: %w: postgres at %s: %w%s", op, backend.ErrUnavailable, b.host, oneLine{err}, tlsHint(err))
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case strings.HasPrefix(pgErr.Code, "22"): // data exception
			return fmt.Errorf("%s: %w: %s", op, backend.ErrInvalidInput, pgErr.Message)
		case pgErr.Code == "42P01" || pgErr.Code == "3F000": // undefined table / schema
			// A store opened without migrating (NoMigrate) or dropped
			// since: a schema problem the caller can act on, not a bug.
			return fmt.Errorf("%s: %w", op, b.schemaError(0, pgErr.Message))
		}
	}
	return fmt.Errorf("%s: %w", op, err)
}

// unavailable reports whether err means the server could not be used at all
// (as opposed to refusing one statement).
func unavailable(err error) bool {
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case strings.HasPrefix(pgErr.Code, "08"): // connection exception
			return true
		case strings.HasPrefix(pgErr.Code, "28"): // invalid authorization
			return true
		case strings.HasPrefix(pgErr.Code, "57P"): // admin/crash shutdown, cannot connect now
			return true
		case pgErr.Code == "3D000": // database does not exist
			return true
		case pgErr.Code == "53300": // too many connections
			return true
		}
		return false
	}
	if errors.Is(err, pgconn.ErrConnClosed) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE) {
		return true
	}
	var netErr net.Error
	return errors.As(err, &netErr)
}

// retryable reports whether the statement that failed with err can simply
// be sent again: it never reached the server, or the server rolled it back
// for a serialization failure or a deadlock.
//
// pgconn.SafeToRetry alone does not tell the first: when the connection
// breaks while pgx awaits the reply to a statement sent by the simple
// protocol (every COMMIT, and Exec without arguments), pgx closes it and
// then reports the statement as failed on a closed connection, an error
// (wrapping pgconn.ErrConnClosed) that it calls safe to retry, although
// the statement was sent and may have committed (see TestLostReplyReplay
// and TestLostReplyBatchInsert). Such an error is retried only when it
// ended a BEGIN (see Backend.inTx), which changes nothing: the case of a
// pooled connection that died while idle.
func retryable(err error) bool {
	if errors.Is(err, pgconn.ErrConnClosed) {
		var begin beginError
		return errors.As(err, &begin)
	}
	if pgconn.SafeToRetry(err) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code == "40001" || pgErr.Code == "40P01"
	}
	return false
}

// beginError is the failure of the BEGIN of a transaction (see
// Backend.inTx): nothing of the transaction ran.
type beginError struct{ err error }

func (e beginError) Error() string { return "begin: " + e.err.Error() }

func (e beginError) Unwrap() error { return e.err }

// oneLine shows a driver error on one line: pgconn lists each address it
// tried on a line of its own, and a log line or a command's error must
// stay one line. An attempt that failed as an earlier one did (sslmode
// prefer tries TLS, then plain, on one refused port) is said once.
type oneLine struct{ err error }

func (e oneLine) Error() string {
	s := strings.NewReplacer(":\n\t", ": ", "\n\t", "; ", "\n", "; ").Replace(e.err.Error())
	parts := strings.Split(s, "; ")
	kept := parts[:1]
	for _, p := range parts[1:] {
		if !slices.ContainsFunc(kept, func(k string) bool { return strings.HasSuffix(k, p) }) {
			kept = append(kept, p)
		}
	}
	return strings.Join(kept, "; ")
}

func (e oneLine) Unwrap() error { return e.err }

// tlsHint is what to add to the error of a connection that failed the
// way a TLS setting at odds with the server's makes it fail, naming the
// likely fix; "" for any other error. pgx's own text names the step
// ("server refused TLS connection", "failed to receive message") but not
// the cause.
func tlsHint(err error) string {
	var connectErr *pgconn.ConnectError
	var pgErr *pgconn.PgError
	if !errors.As(err, &connectErr) || errors.As(err, &pgErr) {
		return ""
	}
	switch {
	case strings.Contains(err.Error(), "server refused TLS connection"):
		return " (the server does not accept TLS: is ssl off on it? use sslmode=disable or prefer for a plain one)"
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET):
		return " (the server closed the connection without a PostgreSQL reply: is it a TLS-only port? use sslnegotiation=direct&sslmode=require for one)"
	}
	return ""
}
