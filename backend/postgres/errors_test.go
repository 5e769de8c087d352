package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/jobq/jobq/backend"
)

// TestMapErrorRedacts: every error the backend returns passes through
// mapError, which scrubs the URL's secrets from any driver text that
// quotes them (pgx itself redacts what it quotes today; this is what
// keeps a driver that does not from leaking them) and still unwraps to the
// sentinels.
func TestMapErrorRedacts(t *testing.T) {
	t.Parallel()
	const rawURL = "postgres://app:s3cret-pw-4411@db.example:5432/jobs?sslpassword=tok-8812"
	b := &Backend{url: rawURL, host: "db.example:5432"}
	driverErr := fmt.Errorf("connect %s: %w", rawURL, errors.New("password tok-8812 refused for s3cret-pw-4411"))
	err := b.mapError(context.Background(), "claim jobs", driverErr)
	if msg := err.Error(); strings.Contains(msg, "s3cret-pw-4411") || strings.Contains(msg, "tok-8812") || !strings.Contains(msg, "claim jobs") {
		t.Fatalf("mapError = %q; want the operation without the secrets", msg)
	}
	if !errors.Is(err, driverErr) {
		t.Fatalf("mapError's result does not unwrap to the driver's error")
	}
	timedOut, cancel := context.WithTimeoutCause(context.Background(), 0, errQueryTimeout)
	defer cancel()
	if err := b.mapError(timedOut, "claim jobs", driverErr); !errors.Is(err, backend.ErrUnavailable) {
		t.Fatalf("mapError of a timed-out call = %v, want ErrUnavailable", err)
	}
}

// TestMapErrorDataException: data the server refuses (class 22: invalid
// text, a value out of range) maps to ErrInvalidInput, which the runtime's
// completer takes as its cue to split a batch and isolate the outcome the
// server refused, and is not retried.
func TestMapErrorDataException(t *testing.T) {
	t.Parallel()
	b := &Backend{host: "db.example:5432"}
	refused := &pgconn.PgError{Code: "22021", Message: `invalid byte sequence for encoding "UTF8": 0x00`}
	err := b.mapError(context.Background(), "complete jobs", refused)
	if !errors.Is(err, backend.ErrInvalidInput) || !strings.Contains(err.Error(), "0x00") {
		t.Fatalf("mapError = %v, want ErrInvalidInput with the server's message", err)
	}
	if retryable(refused) {
		t.Fatal("a data exception is retried as it is")
	}
}

// TestOneLineSaysEachAttemptOnce: pgconn lists every connection attempt
// on a line of its own; attempts that failed alike (TLS then plain, on
// one refused port) are said once, different ones all.
func TestOneLineSaysEachAttemptOnce(t *testing.T) {
	refused := "127.0.0.1:5499 (127.0.0.1): dial error: dial tcp 127.0.0.1:5499: connect: connection refused"
	for _, tc := range []struct{ in, want string }{
		{"failed to connect to `user=postgres database=test`:\n\t" + refused + "\n\t" + refused,
			"failed to connect to `user=postgres database=test`: " + refused},
		{"failed to connect:\n\ta: refused\n\tb: timeout", "failed to connect: a: refused; b: timeout"},
	} {
		if got := (oneLine{errors.New(tc.in)}).Error(); got != tc.want {
			t.Errorf("oneLine(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
