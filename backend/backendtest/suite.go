// Package backendtest is the conformance suite every jobq backend must pass
// unchanged: it is the specification of backend.Backend.
//
// A backend's test file calls Run with a Harness that makes a fresh, empty
// backend per test:
//
//	func TestConformance(t *testing.T) {
//		backendtest.Run(t, backendtest.Harness{
//			New: func(t *testing.T) backend.Backend { return memory.New(memory.Options{}) },
//		})
//	}
//
// The suite asserts only through the Backend interface, the sentinel errors
// and observable state (JobGet, QueueStats, FailedList, FailedGet). It never
// fakes time, because backends read their own clock (the database clock on
// Postgres): waits use real short durations polled against a deadline, and
// times are compared with a tolerance for clock skew.
package backendtest

import (
	"testing"

	"github.com/jobq/jobq/backend"
)

// Harness tells the suite how to make a backend.
type Harness struct {
	// New returns a fresh, empty backend for one test: its own file, schema
	// or key prefix, so tests can run in parallel. The suite closes it
	// through t.Cleanup; New should register its own cleanup for anything
	// else it created (temporary files, schemas). Required.
	New func(t *testing.T) backend.Backend
	// BeginTx begins a transaction of the application's own on the store
	// of b (a backend from New), for the Tx area. Required of backends
	// that implement backend.TxInserter; the suite rolls it back at the
	// end of the test unless it was ended.
	BeginTx func(t *testing.T, b backend.Backend) Tx
}

// Run runs every area of the suite as parallel subtests of t, each test on
// its own backend from h.New. The whole suite takes a few seconds: the
// slowest tests wait for leases of about 50ms and delays of about 300ms, and
// the Chunks area fails a few thousand jobs in batches.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.New == nil {
		t.Fatal("backendtest: Harness.New is nil")
	}
	areas := []struct {
		name string
		run  func(*testing.T, Harness)
	}{
		{"Insert", testInsert},
		{"Unique", testUnique},
		{"Conflict", testConflict},
		{"UniqueFreed", testUniqueFreed},
		{"UniqueStates", testUniqueStates},
		{"UniqueCompleted", testUniqueCompleted},
		{"Deadline", testDeadline},
		{"Claim", testClaim},
		{"ClaimOrder", testClaimOrder},
		{"Complete", testComplete},
		{"Defer", testDefer},
		{"Fence", testFence},
		{"Lease", testLease},
		{"Release", testRelease},
		{"Failed", testFailed},
		{"OlderThan", testOlderThan},
		{"Chunks", testChunks},
		{"ErrorText", testErrorText},
		{"AttemptErrors", testAttemptErrors},
		{"Metadata", testMetadata},
		{"Stats", testStats},
		{"Closed", testClosed},
		{"Notify", testNotify},
		{"FinishNotify", testFinishNotify},
		{"Worker", testWorker},
		{"Queues", testQueues},
		{"Cancel", testCancel},
		{"Retention", testRetention},
		{"Schedule", testSchedule},
		{"Inserted", testInserted},
		{"Workflow", testWorkflow},
		{"Keys", testKeys},
		{"Progress", testProgress},
		{"Tx", testTx},
	}
	for _, a := range areas {
		t.Run(a.name, func(t *testing.T) {
			t.Parallel()
			a.run(t, h)
		})
	}
}

// open makes a fresh backend for one test and closes it when the test ends.
func open(t *testing.T, h Harness) backend.Backend {
	t.Helper()
	b := h.New(t)
	if b == nil {
		t.Fatal("backendtest: Harness.New returned nil")
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("close backend: %v", err)
		}
	})
	return b
}

// parallel runs fn as a parallel subtest with its own backend.
func parallel(t *testing.T, h Harness, name string, fn func(t *testing.T, b backend.Backend)) {
	t.Helper()
	t.Run(name, func(t *testing.T) {
		t.Parallel()
		fn(t, open(t, h))
	})
}

// group runs fn as a parallel subtest that holds further subtests.
func group(t *testing.T, name string, fn func(t *testing.T)) {
	t.Helper()
	t.Run(name, func(t *testing.T) {
		t.Parallel()
		fn(t)
	})
}
