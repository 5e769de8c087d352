package postgres

import (
	"context"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/jobq/jobq/backend"
)

var (
	_ backend.Workflower         = (*Backend)(nil)
	_ backend.WorkflowTxInserter = (*Backend)(nil)
)

// WorkflowInsert implements backend.Workflower in one statement (see
// sqlWorkflowInsert), which commits alone: the workflow, its tasks, its
// edges and the jobs of the tasks without dependencies, or nothing. Those
// jobs due now wake subscribers like any insert.
func (b *Backend) WorkflowInsert(ctx context.Context, params backend.WorkflowParams) (*backend.WorkflowInserted, error) {
	const op = "insert workflow"
	args, err := workflowArgs(params)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	var res *backend.WorkflowInserted
	var due []string
	err = b.do(ctx, op, func(ctx context.Context) error {
		var err error
		res, due, err = insertWorkflow(ctx, pgxRows(b.pool), b.wq().insert, args)
		return err
	})
	if err != nil {
		return nil, err
	}
	b.wake(due)
	return res, nil
}

// WorkflowInsertTx implements backend.WorkflowTxInserter: the workflow is
// inserted by the caller's transaction, so it exists if and only if that
// transaction commits, and workers hear of its first jobs only then. tx is
// as for JobInsertManyTx (a pgx.Tx, or a *sql.Tx of the pgx stdlib
// driver); a failed insert aborts it.
func (b *Backend) WorkflowInsertTx(ctx context.Context, tx any, params backend.WorkflowParams) (*backend.WorkflowInserted, error) {
	const op = "insert workflow in tx"
	query, err := txQuerier(tx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	args, err := workflowArgs(params)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	var res *backend.WorkflowInserted
	err = b.doInTx(ctx, op, func(ctx context.Context) error {
		var err error
		res, _, err = insertWorkflow(ctx, query, b.wq().insertNotify, args)
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// insertWorkflow runs sqlWorkflowInsert and returns what it inserted and
// the queues that got a job due now.
func insertWorkflow(ctx context.Context, query rowQuerier, stmt string, args []any) (*backend.WorkflowInserted, []string, error) {
	res := &backend.WorkflowInserted{Jobs: map[string]int64{}}
	var (
		name, queue string
		job         int64
		due         bool
		queues      []string
		seen        = map[string]bool{}
	)
	err := query(ctx, stmt, args, []any{&res.ID, &name, &job, &queue, &due}, func() error {
		res.Jobs[name] = job
		if due && !seen[queue] {
			seen[queue] = true
			queues = append(queues, queue)
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	if res.ID == 0 {
		return nil, nil, fmt.Errorf("the insert returned no job")
	}
	return res, queues, nil
}

// workflowArgs validates p (backend.ValidateWorkflow) and builds
// sqlWorkflowInsert's parameters: the tasks in the topological order
// ValidateWorkflow returned, each one's place in it being its idx, and one
// edge per dependency.
func workflowArgs(p backend.WorkflowParams) ([]any, error) {
	order, err := backend.ValidateWorkflow(p)
	if err != nil {
		return nil, err
	}
	n := len(order)
	idx := make(map[string]int32, n) // task name -> idx
	for k, i := range order {
		idx[p.Tasks[i].Name] = int32(k)
	}
	var (
		names       = make([]string, n)
		qnames      = make([]string, n)
		waiting     = make([]int32, n)
		queues      = make([]string, n)
		types       = make([]string, n)
		payloads    = make([]string, n)
		priorities  = make([]int32, n)
		maxAttempts = make([]int32, n)
		delays      = make([]int64, n)
		runAt       = make([]pgtype.Timestamptz, n)
		metadata    []pgtype.Text // NULL, which unnest pads with NULLs, unless some task has metadata
		keys        []pgtype.Text // NULL likewise, unless some task's job has a key
		from, to    []int32
		pos, policy []int32
	)
	for k, i := range order {
		t := p.Tasks[i]
		j := t.Job
		names[k], qnames[k] = t.Name, strconv.Quote(t.Name) // %q, as backend.DepCancelReason quotes
		waiting[k] = int32(len(t.Deps))
		queues[k], types[k], payloads[k] = j.Queue, j.Type, string(j.Payload)
		priorities[k], maxAttempts[k] = int32(j.Priority), int32(j.MaxAttempts)
		delays[k] = micros(j.Delay)
		runAt[k] = pgtype.Timestamptz{Time: j.RunAt, Valid: !j.RunAt.IsZero()}
		if len(j.Metadata) > 0 {
			if metadata == nil {
				metadata = make([]pgtype.Text, n)
			}
			metadata[k] = encodeMetadata(j.Metadata)
		}
		if j.Key != "" {
			if keys == nil {
				keys = make([]pgtype.Text, n)
			}
			keys[k] = pgtype.Text{String: j.Key, Valid: true}
		}
		for m, d := range t.Deps {
			from = append(from, idx[d.Task])
			to = append(to, int32(k))
			pos = append(pos, int32(m))
			policy = append(policy, int32(d.Policy))
		}
	}
	return []any{p.Name, int32(n), names, qnames, waiting, queues, types, payloads, priorities, maxAttempts,
		delays, runAt, metadata, from, to, pos, policy, keys}, nil
}
