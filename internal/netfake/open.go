package netfake

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// OpenFails calls open (a backend's Open of url) and checks that it fails
// with backend.ErrUnavailable, saying want, within bound; it returns how
// long open took. Every backend's tests of a misbehaving server ask the
// same of its Open.
func OpenFails(t testing.TB, bound time.Duration, url, want string, open func() (io.Closer, error)) time.Duration {
	t.Helper()
	start := time.Now()
	b, err := open()
	took := time.Since(start)
	if err == nil {
		_ = b.Close()
		t.Fatalf("Open(%s) succeeded", url)
	}
	if !errors.Is(err, backend.ErrUnavailable) || !strings.Contains(err.Error(), want) {
		t.Fatalf("Open(%s) = %v; want ErrUnavailable saying %q", url, err, want)
	}
	if took > bound {
		t.Fatalf("Open(%s) failed after %s; want within %s", url, took, bound)
	}
	t.Logf("Open(%s): %s: %v", url, took.Round(time.Millisecond), err)
	return took
}

// Deadline is a context that ends after d, or with the test.
func Deadline(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}
