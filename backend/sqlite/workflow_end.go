package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jobq/jobq/backend"
)

// wfTx does the workflow side of one write transaction: ending the task of
// a job the transaction made terminal, resolving that task's outgoing
// edges, releasing the dependants left with nothing to wait for, and
// bringing tasks back on a replay. Everything happens in the transaction
// that changed the job, so a crash or a second writer can never see a job
// ended and its task not, nor lose or double a release.
//
// The completion paths call it only for a task's job: their usual deletes
// skip a job whose workflow_id is set (qCompleteDone, qJobDelete), and only
// then does a second statement delete it and return the workflow, so a job
// that is not a task's costs what it did before workflows. The statements
// of the completion paths are the backend's, prepared once; the others
// (and all in a caller's transaction, where the backend's cannot be used)
// are prepared on the transaction at first use and reused for the rest of
// it.
type wfTx struct {
	ctx context.Context
	tx  *sql.Tx
	// st is the backend's prepared statements, for insertTx; nil in a
	// caller's transaction.
	st  *stmts
	now time.Time
	// woken collects the queues of released jobs, to wake after the
	// commit; nil when nobody is woken (a caller's transaction).
	woken map[string]struct{}
	prep  map[string]*sql.Stmt
}

// stmt returns query bound to the transaction: the backend's statement
// prepared once (see wfHotQueries), or else one prepared on the
// transaction.
func (w *wfTx) stmt(query string) (*sql.Stmt, error) {
	if s, ok := w.prep[query]; ok {
		return s, nil
	}
	s, shared := w.st.wfStmt(query)
	if shared {
		s = w.tx.StmtContext(w.ctx, s)
	} else {
		var err error
		if s, err = w.tx.PrepareContext(w.ctx, query); err != nil {
			return nil, err
		}
	}
	if w.prep == nil {
		w.prep = make(map[string]*sql.Stmt)
	}
	w.prep[query] = s
	return s, nil
}

func (w *wfTx) exec(query string, args ...any) (sql.Result, error) {
	s, err := w.stmt(query)
	if err != nil {
		return nil, err
	}
	return s.ExecContext(w.ctx, args...)
}

// scanRow runs query and scans its first row into dest; sql.ErrNoRows
// when there is none.
func (w *wfTx) scanRow(query string, args []any, dest ...any) error {
	s, err := w.stmt(query)
	if err != nil {
		return err
	}
	return s.QueryRowContext(w.ctx, args...).Scan(dest...)
}

// idxCount is a task index and a number read with it.
type idxCount struct{ idx, n int64 }

// idxName is a task index and its name.
type idxName struct {
	idx  int64
	name string
}

// queryAll runs query and reads every row with scan before it returns, so
// the next statement of the transaction never runs under open rows.
func queryAll[T any](w *wfTx, query string, args []any, scan func(*sql.Rows) (T, error)) ([]T, error) {
	s, err := w.stmt(query)
	if err != nil {
		return nil, err
	}
	rows, err := s.QueryContext(w.ctx, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, closeRows(rows)
}

func scanIdxCount(r *sql.Rows) (v idxCount, err error) { return v, r.Scan(&v.idx, &v.n) }
func scanIdxName(r *sql.Rows) (v idxName, err error)   { return v, r.Scan(&v.idx, &v.name) }
func scanInt(r *sql.Rows) (v int64, err error)         { return v, r.Scan(&v) }

// The ends of a task's job, as the completion paths report them.

// doneTask completes the held job id of a workflow task with result, after
// qCompleteDone (which leaves tasks' jobs alone) deleted nothing: held is
// false when the claim with token is stale (or the job is no task's).
func (w *wfTx) doneTask(id, token int64, result []byte) (held bool, err error) {
	var wf sql.NullInt64
	err = w.scanRow(qCompleteDoneTask, []any{id, token}, &wf)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("complete job %d: %w", id, err)
	}
	return true, w.jobDone(id, result)
}

// jobDone ends the task of a job that completed, with its result.
func (w *wfTx) jobDone(jobID int64, result []byte) error {
	return w.end(jobID, backend.TaskSucceeded, result, "", "")
}

// jobFailed ends the task of a job moved to failed_jobs with errText.
func (w *wfTx) jobFailed(jobID int64, errText string) error {
	return w.end(jobID, backend.TaskFailed, nil, errText, "")
}

// jobCancelled ends the task of a job that ended cancelled.
func (w *wfTx) jobCancelled(jobID int64) error {
	return w.end(jobID, backend.TaskCancelled, nil, backend.CancelledError, causeJob)
}

// end ends the active task whose job jobID is with state, then resolves
// its outgoing edges, each once: a dependant whose count reaches 0 is
// released; one that depends on a task that failed or was cancelled, with
// DepCancel, is cancelled, and its own edges are resolved the same way (a
// worklist, not recursion: a chain of 10,000 tasks cannot exhaust the
// stack). A task that is not active (ended already: the guard) changes
// nothing; in a workflow that is not running the task alone ends.
func (w *wfTx) end(jobID int64, state backend.TaskState, result []byte, reason, cause string) error {
	var (
		wf, idx int64
		name    string
		wfState sql.NullString
	)
	var res, causeArg any
	if result != nil {
		res = result
	}
	if cause != "" {
		causeArg = cause
	}
	nowUS := micros(w.now)
	err := w.scanRow(qTaskEnd, []any{jobID, string(state), res, reason, causeArg, nowUS}, &wf, &idx, &name, &wfState)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("end the task of job %d: %w", jobID, err)
	}
	if backend.WorkflowState(wfState.String) != backend.WorkflowRunning {
		return nil
	}
	type ended struct {
		idx   int64
		name  string
		state backend.TaskState
	}
	work := []ended{{idx, name, state}}
	var release []int64
	count := 1 // tasks ended, this one and those cancelled because of it
	for len(work) > 0 {
		t := work[len(work)-1]
		work = work[:len(work)-1]
		// Every edge counts down from a task that succeeded; only the
		// DepContinue ones from a task that did not.
		minPolicy := int64(backend.DepCancel)
		if t.state != backend.TaskSucceeded {
			minPolicy = int64(backend.DepContinue)
		}
		down, err := queryAll(w, qEdgesCountDown, []any{wf, t.idx, minPolicy}, scanIdxCount)
		if err != nil {
			return fmt.Errorf("resolve the edges of task %q: %w", t.name, err)
		}
		for _, d := range down {
			if d.n == 0 {
				release = append(release, d.idx)
			}
		}
		if t.state == backend.TaskSucceeded {
			continue
		}
		cancelled, err := queryAll(w, qEdgesCancel, []any{wf, t.idx, backend.DepCancelReason(t.name, t.state), nowUS}, scanIdxName)
		if err != nil {
			return fmt.Errorf("cancel the dependants of task %q: %w", t.name, err)
		}
		for _, c := range cancelled {
			work = append(work, ended{c.idx, c.name, backend.TaskCancelled})
		}
		count += len(cancelled)
	}
	if err := w.release(wf, release); err != nil {
		return err
	}
	if _, err := w.exec(qWorkflowTasksEnded, wf, int64(count), nowUS); err != nil {
		return fmt.Errorf("count the ended tasks of workflow %d: %w", wf, err)
	}
	return nil
}

// release inserts the jobs of the tasks idxs of workflow wf, which have
// nothing left to wait for, through insertTx like any insert (so the
// inserted counter counts them, and their queues are woken after the
// commit), and makes the tasks active. A task's Delay counts from now.
func (w *wfTx) release(wf int64, idxs []int64) error {
	if len(idxs) == 0 {
		return nil
	}
	slices.Sort(idxs)
	type task struct {
		idx    int64
		params backend.InsertParams
	}
	tasks, err := queryAll(w, qTasksToRelease, []any{wf, jsonInts(idxs)}, func(r *sql.Rows) (task, error) {
		var (
			t                     task
			prio, maxAtt, delayUS int64
			runAt                 sql.NullInt64
			metadata, key         sql.NullString
		)
		if err := r.Scan(&t.idx, &t.params.Queue, &t.params.Type, &t.params.Payload, &prio, &maxAtt, &delayUS, &runAt, &metadata, &key); err != nil {
			return t, err
		}
		md, err := decodeMetadata(metadata.String, metadata.Valid)
		if err != nil {
			return t, err
		}
		t.params.Metadata = md
		t.params.Key = key.String
		t.params.Priority, t.params.MaxAttempts = int(prio), int(maxAtt)
		t.params.Delay = time.Duration(delayUS) * time.Microsecond
		if runAt.Valid {
			t.params.RunAt = fromMicros(runAt.Int64)
		}
		return t, nil
	})
	if err != nil {
		return fmt.Errorf("read the tasks to release of workflow %d: %w", wf, err)
	}
	params := make([]backend.InsertParams, len(tasks))
	for i, t := range tasks {
		params[i] = t.params
	}
	jobs, err := w.insertJobs(wf, params)
	if err != nil {
		return fmt.Errorf("release tasks of workflow %d: %w", wf, err)
	}
	for i, t := range tasks {
		if _, err := w.exec(qTaskActivate, wf, t.idx, jobs[i]); err != nil {
			return fmt.Errorf("activate released tasks of workflow %d: %w", wf, err)
		}
	}
	return nil
}

// insertJobs inserts the jobs of tasks of workflow wf through insertTx,
// marks them as the workflow's and returns their IDs in params' order.
func (w *wfTx) insertJobs(wf int64, params []backend.InsertParams) ([]int64, error) {
	results := make([]backend.InsertResult, len(params))
	if err := insertTx(w.ctx, w.tx, w.st, params, results, w.now); err != nil {
		return nil, err
	}
	ids := make([]int64, len(results))
	for i, r := range results {
		ids[i] = r.ID
		if w.woken != nil {
			w.woken[params[i].Queue] = struct{}{}
		}
	}
	// insertTx numbers the rows of a statement consecutively, and under
	// the write lock one statement's IDs follow the last's: one range,
	// unless something else inserted in between (a caller's transaction
	// cannot, within this call).
	for start := 0; start < len(ids); {
		end := start + 1
		for end < len(ids) && ids[end] == ids[end-1]+1 {
			end++
		}
		r, err := w.exec(qJobsSetWorkflow, wf, ids[start], ids[end-1])
		if err != nil {
			return nil, err
		}
		if n, err := r.RowsAffected(); err != nil || n != int64(end-start) {
			return nil, fmt.Errorf("marked %d jobs of %d as workflow %d's (%v)", n, end-start, wf, err)
		}
		start = end
	}
	return ids, nil
}

// restore brings back the failed task whose job jobID FailedReplay just
// re-created, in the same transaction: the task is active again, its
// workflow running, and the tasks its failure cancelled (reachable from it
// through tasks cancelled because of a dependency) wait again, each
// recomputed in topological order: cancelled again if a DepCancel
// dependency is still failed or cancelled, else waiting for the
// dependencies that have not ended, or released when none is left.
// Dependants that counted the failed task down (DepContinue) wait for it
// again too.
func (w *wfTx) restore(jobID int64) error {
	var wf, idx int64
	err := w.scanRow(qTaskRestore, []any{jobID}, &wf, &idx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("restore the task of job %d: %w", jobID, err)
	}
	back, err := queryAll(w, qTasksDepCancelledFrom, []any{wf, idx}, scanInt)
	if err != nil {
		return fmt.Errorf("find the tasks cancelled by job %d: %w", jobID, err)
	}
	if len(back) > 0 {
		if _, err := w.exec(qTasksRewait, wf, jsonInts(back)); err != nil {
			return fmt.Errorf("restore the tasks cancelled by job %d: %w", jobID, err)
		}
	}
	if _, err := w.exec(qWorkflowReopen, wf, int64(1+len(back))); err != nil {
		return fmt.Errorf("reopen workflow %d: %w", wf, err)
	}
	nowUS := micros(w.now)
	cancelled := 0
	type dep struct {
		name, state string
		policy      int64
	}
	for _, t := range back { // idx order: each task after its dependencies
		deps, err := queryAll(w, qTaskDepsState, []any{wf, t}, func(r *sql.Rows) (d dep, err error) {
			return d, r.Scan(&d.name, &d.state, &d.policy)
		})
		if err != nil {
			return fmt.Errorf("read the dependencies of a task of workflow %d: %w", wf, err)
		}
		for _, d := range deps {
			s := backend.TaskState(d.state)
			if d.policy == int64(backend.DepCancel) && (s == backend.TaskFailed || s == backend.TaskCancelled) {
				if _, err := w.exec(qTaskDepCancel, wf, t, backend.DepCancelReason(d.name, s), nowUS); err != nil {
					return fmt.Errorf("cancel a task of workflow %d: %w", wf, err)
				}
				cancelled++
				break
			}
		}
	}
	// Every waiting dependant of the restored tasks (those brought back
	// included) waits for the dependencies that have not ended.
	counted, err := queryAll(w, qTasksRecount, []any{wf, jsonInts(append(back, idx))}, scanIdxCount)
	if err != nil {
		return fmt.Errorf("recount the tasks of workflow %d: %w", wf, err)
	}
	var release []int64
	for _, c := range counted {
		if c.n == 0 {
			release = append(release, c.idx)
		}
	}
	if err := w.release(wf, release); err != nil {
		return err
	}
	if cancelled > 0 {
		// The replayed task is active, so the workflow stays running.
		if _, err := w.exec(qWorkflowUnfinished, wf, int64(cancelled)); err != nil {
			return fmt.Errorf("count the tasks of workflow %d: %w", wf, err)
		}
	}
	return nil
}
