package postgres

import (
	"cmp"
	"context"
	"errors"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/jobq/jobq/backend"
)

// The replay of a failed task's job (FailedReplay). The replay statements
// of queries.go (replayTail) leave the failed jobs of tasks where they are
// and name them; replayTasks then moves them back and restores their
// tasks in one transaction: the replay's own for listed IDs, one per
// chunk for a replay by filter (whose chunks commit alone).

// errReplayRace: the workflow of a task being replayed was cancelled
// after the replay statement read it and before its tasks were locked.
// The transaction rolls back and runs again, and then finds the workflow
// cancelled and leaves the failed job where it is.
var errReplayRace = errors.New("workflow cancelled during the replay of its task")

// raceTries bounds how often a replay runs again after errReplayRace
// (or errKeyRace).
const raceTries = 3

// taskReplay counts what replayTasks did.
type taskReplay struct {
	matched, replayed int
	byType            map[backend.TypeCount]int // Count unset: the map counts
	due               []string
}

// replayTasks replays the failed jobs of tasks among the failed_jobs
// ids, in tx: a task whose workflow was cancelled (or is gone) stays
// failed and its job in failed_jobs; every other comes back active with
// its job, and so do the tasks its failure cancelled (see sqlTaskRestore),
// its workflow running again.
func (b *Backend) replayTasks(ctx context.Context, tx pgx.Tx, ids []int64) (taskReplay, error) {
	wq := b.wq()
	out := taskReplay{byType: map[backend.TypeCount]int{}}
	rows, err := tx.Query(ctx, wq.replay, ids)
	if err != nil {
		return out, err
	}
	type replayed struct{ workflow, job int64 }
	var jobs []replayed
	seen := map[string]bool{}
	var (
		kind, queue, typ string
		n, wf            int64
	)
	_, err = pgx.ForEachRow(rows, []any{&kind, &n, &wf, &queue, &typ}, func() error {
		if kind == "m" {
			out.matched = int(n)
			return nil
		}
		jobs = append(jobs, replayed{workflow: wf, job: n})
		out.replayed++
		out.byType[backend.TypeCount{Queue: queue, Type: typ}]++
		if !seen[queue] {
			seen[queue] = true
			out.due = append(out.due, queue)
		}
		return nil
	})
	if err != nil {
		return out, err
	}
	if len(jobs) == 0 {
		return out, nil
	}
	// The restore statement's recursive CTEs are estimated at thousands
	// of rows whatever the graph, which passes jit_above_cost: compiling
	// it took far longer than the replay's statements (docs/performance.md).
	if _, err := tx.Exec(ctx, "SET LOCAL jit = off"); err != nil {
		return out, err
	}
	// Workflow by workflow in ID order, each one's tasks before its row:
	// the lock order of workflow_sql.go.
	slices.SortFunc(jobs, func(x, y replayed) int {
		return cmp.Or(cmp.Compare(x.workflow, y.workflow), cmp.Compare(x.job, y.job))
	})
	for len(jobs) > 0 {
		k := 1
		for k < len(jobs) && jobs[k].workflow == jobs[0].workflow {
			k++
		}
		wf, group := jobs[0].workflow, jobs[:k]
		jobs = jobs[k:]
		back := 0
		for _, j := range group {
			n, queues, err := b.restoreTask(ctx, tx, wf, j.job)
			if err != nil {
				return out, err
			}
			back += n
			for _, q := range queues {
				if !seen[q] {
					seen[q] = true
					out.due = append(out.due, q)
				}
			}
		}
		if back == 0 {
			continue
		}
		var one int32
		err := tx.QueryRow(ctx, wq.restoreWorkflow, wf, back).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			return out, errReplayRace
		}
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// restoreTask restores the failed task whose job was just replayed and
// the tasks its failure cancelled, and returns how many tasks are
// unfinished again and the queues of jobs it released due now.
func (b *Backend) restoreTask(ctx context.Context, tx pgx.Tx, wf, job int64) (int, []string, error) {
	wq := b.wq()
	rows, err := tx.Query(ctx, wq.restoreLock, wf, job)
	if err != nil {
		return 0, nil, err
	}
	idx := int32(-1)
	var i int32
	var jobID pgtype.Int8
	_, err = pgx.ForEachRow(rows, []any{&i, &jobID}, func() error {
		if jobID.Valid && jobID.Int64 == job {
			idx = i
		}
		return nil
	})
	if err != nil || idx < 0 {
		// No failed task holds this job: nothing to restore.
		return 0, nil, err
	}
	var task, restored, stays int32
	var queues []string
	if err := tx.QueryRow(ctx, wq.restore, wf, idx).Scan(&task, &restored, &stays, &queues); err != nil {
		return 0, nil, err
	}
	if task == 0 {
		return 0, nil, nil
	}
	return int(task + restored - stays), queues, nil
}

// replayTaskRows replays the tasks' jobs a replay chunk left (see
// replayTasks) in a transaction of their own, running it again when a
// concurrent WorkflowCancel raced it. It runs inside the chunk's do.
func (b *Backend) replayTaskRows(ctx context.Context, ids []int64) (taskReplay, error) {
	var out taskReplay
	var err error
	for try := 1; ; try++ {
		err = b.inTx(ctx, func(tx pgx.Tx) error {
			var err error
			out, err = b.replayTasks(ctx, tx, ids)
			return err
		})
		if !errors.Is(err, errReplayRace) || try == raceTries {
			break
		}
	}
	if err != nil {
		return taskReplay{}, err
	}
	b.wake(out.due)
	return out, nil
}

// retryRace runs a replay again when it lost errReplayRace or errKeyRace.
func retryRace(run func() error) error {
	for try := 1; ; try++ {
		err := run()
		if !errors.Is(err, errReplayRace) && !errors.Is(err, errKeyRace) || try == raceTries {
			return err
		}
	}
}

// addTypes adds a taskReplay's counts per queue and type to byType.
func (r taskReplay) addTypes(byType map[backend.TypeCount]int) {
	for k, n := range r.byType {
		byType[k] += n
	}
}

// typeCounts turns counts per queue and type into ReplayResult.ByType.
func typeCounts(byType map[backend.TypeCount]int) []backend.TypeCount {
	var out []backend.TypeCount
	for k, n := range byType {
		k.Count = n
		out = append(out, k)
	}
	return out
}
