package sqlite_test

import (
	"testing"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/backendtest"
)

// BenchmarkClaimControl: what queue control costs a claim (see
// backendtest.BenchClaimControl).
func BenchmarkClaimControl(b *testing.B) {
	backendtest.BenchClaimControl(b, func(b *testing.B) backend.Backend { return openBench(b) })
}
