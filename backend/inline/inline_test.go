package inline_test

import (
	"errors"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/backendtest"
	"github.com/jobq/jobq/backend/inline"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	backendtest.RunInline(t, func(t *testing.T) backendtest.InlineBackend { return inline.New() })
}

// TestOpenExistingRefused checks that sync: refuses OpenOptions.Existing: it
// stores nothing, so there is nothing existing to read.
func TestOpenExistingRefused(t *testing.T) {
	b, err := backend.OpenWith(t.Context(), "sync:", backend.OpenOptions{Existing: true})
	if b != nil {
		b.Close()
	}
	var ie *backend.InputError
	if !errors.As(err, &ie) || !errors.Is(err, backend.ErrInvalidInput) || b != nil {
		t.Fatalf("OpenWith(sync:, Existing) = %v, %v; want nil and an InputError", b, err)
	}
	if !strings.Contains(err.Error(), "sqlite:") {
		t.Errorf("error %q does not say what to use instead", err)
	}
	// Without Existing it opens.
	b, err = backend.Open(t.Context(), "sync:")
	if err != nil {
		t.Fatalf("Open(sync:): %v", err)
	}
	b.Close()
}
