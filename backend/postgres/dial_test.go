package postgres

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/jobq/jobq/internal/netfake"
)

// Tests that every network step of Open ends within the URL's
// connect_timeout and the caller's context, against servers that never
// answer and against a TLS setting at odds with the server's (issue 35).
// The misbehaving servers come from internal/netfake; plainServer is a
// PostgreSQL port without TLS.

// openBound is how long an Open given 1 s (connect_timeout or deadline)
// may take against a server that never answers: about 1 s, with room for
// a loaded machine.
const openBound = 5 * time.Second

// plainServer is a PostgreSQL port without TLS: it refuses a client's
// SSLRequest with 'N', as a server with ssl off does, and then answers
// nothing more.
func plainServer(t *testing.T) string {
	return netfake.Serve(t, func(c net.Conn) {
		req := make([]byte, 8)
		if _, err := io.ReadFull(c, req); err != nil {
			return
		}
		if req[4] == 0x04 && req[5] == 0xd2 && req[6] == 0x16 && req[7] == 0x2f { // 80877103, SSLRequest
			_, _ = c.Write([]byte{'N'})
		}
	})
}

// openFails opens url under ctx and checks that it fails with
// backend.ErrUnavailable, saying want, within openBound.
func openFails(t *testing.T, ctx context.Context, url, want string) time.Duration {
	t.Helper()
	return netfake.OpenFails(t, openBound, url, want, func() (io.Closer, error) { return Open(ctx, url, Options{}) })
}

// deadline is a context that ends after d.
func deadline(t *testing.T, d time.Duration) context.Context { return netfake.Deadline(t, d) }

// TestOpenSilentServer: a server that accepts and never answers fails
// Open with ErrUnavailable after connect_timeout, or the caller's
// deadline when it comes first (connect_timeout and the query timeout
// being 10 s by default), whether TLS is tried first (sslmode=prefer,
// pgx's default) or not.
func TestOpenSilentServer(t *testing.T) {
	addr := netfake.Silent(t)
	base := "postgres://postgres@" + addr + "/test"
	for _, tc := range []struct {
		name, url string
		ctxLimit  time.Duration // 0: none
		want      string
	}{
		{"ConnectTimeout", base + "?connect_timeout=1", 0, "tls error: timeout"},
		{"ConnectTimeoutNoTLS", base + "?sslmode=disable&connect_timeout=1", 0, "failed to receive message: timeout"},
		{"Deadline", base, time.Second, "did not answer before the deadline"},
		{"DeadlineNoTLS", base + "?sslmode=disable", time.Second, "did not answer before the deadline"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			if tc.ctxLimit > 0 {
				ctx = deadline(t, tc.ctxLimit)
			}
			if took := openFails(t, ctx, tc.url, tc.want); took < 900*time.Millisecond {
				t.Fatalf("Open failed after %s, before the 1s it was given", took)
			}
		})
	}
}

// TestOpenTLSToPlainServer: sslmode=require for a port without TLS fails
// at once (the server refuses the SSLRequest), saying that ssl may be off
// on it. The shared test server has ssl on, so a port of the test's own
// stands for one without.
func TestOpenTLSToPlainServer(t *testing.T) {
	url := "postgres://postgres@" + plainServer(t) + "/test?sslmode=require"
	const want = "server refused TLS connection (the server does not accept TLS: is ssl off on it? use sslmode=disable or prefer"
	openFails(t, t.Context(), url+"&connect_timeout=1", want)
	openFails(t, deadline(t, time.Second), url, want)
}

// TestOpenPlainToTLSServer: a plain connection (sslmode=disable, or
// prefer, whose SSLRequest a TLS-only port does not understand either) to
// a TLS-only port fails at once, the port closing it, saying that it may
// be a TLS-only port; a TLS connection to it that completes the handshake
// and then meets silence (the startup message unanswered) fails within
// connect_timeout or the caller's deadline.
func TestOpenPlainToTLSServer(t *testing.T) {
	addr, _ := netfake.TLS(t, openBound)
	base := "postgres://postgres@" + addr + "/test"
	const want = "is it a TLS-only port? use sslnegotiation=direct&sslmode=require"
	openFails(t, t.Context(), base+"?sslmode=disable&connect_timeout=1", want)
	openFails(t, t.Context(), base+"?connect_timeout=1", want)
	openFails(t, deadline(t, time.Second), base+"?sslmode=disable", want)
	direct := base + "?sslnegotiation=direct&sslmode=require"
	for _, took := range []time.Duration{
		openFails(t, t.Context(), direct+"&connect_timeout=1", "failed to receive message: timeout"),
		openFails(t, deadline(t, time.Second), direct, "did not answer before the deadline"),
	} {
		if took < 900*time.Millisecond {
			t.Fatalf("Open failed after %s, before the 1s it was given", took)
		}
	}
}

// TestOpenCancelled: cancelling Open's context (the first SIGINT or
// SIGTERM of the command line does) ends it at once, whatever step it
// waits on.
func TestOpenCancelled(t *testing.T) {
	addr := netfake.Silent(t)
	for _, url := range []string{"postgres://postgres@" + addr + "/test", "postgres://postgres@" + addr + "/test?sslmode=disable"} {
		ctx, cancel := context.WithCancel(t.Context())
		timer := time.AfterFunc(200*time.Millisecond, cancel)
		start := time.Now()
		b, err := Open(ctx, url, Options{})
		took := time.Since(start)
		timer.Stop()
		cancel()
		if err == nil {
			_ = b.Close()
			t.Fatalf("Open(%s) succeeded", url)
		}
		if !errors.Is(err, context.Canceled) || took > 2*time.Second {
			t.Fatalf("Open(%s) cancelled after 200ms: %v after %s; want context.Canceled at once", url, err, took)
		}
	}
}
