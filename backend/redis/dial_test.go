package redis

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/netfake"
)

// Tests that every network step of Open ends within the URL's timeout and
// the caller's context, against servers that never answer and against a
// TLS URL for a plain port and the reverse (issue 35: one letter more in
// the scheme hung 'jobq stats' for good).

// openBound is how long an Open given 1 s (URL timeout or deadline) may
// take against a server that never answers: about 1 s, with room for a
// loaded machine. Before the fix these Opens never returned.
const openBound = 5 * time.Second

// openFails opens url under ctx and checks that it fails with
// backend.ErrUnavailable, saying want, within openBound.
func openFails(t *testing.T, ctx context.Context, url, want string) time.Duration {
	t.Helper()
	return netfake.OpenFails(t, openBound, url, want, func() (io.Closer, error) { return Open(ctx, url, Options{Logger: quiet}) })
}

// deadline is a context that ends after d.
func deadline(t *testing.T, d time.Duration) context.Context { return netfake.Deadline(t, d) }

// TestOpenSilentServer: a server that accepts and never answers fails
// Open with ErrUnavailable after the URL's timeout, or the caller's
// deadline when it comes first (the call timeout being the default 10 s),
// with and without TLS.
func TestOpenSilentServer(t *testing.T) {
	addr := netfake.Silent(t)
	for _, tc := range []struct {
		name, url string
		ctxLimit  time.Duration // 0: none
		want      string
	}{
		{"PlainURLTimeout", "redis://" + addr + "/0?timeout=1s", 0, "did not answer within 1s"},
		{"TLSURLTimeout", "rediss://" + addr + "/0?timeout=1s", 0, "no answer to the TLS handshake within 1s: is it a plain port? use redis://"},
		{"PlainDeadline", "redis://" + addr + "/0", time.Second, "did not answer before the deadline"},
		{"TLSDeadline", "rediss://" + addr + "/0", time.Second, "no answer to the TLS handshake within 1s"},
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

// TestOpenTLSToPlainServer: rediss:// for the test server, which speaks
// no TLS, fails within the URL's timeout or the caller's deadline, saying
// that the port may be a plain one.
func TestOpenTLSToPlainServer(t *testing.T) {
	plain := strings.Replace(testURL(t), "redis://", "rediss://", 1)
	if !strings.HasPrefix(plain, "rediss://") {
		t.Skipf("the test server's URL %s is not redis://", testURL(t))
	}
	const want = "is it a plain port? use redis:// for one without TLS"
	t.Run("URLTimeout", func(t *testing.T) {
		t.Parallel()
		openFails(t, t.Context(), withParam(plain, "timeout", "1s"), want)
	})
	t.Run("Deadline", func(t *testing.T) {
		t.Parallel()
		openFails(t, deadline(t, time.Second), plain, want)
	})
}

// TestOpenPlainToTLSServer: redis:// for a TLS-only port fails at once,
// the port closing the connection, saying that it may be a TLS port; a
// TLS port that kept the connection silent would fail by the timeout.
func TestOpenPlainToTLSServer(t *testing.T) {
	addr, _ := netfake.TLS(t, openBound)
	openFails(t, t.Context(), "redis://"+addr+"/0?timeout=1s", "is it a TLS port (use rediss://)")
	openFails(t, deadline(t, time.Second), "redis://"+addr+"/0", "is it a TLS port (use rediss://)")
}

// TestOpenTLSServerSilent: a server that completes the TLS handshake and
// then answers nothing (not AUTH, HELLO, SELECT nor PING) fails the
// connection within the timeout, or the caller's deadline. The client
// trusts the test's certificate, which no URL can say, so newClient is
// called directly.
func TestOpenTLSServerSilent(t *testing.T) {
	addr, roots := netfake.TLS(t, openBound)
	for _, tc := range []struct {
		name     string
		timeout  time.Duration
		ctxLimit time.Duration
	}{
		{"Timeout", time.Second, 0},
		{"Deadline", 10 * time.Second, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			if tc.ctxLimit > 0 {
				ctx = deadline(t, tc.ctxLimit)
			}
			cfg := clientConfig{addrs: []string{addr}, password: "pw", db: 1, timeout: tc.timeout,
				tls: &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots}}
			start := time.Now()
			c, err := newClient(ctx, cfg)
			took := time.Since(start)
			if err == nil {
				_ = c.close()
				t.Fatal("newClient succeeded against a server that never answers")
			}
			if !errors.Is(err, backend.ErrUnavailable) || took > openBound || took < 900*time.Millisecond {
				t.Fatalf("newClient: %v after %s; want ErrUnavailable after about 1s", err, took)
			}
		})
	}
}

// TestOpenCancelled: cancelling Open's context (the first SIGINT or
// SIGTERM of the command line does) ends it at once, whatever step it
// waits on, although the call timeout is long.
func TestOpenCancelled(t *testing.T) {
	addr := netfake.Silent(t)
	for _, url := range []string{"redis://" + addr + "/0?timeout=1m", "rediss://" + addr + "/0?timeout=1m"} {
		ctx, cancel := context.WithCancel(t.Context())
		timer := time.AfterFunc(200*time.Millisecond, cancel)
		start := time.Now()
		b, err := Open(ctx, url, Options{Logger: quiet})
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

// TestHandshakeErrorCancelled: a TLS handshake that the cancellation of
// Open's context ended by closing its connection, before the handshake's
// own context was cancelled too, fails with the cancellation's cause, not
// as a server that did not answer.
func TestHandshakeErrorCancelled(t *testing.T) {
	octx, cancel := context.WithCancelCause(t.Context())
	signal := errors.New("received terminated")
	cancel(signal)
	if err := tlsHandshakeError(t.Context(), octx, net.ErrClosed, time.Second); !errors.Is(err, signal) {
		t.Fatalf("tlsHandshakeError = %v; want %v", err, signal)
	}
}
