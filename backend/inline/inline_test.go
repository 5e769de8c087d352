package inline_test

import (
	"context"
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

// TestBindRunnerOneOwner: a backend bound to one owner refuses another,
// keeping its runner, and takes the same owner again.
func TestBindRunnerOneOwner(t *testing.T) {
	b := inline.New()
	defer b.Close()
	first, second := new(int), new(int)
	if err := b.BindRunner(first); err != nil {
		t.Fatalf("first bind: %v", err)
	}
	ran := ""
	b.SetRunner(func(context.Context, *backend.JobRow) error { ran = "first"; return nil })
	err := b.BindRunner(second)
	if !errors.Is(err, backend.ErrInvalidInput) || !strings.Contains(err.Error(), "another registry") {
		t.Fatalf("bind to another owner: %v; want ErrInvalidInput naming the problem", err)
	}
	if err := b.BindRunner(first); err != nil {
		t.Fatalf("bind to the same owner again: %v", err)
	}
	if _, err := b.JobInsertMany(t.Context(), []backend.InsertParams{{Queue: "q", Type: "t", Payload: []byte("{}"), MaxAttempts: 1}}); err != nil || ran != "first" {
		t.Fatalf("insert after the refused bind: %v, ran %q; want the first owner's runner", err, ran)
	}
}
