// Package jobqtest helps users test their own code's relation to the
// queue: for a named part of a request (a job type, or a step of the
// request's own such as "save"), did it run inside the request, was it
// deferred to the queue, was it on the request's path but skipped, or was
// it never wired? Recorder.Ran records a step that is not a job as
// called; Recorder.OnPath places parts on the request's path.
//
// Wrap any backend in a Recorder, give the code under test a client on
// Recorder.Backend (Recorder.NewClient adds the recorder's client hooks),
// make the request, then ask Recorder.Classify, Recorder.AssertClass,
// Recorder.AssertEnqueued or Recorder.AssertNotEnqueued. Recorder.RunQueue
// then runs the deferred jobs in the test's goroutine, with the registered
// handlers and the worker's retry policy, backoff delays treated as
// elapsed, and reports each attempt's outcome.
//
// Recorder.Backend keeps every optional capability of the wrapped backend
// (cancelling, job listings, retention, queue control, schedules, ...):
// jobq finds them with backend.As through the recorder's Unwrap, and so
// should a test's own code.
//
// Nothing here starts a goroutine or sleeps.
package jobqtest
