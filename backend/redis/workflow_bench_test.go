package redis

import (
	"testing"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/backendtest"
)

// BenchmarkWorkflow: a fan-in of 1,000 against 1,001 plain jobs (see
// backendtest.BenchWorkflow).
func BenchmarkWorkflow(b *testing.B) {
	backendtest.BenchWorkflow(b, func(b *testing.B) backend.Backend { return openTest(b, Options{}) })
}
