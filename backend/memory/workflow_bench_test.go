package memory_test

import (
	"testing"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/backendtest"
	"github.com/jobq/jobq/backend/memory"
)

// BenchmarkWorkflow: a fan-in of 1,000 against 1,001 plain jobs (see
// backendtest.BenchWorkflow).
func BenchmarkWorkflow(b *testing.B) {
	backendtest.BenchWorkflow(b, func(b *testing.B) backend.Backend {
		be := memory.New(memory.Options{})
		b.Cleanup(func() { be.Close() })
		return be
	})
}
