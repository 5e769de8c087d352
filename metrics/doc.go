// Package metrics exports jobq to Prometheus: what a process's workers,
// clients and inspectors did, and how deep its backend's queues are. It is
// the only jobq package that imports prometheus/client_golang; it is
// built on the runtime's hooks (jobq.WorkerHooks, jobq.ClientHooks,
// jobq.InspectorHooks) and the Inspector, and changes nothing in how jobs
// run.
//
// Wire it in with New, then WorkerHooks in WorkerConfig.Hooks, AddWorker
// for each worker, ClientHooks in ClientConfig.Hooks, InspectorHooks in
// jobq.NewInspector, ObserveQueues for the depth gauges, and serve Handler
// (or NewServeMux, with /healthz and /readyz) on an address Prometheus
// scrapes. `jobq worker --metrics-addr` does all of that; `jobq metrics`
// serves the depth gauges alone.
//
// # Metrics
//
// Counters, labelled queue and type, count what this process did. What
// became of a job (completed, retried, failed, released, cancelled) is
// counted once the backend applied it (WorkerHooks.Written): an outcome
// the lease fence refused counts only as stale, and one a cancel
// overrode as cancelled.
//
//	jobq_jobs_enqueued_total        jobs enqueued (unique-key duplicates not counted)
//	jobq_jobs_started_total         attempts started
//	jobq_jobs_completed_total       attempts that succeeded
//	jobq_jobs_retried_total         attempts that failed and will run again
//	jobq_jobs_failed_total          jobs moved to the failed jobs table (also by the lease sweep)
//	jobq_jobs_released_total        attempts interrupted by shutdown (or whose result the stopped worker dropped)
//	jobq_jobs_cancelled_total       attempts whose job ended cancelled
//	jobq_jobs_rescued_total         jobs whose lease expired, moved by this process's sweep
//	jobq_jobs_expired_total         jobs not started by their deadline, moved to failed jobs by this process's sweep
//	jobq_jobs_stale_outcomes_total  outcomes refused because the attempt had lost its lease
//	jobq_jobs_replayed_total        failed jobs replayed through an instrumented Inspector
//
// Histograms, labelled queue and type, with Buckets from a millisecond to
// an hour:
//
//	jobq_job_duration_seconds  how long the handler ran, per attempt
//	jobq_job_wait_seconds      how long the job had been due when it was claimed
//
// Gauges:
//
//	jobq_queue_jobs{queue,state}                     jobs by state: pending (due), scheduled, reserved, failed
//	jobq_queue_oldest_due_timestamp_seconds{queue}   when the job due longest became due; absent when none is
//	jobq_workers_busy{queue}                         handlers of this process running the queue's jobs
//	jobq_workers_capacity{queue}                     slots of this process's workers serving the queue
//	jobq_queue_stats_up                              1 when the last depth read succeeded
//	jobq_queue_stats_duration_seconds                how long the last depth read took
//	jobq_workflows{state}                            workflows by state: running, succeeded, failed, cancelled
//	jobq_workflow_tasks_waiting                      tasks of running workflows waiting for their dependencies
//	jobq_build_info{version,goversion}               always 1
//
// The workflow gauges come with the depth gauges (ObserveQueues) when
// the backend runs workflows, read the same way (one
// Inspector.WorkflowStats per scrape at most, cached), and are absent
// otherwise.
//
// The labels are only queue, type and state, never job IDs or payloads.
// The type label is bounded by Options.MaxTypes (default 100): further types count
// under OverflowType. Every counter and histogram of a worker's queues and
// its registry's types exists at zero from AddWorker on, and all the
// counters of a queue and type are made together, so rates and ratios see
// every side before the first job. The registry New makes by default
// also holds the Go runtime and process collectors.
//
// # What it costs
//
// The hooks add no allocation to an attempt and little CPU, whether their
// data is in the CPU's cache (BenchmarkHooks) or a sweep of 4 MiB before
// each attempt evicts it, as the backend's work and other jobs do in a
// busy worker (BenchmarkHooksCold). In CPU profiles of `jobq bench
// --observe` (drain and steady, SQLite and PostgreSQL) the metrics code,
// with a scrape every second and its depth reads, takes a small share of
// the process's time. docs/performance.md gives the figures.
//
// The depth gauges cost one Inspector.Stats per scrape at most: scrapes
// wait for the same read, and a read serves every scrape for
// Options.StatsCache (5s by default), or for 50 times as long as it took
// when that is longer, so several scrapers or a short interval add no
// load and depth reads never keep the backend busy more than 2 % of the
// time. On the SQL backends the read counts the jobs table (on SQLite a
// scan of it), so its time grows with the backlog, while memory and Redis
// (kept counts) stay fast (BenchmarkQueueStats, JOBQ_BENCH_JOBS=1000000;
// docs/performance.md has the figures). With a large backlog a read then
// serves for 50 times its duration, whatever the interval, and the depths
// may be that old. Where many worker processes share one database, serve
// the depths from one `jobq metrics` sidecar and run the workers with
// --metrics-depth=false.
//
// # Alerts
//
// alerts.yml, beside this package, holds Prometheus alerting rules on
// these metrics (backlog, oldest due job, failure ratio, queues nobody
// serves, jobs landing in the failed jobs table, rescued jobs), and
// alerts_test.yml their unit tests for `promtool test rules`.
package metrics
