// Package verify checks jobq's two promises on a real deployment, in the
// manner of Jepsen: it runs a workload of its own while it injects faults
// (worker processes killed and paused, connections cut and blackholed,
// the broker restarted, clocks skewed), records a history of every
// attempt in every worker, and checks that history against what the
// backend holds at the end.
//
// The promises:
//
//   - An acknowledged job is never lost: every job whose enqueue returned
//     its ID is eventually done (at least one attempt succeeded and its
//     outcome was applied) or in failed jobs with its reason. Delivery is
//     at-least-once: an attempt may run again after a crash.
//   - A job runs in at most one place at a time, unless its holder lost
//     its lease; then that holder's outcome is refused as stale, by its
//     claim token (the fence), and its handler's context is cancelled with
//     jobq.ErrLeaseLost as soon as the worker can know.
//
// With Config.Workflows the workload is workflows of FanOut parts and a
// join, and three more checks run: every join was claimed only after all
// its parts had succeeded, exactly one join completed per workflow that
// succeeded (none in one that failed), and no workflow is left running
// or with a stored count that WorkflowCheck finds off. Its replay fault
// (FaultReplay) replays each failed task from failed jobs as soon as the
// verifier sees it, as an operator would, while its siblings still run:
// a job's claims after its replay are its second life (attempts counted
// anew, not RAN AFTER END), and a workflow whose part planned to fail was
// replayed must end succeeded, with one join completion after all its
// parts.
//
// With Config.Keys every job carries one of Keys keys, on a queue per
// PerKey limit and, with Ordered, an ordered queue, and three more checks
// run: no attempt of a key started while its queue's limit of other
// attempts of the key ran with their outcomes applied (KEY OVER LIMIT,
// KEY OVERLAP), each ordered key's applied attempts started, and its jobs
// completed, in ID order (KEY OUT OF ORDER), and no key is held after the
// drain by a job that is not among the failed jobs (KEY HELD). The
// verifier replays each held key's failed head as an operator would; a
// head replayed more than once has a life per replay.
//
// With Config.Unique every job is one of Unique requests for an
// identity (its unique key), and one more check runs: no two jobs of one
// identity were ever provably live at once (UNIQUE TWO LIVE).
//
// With Config.Deadlines a share of the jobs carry a deadline, and two
// more checks run: no claim of a job after its deadline, by the store's
// reserved time or by when the claim call began on the worker's clock
// within Config.ClockTolerance (STARTED AFTER DEADLINE), and no job that
// expired into failed jobs claimed, held or done once expired (EXPIRED
// BUT RAN), nor expired early, without a deadline or with another
// deadline's error (EXPIRED EARLY).
//
// Run is what `jobq verify` runs. Worker processes are a program that
// calls WorkerMain (the jobq command's hidden `verify worker`), named by
// Config.WorkerCommand.
//
// # The history
//
// Each worker process appends its events to a file of its own, one line
// each, with CLOCK_MONOTONIC times that compare across processes:
// claim (what a claim returned), start and end (the handler's, the end
// written before the handler returns), written and stale (the Written and
// Stale hooks: the outcome applied, or refused by the fence), werr (a
// write that failed and is retried) and rescued. The verifier's own file
// records the workers it started and how they exited, and every fault.
//
// # The checks
//
//   - lost: an acknowledged job with no applied done, not in failed jobs
//     and not live, and no successful attempt whose process died before
//     it heard back, is LOST.
//   - one place at a time: two attempts of one job whose handler runs
//     (start to end; without an end, to its process's death) overlap only
//     if the earlier claim's outcome was refused or never written; if it
//     was applied, that is an UNFENCED OVERLAP. A claim after an applied
//     done or failure is RAN AFTER END; two claims with one token are
//     TOKEN REUSED.
//   - exactly one terminal state: not done twice, not done and failed,
//     not failed twice, nothing live after the drain.
//   - attempts: no job claimed more often than its max attempts plus
//     backend.MaxFreeReleases.
//   - counts: the backend's counts of the run's queue agree with the
//     history, and its failed jobs are jobs the run enqueued.
package verify
