// Package runner holds the worker's background components, one loop each:
// the Claimer reserves jobs into free slots, the Completer writes outcomes
// back in batches, the LeaseExtender heartbeats held jobs, the
// LeaseSweeper rescues jobs whose holder died, the CancelWatcher tells
// running handlers their job was cancelled, and the Pruner deletes kept
// finished jobs past their retention. The root package's Worker wires them
// together (worker.go); nothing here knows job types or handlers.
package runner
