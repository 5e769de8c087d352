package postgres

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/jobq/jobq/backend"
)

// How a task's job ends its task.
//
// The statements that end jobs on the hot paths (sqlComplete and
// sqlCompleteKeep, sqlRelease, sqlSweep, sqlFinishCancelled,
// sqlSweepCancelled) each commit alone, so they cannot end a task in the
// same transaction. They therefore leave the jobs of tasks alone (one
// more condition, workflow_id IS NULL, on a row they read anyway: no
// extra round trip and no extra work for a plain job), and what they
// leave is settled by settleTasks: one transaction that ends the job
// (sqlTaskSettle) and its task (endTasks). A plain job's completion is
// unchanged; a task's costs that transaction, pipelined (pipeline.go):
// two round trips more, however many workflows the batch touches, unless
// a task failed or was cancelled. The callers find the claims left:
// sqlComplete names the held claims of tasks among the outcomes it did not
// apply; sqlRelease's refused refs are checked by sqlFinishCancelled,
// which names them too; the sweep's second statement says whether expired
// claims of tasks wait.
//
// The paths that run in a transaction anyway end the task in it: JobCancel
// (sqlCancel returns the workflow of each job it cancelled), JobCompleteTx
// (sqlCompleteOne returns it), FailedReplay (workflow_replay.go) and
// WorkflowCancel.

// taskEnd is a task's job that became terminal in the current transaction.
type taskEnd struct {
	workflow, job int64
	state         backend.TaskState // succeeded, failed or cancelled
	result        []byte            // succeeded: the outcome's result, nil for none
	reason        string            // failed: the job's error; cancelled: backend.CancelledError
}

// endTasks ends the tasks of ends in the transaction q runs in, one
// workflow at a time in ID order (the lock order of workflow_sql.go),
// after locking them and their dependants (sqlTaskLock): each
// task still active with that job ends, its edges resolve (releasing or
// cancelling dependants, level after level while cancels cascade) and
// the workflow row counts them, ending the workflow with its last task.
// With notify, released jobs due now are announced inside the transaction
// (a caller's, whose commit the backend cannot see); otherwise their
// queues are returned for b.wake after the commit.
func (b *Backend) endTasks(ctx context.Context, q rowQuerier, notify bool, ends []taskEnd) ([]string, error) {
	p := &seqPipe{q: q}
	var due []string
	if err := b.queueEnds(ctx, p, notify, ends, &due); err != nil {
		return nil, err
	}
	if err := p.flush(ctx); err != nil {
		return nil, err
	}
	return due, nil
}

// queueEnds is endTasks on a pipeline: the statements go out in the same
// order, but those that need no reply before the next are sent together.
// The lock and the ends of workflows whose tasks all succeeded form one
// batch, since a success cancels nothing and so never cascades; a
// workflow with a task that failed or was cancelled is sent before the
// next is queued, so its cascade runs before the next workflow is
// touched, as when sent one by one. The last batch is left queued, for
// the caller's COMMIT to go with it; due is complete once it is sent.
func (b *Backend) queueEnds(ctx context.Context, p pipeline, notify bool, ends []taskEnd, due *[]string) error {
	if len(ends) == 0 {
		return nil
	}
	ends = slices.Clone(ends)
	slices.SortFunc(ends, func(x, y taskEnd) int {
		return cmp.Or(cmp.Compare(x.workflow, y.workflow), cmp.Compare(x.job, y.job))
	})
	wq := b.wq()
	endSQL, cascadeSQL := wq.end, wq.cascade
	if notify {
		endSQL, cascadeSQL = wq.endNotify, wq.cascadeNotify
	}
	wfs := make([]int64, len(ends))
	jobIDs := make([]int64, len(ends))
	for i, e := range ends {
		wfs[i], jobIDs[i] = e.workflow, e.job
	}
	var locked int32
	p.queue(wq.lockEnds, []any{wfs, jobIDs}, []any{&locked}, func() error { return nil })
	seen := map[string]bool{}
	var (
		kind string
		num  int32
		text string
	)
	dest := []any{&kind, &num, &text}
	for len(ends) > 0 {
		n := 1
		for n < len(ends) && ends[n].workflow == ends[0].workflow {
			n++
		}
		group, wf := ends[:n], ends[0].workflow
		ends = ends[n:]

		jobs := make([]int64, len(group))
		states := make([]string, len(group))
		results := make([]pgtype.Text, len(group))
		reasons := make([]pgtype.Text, len(group))
		succeeded := true
		for i, e := range group {
			jobs[i], states[i] = e.job, string(e.state)
			results[i] = pgtype.Text{String: string(e.result), Valid: e.result != nil && e.state == backend.TaskSucceeded}
			reasons[i] = pgtype.Text{String: e.reason, Valid: e.state != backend.TaskSucceeded}
			succeeded = succeeded && e.state == backend.TaskSucceeded
		}
		var (
			next       []int32
			names      []string
			ended, bad int32
		)
		collect := func() error {
			switch kind {
			case "e":
				ended++
				if text != string(backend.TaskSucceeded) {
					bad++
				}
			case "c":
				if succeeded {
					return fmt.Errorf("workflow %d: task %s cancelled by tasks that all succeeded", wf, text)
				}
				next = append(next, num)
				names = append(names, text)
			case "q":
				if !seen[text] {
					seen[text] = true
					*due = append(*due, text)
				}
			}
			return nil
		}
		p.queue(endSQL, []any{wf, jobs, states, results, reasons}, dest, collect)
		if succeeded {
			continue
		}
		if err := p.flush(ctx); err != nil {
			return err
		}
		for len(next) > 0 {
			level, levelNames := next, names
			next, names = nil, nil
			p.queue(cascadeSQL, []any{wf, level, levelNames, ended, bad}, dest, collect)
			if err := p.flush(ctx); err != nil {
				return err
			}
			ended += int32(len(level))
			bad += int32(len(level))
		}
	}
	return nil
}

// Kinds of sqlTaskSettle beyond the outcome kinds of sqlComplete (1 done,
// 3 fail) and sqlCompleteKeep (4 done and kept).
const (
	kindRelease = 5 // a release that spends the last attempt
	kindExpired = 6 // an expired lease with no attempt left
)

// taskClaim is a held claim of a task's job that a hot statement left for
// settleTasks, with what its holder reported.
type taskClaim struct {
	ref    backend.JobRef
	kind   int32 // see sqlTaskSettle
	err    string
	result []byte
	took   time.Duration // a failed job's entry in errors (see appendErrors)
	worker string
}

// settled is a job sqlTaskSettle ended.
type settled struct {
	key      claimKey
	ending   backend.TaskState
	attempts int
	queue    string
	typ      string
}

// settleTasks ends the claims of tasks' jobs the hot statements left (see
// the top of this file) and their tasks, in one transaction, and wakes the
// queues of the jobs that released. Claims that no longer match (stale)
// are not in the result. The transaction is pipelined (pipeline.go): the
// BEGIN goes with the settle, and, unless a task failed or was cancelled,
// the lock and every workflow's end go with the COMMIT, three round
// trips in all with the completion's own.
func (b *Backend) settleTasks(ctx context.Context, op string, claims []taskClaim) ([]settled, error) {
	var out []settled
	var due []string
	err := b.do(ctx, op, func(ctx context.Context) error {
		return b.inPipeTx(ctx, func(p *batchPipe) error {
			var err error
			due = nil
			out, err = b.settleIn(ctx, p, claims, &due)
			return err
		})
	})
	if err != nil {
		return nil, err
	}
	b.wake(due)
	return out, nil
}

// settleIn is settleTasks on p, a pipeline in a transaction: it returns
// the jobs ended, and adds to due the queues of the jobs released. It
// leaves the last statements queued, for the COMMIT to go with them: due
// is complete once they are sent.
func (b *Backend) settleIn(ctx context.Context, p pipeline, claims []taskClaim, due *[]string) ([]settled, error) {
	n := len(claims)
	ids := make([]int64, n)
	tokens := make([]int64, n)
	kinds := make([]int32, n)
	errs := make([]string, n)
	tooks := make([]int64, n)
	workers := make([]string, n)
	kept := make([]pgtype.Text, n) // a kept job's result, stored with it
	results := make(map[claimKey][]byte, n)
	for i, c := range claims {
		ids[i], tokens[i], kinds[i], errs[i] = c.ref.ID, c.ref.Token, c.kind, c.err
		tooks[i], workers[i] = micros(c.took), c.worker
		kept[i] = pgtype.Text{String: string(c.result), Valid: c.result != nil && c.kind == kindDoneKeep}
		results[keyOf(c.ref)] = c.result
	}
	var (
		out  []settled
		ends []taskEnd
		s    settled
		wf   int64
		end  string
		msg  pgtype.Text
	)
	p.queue(b.wq().settle, []any{ids, tokens, kinds, errs, int32(backend.MaxFreeReleases), tooks, workers, kept},
		[]any{&s.key.id, &s.key.token, &wf, &end, &msg, &s.attempts, &s.queue, &s.typ}, func() error {
			s.ending = backend.TaskState(end)
			out = append(out, s)
			e := taskEnd{workflow: wf, job: s.key.id, state: s.ending}
			switch s.ending {
			case backend.TaskSucceeded:
				e.result = results[s.key]
			case backend.TaskFailed:
				e.reason = msg.String
			default:
				e.reason = backend.CancelledError
			}
			ends = append(ends, e)
			return nil
		})
	if err := p.flush(ctx); err != nil {
		return nil, err
	}
	if err := b.queueEnds(ctx, p, false, ends, due); err != nil {
		return nil, err
	}
	return out, nil
}

// settleStale settles the claims of tasks among the refs a hot statement
// did not apply (tasks, as sqlFinishCancelled named them): claim builds
// each one's taskClaim. It returns the claims that ended cancelled and
// those that ended otherwise (applied); the rest are stale.
func (b *Backend) settleStale(ctx context.Context, op string, tasks []claimKey, claim func(claimKey) taskClaim) (cancelled, applied map[claimKey]bool, err error) {
	if len(tasks) == 0 {
		return nil, nil, nil
	}
	claims := make([]taskClaim, len(tasks))
	for i, k := range tasks {
		claims[i] = claim(k)
	}
	ended, err := b.settleTasks(ctx, op, claims)
	if err != nil {
		return nil, nil, err
	}
	cancelled, applied = map[claimKey]bool{}, map[claimKey]bool{}
	for _, s := range ended {
		if s.ending == backend.TaskCancelled {
			cancelled[s.key] = true
		} else {
			applied[s.key] = true
		}
	}
	return cancelled, applied, nil
}

// sweepTasks is the lease sweep of tasks' jobs (see LeaseSweep): up to
// limit expired claims with no attempt left move to failed_jobs, and
// expired cancelling ones end cancelled, each with its task. It returns
// the jobs failed, as the sweep reports them, and the number cancelled.
func (b *Backend) sweepTasks(ctx context.Context, limit int) ([]backend.SweptJob, int, error) {
	var out []settled
	var due []string
	err := b.do(ctx, "sweep leases of tasks", func(ctx context.Context) error {
		return b.inPipeTx(ctx, func(p *batchPipe) error {
			var claims []taskClaim
			var c taskClaim
			p.queue(b.wq().expired, []any{limit}, []any{&c.ref.ID, &c.ref.Token}, func() error {
				claims = append(claims, taskClaim{ref: c.ref, kind: kindExpired, err: backend.LeaseExpiredError})
				return nil
			})
			out, due = nil, nil
			if err := p.flush(ctx); err != nil || len(claims) == 0 {
				return err
			}
			var err error
			out, err = b.settleIn(ctx, p, claims, &due)
			return err
		})
	})
	if err != nil {
		return nil, 0, err
	}
	b.wake(due)
	var swept []backend.SweptJob
	cancelled := 0
	for _, s := range out {
		if s.ending == backend.TaskCancelled {
			cancelled++
			continue
		}
		swept = append(swept, backend.SweptJob{
			Ref:   backend.JobRef{ID: s.key.id, Attempt: s.attempts, Token: s.key.token},
			Queue: s.queue, Type: s.typ, Failed: true,
		})
	}
	return swept, cancelled, nil
}
