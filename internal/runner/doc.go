// Package runner holds the worker's background components, one loop each:
// the Claimer reserves jobs into free slots, the Completer writes outcomes
// back in batches, the LeaseExtender heartbeats held jobs and the
// LeaseSweeper rescues jobs whose holder died. The root package's Worker
// wires them together; nothing here knows job types or handlers.
package runner
