package jobq

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jobq/jobq/backend"
)

// DefaultMaxPayloadBytes is the payload size limit unless
// ClientConfig.MaxPayloadBytes says otherwise.
const DefaultMaxPayloadBytes = 1 << 20

// ClientConfig configures a Client. The zero value is ready to use.
type ClientConfig struct {
	// MaxPayloadBytes refuses larger payloads at enqueue. Defaults to 1 MiB.
	MaxPayloadBytes int
	// MaxAttempts is the attempt limit for jobs enqueued without one.
	// Defaults to 3.
	MaxAttempts int
	// Registry, when set, supplies each type's declared MaxAttempts (and
	// refuses a job's own that contradicts it). The sync backend requires
	// it: it runs handlers inside Enqueue.
	Registry *Registry
	// Hooks observe (and may annotate) every enqueue, called in order; see
	// ClientHooks.
	Hooks []ClientHooks
}

// Client enqueues jobs. It is safe for concurrent use and cheap to keep for
// the life of the program.
type Client struct {
	b      backend.Backend
	cfg    ClientConfig
	inline bool // b runs each job inside its insert (backend.Inline)
}

// NewClient returns a client that enqueues into b. It fails when cfg has an
// invalid value, or when b is the sync backend and cfg.Registry is nil. A
// sync backend runs jobs with the handlers of the registry its first
// client brought: a later client of the same backend must bring the same
// Registry, or NewClient fails with an error wrapping ErrInvalidInput,
// rather than have the first client's jobs run with other handlers.
func NewClient(b backend.Backend, cfg ClientConfig) (*Client, error) {
	if b == nil {
		return nil, fmt.Errorf("%w: NewClient needs a backend", ErrInvalidInput)
	}
	if cfg.MaxPayloadBytes < 0 {
		return nil, fmt.Errorf("%w: ClientConfig.MaxPayloadBytes %d is negative", ErrInvalidInput, cfg.MaxPayloadBytes)
	}
	if cfg.MaxPayloadBytes == 0 {
		cfg.MaxPayloadBytes = DefaultMaxPayloadBytes
	}
	if cfg.MaxAttempts < 0 || cfg.MaxAttempts > backend.MaxMaxAttempts {
		return nil, fmt.Errorf("%w: ClientConfig.MaxAttempts %d is outside 1..%d", ErrInvalidInput, cfg.MaxAttempts, backend.MaxMaxAttempts)
	}
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.Registry != nil {
		if err := cfg.Registry.check(defaultRetryPolicy); err != nil {
			return nil, err
		}
	}
	in, inline := backend.As[backend.Inline](b)
	if inline {
		if cfg.Registry == nil {
			return nil, fmt.Errorf("%w: the sync backend runs handlers inside Enqueue, so ClientConfig.Registry is required", ErrInvalidInput)
		}
		reg := cfg.Registry
		if bd, ok := backend.As[runnerBinder](b); ok {
			if err := bd.BindRunner(reg); err != nil {
				return nil, fmt.Errorf("ClientConfig.Registry: %w", err)
			}
		}
		in.SetRunner(func(ctx context.Context, row *backend.JobRow) error {
			jc := &jobCtx{job: jobFromRow(row), ref: row.Ref(), backend: b}
			// The backend keeps the last client's runner, so the client
			// that enqueued the job is taken from the insert's context:
			// its hooks, not the last client's, hear of the run.
			enq, _ := ctx.Value(inlineClientKey{}).(*Client)
			if enq != nil {
				// An insert the handler makes past any client is not
				// this client's.
				ctx = context.WithValue(ctx, inlineClientKey{}, (*Client)(nil))
			}
			enq.inlineStarted(ctx, jc.job)
			err := reg.run(ctx, jc, 0)
			enq.inlineFinished(ctx, jc.job, err)
			return err
		})
	}
	return &Client{b: b, cfg: cfg, inline: inline}, nil
}

// inlineClientKey is the context key under which EnqueueMany passes its
// client to the sync backend's runner.
type inlineClientKey struct{}

// inlineStarted runs the InlineStarted hooks of c, which may be nil (an
// insert that came through no client).
func (c *Client) inlineStarted(ctx context.Context, job *Job) {
	if c == nil {
		return
	}
	for _, h := range c.cfg.Hooks {
		if h.InlineStarted != nil {
			h.InlineStarted(ctx, job)
		}
	}
}

// inlineFinished runs the InlineFinished hooks of c, which may be nil.
func (c *Client) inlineFinished(ctx context.Context, job *Job, err error) {
	if c == nil {
		return
	}
	for _, h := range c.cfg.Hooks {
		if h.InlineFinished != nil {
			h.InlineFinished(ctx, job, err)
		}
	}
}

// runnerBinder is implemented by the sync backend (inline.Backend): it
// refuses to run a second registry's handlers for the first's jobs.
type runnerBinder interface {
	BindRunner(owner any) error
}

// Backend returns the backend the client enqueues into.
func (c *Client) Backend() backend.Backend { return c.b }

// JobSpec is one job for EnqueueMany.
type JobSpec struct {
	Type    string // may be empty when Payload names its own (Args)
	Payload any    // marshalled with encoding/json; []byte and json.RawMessage are taken as JSON text
	Options []EnqueueOption
}

// EnqueueResult is the outcome of one JobSpec.
type EnqueueResult struct {
	ID        int64
	Duplicate bool // not inserted: ID is the live job holding the unique key
	// Replaced says the duplicate's Replace or Debounce option changed the
	// waiting job holding the key (its payload and due time); false when
	// that job was already running.
	Replaced bool
}

// Enqueue stores a job of type typ with payload (marshalled to JSON; []byte
// and json.RawMessage are taken as JSON text) and returns its ID without
// waiting for it to run. Bad input (empty type, invalid queue name, payload
// that is not JSON or is over the size limit, option out of range) returns an
// error wrapping ErrInvalidInput and writes nothing. A unique-key collision
// returns the existing job's ID and ErrDuplicate. On the sync backend the
// handler runs before Enqueue returns and its error is returned.
func (c *Client) Enqueue(ctx context.Context, typ string, payload any, opts ...EnqueueOption) (int64, error) {
	res, err := c.EnqueueMany(ctx, []JobSpec{{Type: typ, Payload: payload, Options: opts}})
	if err != nil {
		return 0, err
	}
	if res[0].Duplicate {
		if res[0].Replaced {
			return res[0].ID, fmt.Errorf("enqueue %s: %w (the waiting job took this one's payload and due time)", typ, ErrDuplicate)
		}
		return res[0].ID, fmt.Errorf("enqueue %s: %w", typ, ErrDuplicate)
	}
	return res[0].ID, nil
}

// EnqueueMany stores a batch in one transaction: all of them or, on any
// error, none. Unique-key collisions are not errors here: they are reported
// per job in the result.
func (c *Client) EnqueueMany(ctx context.Context, jobs []JobSpec) ([]EnqueueResult, error) {
	params, jobCtxs, err := c.params(ctx, jobs, false)
	if err != nil {
		c.afterEnqueue(ctx, jobCtxs, params, nil, err, enqueued{})
		return nil, err
	}
	insCtx := ctx
	if c.inline {
		insCtx = context.WithValue(ctx, inlineClientKey{}, c)
	}
	// The backend's error already names the step ("insert jobs: …").
	rows, err := c.b.JobInsertMany(insCtx, params)
	res := toResults(rows)
	c.afterEnqueue(ctx, jobCtxs, params, res, err, enqueued{sent: true})
	return res, err
}

// EnqueueTx stores a job inside tx, a transaction the caller owns (on
// Postgres a pgx.Tx or *sql.Tx): the job exists if and only if tx commits.
// It returns ErrNotSupported on backends without transactional enqueue.
func (c *Client) EnqueueTx(ctx context.Context, tx any, typ string, payload any, opts ...EnqueueOption) (int64, error) {
	txi, ok := backend.As[backend.TxInserter](c.b)
	if !ok {
		return 0, fmt.Errorf("enqueue %s in transaction: %w", typ, ErrNotSupported)
	}
	params, jobCtxs, err := c.params(ctx, []JobSpec{{Type: typ, Payload: payload, Options: opts}}, true)
	if err != nil {
		c.afterEnqueue(ctx, jobCtxs, params, nil, err, enqueued{inTx: true})
		return 0, err
	}
	rows, err := txi.JobInsertManyTx(ctx, tx, params)
	c.afterEnqueue(ctx, jobCtxs, params, toResults(rows), err, enqueued{inTx: true, sent: true})
	if err != nil {
		return 0, err
	}
	if rows[0].Duplicate {
		return rows[0].ID, fmt.Errorf("enqueue %s: %w", typ, ErrDuplicate)
	}
	return rows[0].ID, nil
}

// CompleteTx marks the job whose handler ctx belongs to as done inside tx,
// the handler's own transaction, so the handler's writes and the completion
// commit together: if tx rolls back, the job is still held and the handler's
// return value decides its fate as usual. When the handler then returns
// nil the worker writes nothing more; if tx did not commit after all, the
// job stays reserved until its lease expires and runs again. It returns
// ErrNotFound when the
// job's lease was lost (roll back then), and ErrNotSupported on backends
// without it. A workflow task completed this way succeeds with no result:
// one SetResult recorded is dropped, so a task whose dependants read its
// result should let the worker complete it.
func CompleteTx(ctx context.Context, tx any) error {
	jc, ok := ctx.Value(jobCtxKey{}).(*jobCtx)
	if !ok {
		return fmt.Errorf("%w: CompleteTx must be called with a handler's context", ErrInvalidInput)
	}
	txc, ok := backend.As[backend.TxCompleter](jc.backend)
	if !ok {
		return fmt.Errorf("complete job %d in transaction: %w", jc.ref.ID, ErrNotSupported)
	}
	if jc.completingInTx != nil {
		jc.completingInTx()
	}
	if err := txc.JobCompleteTx(ctx, tx, jc.ref); err != nil {
		return fmt.Errorf("complete job %d in transaction: %w", jc.ref.ID, err)
	}
	jc.completedInTx.Store(true)
	return nil
}

// enqueued is what the AfterEnqueue hooks hear of one call beyond its
// jobs, their results and its error.
type enqueued struct {
	inTx bool // EnqueueTx, EnqueueWorkflowTx
	sent bool // the call reached the backend: EnqueueInfo.Insert is set
	// tasks are the workflow tasks' names, in the order of the call's
	// jobs; nil for jobs enqueued alone.
	tasks    []string
	workflow int64 // the stored workflow's ID
}

// afterEnqueue runs the AfterEnqueue hooks for each job of a call, with
// the job's context (jobCtxs[i], nil when no BeforeEnqueue hook ran: the
// call's); res is nil when the call failed.
func (c *Client) afterEnqueue(ctx context.Context, jobCtxs []context.Context, params []backend.InsertParams, res []EnqueueResult, err error, e enqueued) {
	for _, h := range c.cfg.Hooks {
		if h.AfterEnqueue == nil {
			continue
		}
		for i, p := range params {
			var r EnqueueResult
			if err == nil && i < len(res) {
				r = res[i]
			}
			jctx := ctx
			if i < len(jobCtxs) && jobCtxs[i] != nil {
				jctx = jobCtxs[i]
			}
			info := EnqueueInfo{Type: p.Type, Queue: p.Queue, Metadata: p.Metadata, Context: jctx, InTx: e.inTx, Workflow: e.workflow}
			if i < len(e.tasks) {
				info.Task = e.tasks[i]
			}
			if e.sent {
				info.Insert = &params[i]
			}
			h.AfterEnqueue(jctx, info, r, err)
		}
	}
}

func toResults(rows []backend.InsertResult) []EnqueueResult {
	if rows == nil {
		return nil
	}
	out := make([]EnqueueResult, len(rows))
	for i, r := range rows {
		out[i] = EnqueueResult{ID: r.ID, Duplicate: r.Duplicate, Replaced: r.Replaced}
	}
	return out
}

// params validates and converts specs, refusing the whole batch on the first
// bad one so nothing is written. With client hooks it also returns each
// job's context as the BeforeEnqueue hooks left it (nil without hooks). On
// error it returns the params of the jobs the BeforeEnqueue hooks saw (up
// to the bad one), so the AfterEnqueue hooks hear of each of them.
func (c *Client) params(ctx context.Context, jobs []JobSpec, inTx bool) ([]backend.InsertParams, []context.Context, error) {
	out := make([]backend.InsertParams, len(jobs))
	var jobCtxs []context.Context
	if len(c.cfg.Hooks) > 0 {
		jobCtxs = make([]context.Context, len(jobs))
	}
	for i, j := range jobs {
		jctx, p, _, err := c.jobParam(ctx, j, jobCall{inTx: inTx})
		out[i] = p
		if jobCtxs != nil {
			jobCtxs[i] = jctx
		}
		if err != nil {
			if len(jobs) > 1 {
				return out[:i+1], jobCtxs, fmt.Errorf("enqueue job %d of %d: %w", i+1, len(jobs), err)
			}
			return out[:1], jobCtxs, fmt.Errorf("enqueue: %w", err)
		}
	}
	return out, jobCtxs, nil
}

// param turns one spec for a job alone into insert params, as jobParam.
func (c *Client) param(ctx context.Context, j JobSpec) (context.Context, backend.InsertParams, error) {
	ctx, p, _, err := c.jobParam(ctx, j, jobCall{})
	return ctx, p, err
}

// jobCall is how a job is enqueued, as the BeforeEnqueue hooks are told.
type jobCall struct {
	inTx bool
	// task is the workflow task's name; workflow says the job is one
	// (a name may be empty until the graph is validated).
	task     string
	workflow bool
}

// jobParam turns one spec into insert params, returning the job's context
// as the BeforeEnqueue hooks left it, and for a workflow task
// (call.workflow) its dependencies: a job alone refuses dependency
// options. On error the params still name the job's queue, type and
// metadata, for the AfterEnqueue hooks.
func (c *Client) jobParam(ctx context.Context, j JobSpec, call jobCall) (context.Context, backend.InsertParams, []backend.Dep, error) {
	if j.Type == "" {
		j.Type, _ = kindOfValue(j.Payload) // a payload that names its type
	}
	o := enqueueOptions{queue: DefaultQueue}
	if k, ok := j.Payload.(Keyed); ok {
		o.key = jobKeyOf(k)
	}
	for _, opt := range j.Options {
		opt(&o)
	}
	ctx, err := c.beforeEnqueue(ctx, j.Type, &o, call)
	named := backend.InsertParams{Queue: o.queue, Type: j.Type, Metadata: o.metadata}
	if err != nil {
		return ctx, named, nil, err
	}
	if o.hasDeps && !call.workflow {
		return ctx, named, nil, &backend.InputError{Field: "options", Reason: "After and AfterEnded are for workflow tasks: add the job to a jobq.Workflow"}
	}
	if msg := kindMismatch(j.Type, j.Payload); msg != "" {
		return ctx, named, nil, &backend.InputError{Field: "type", Reason: msg}
	}
	payload, err := marshalPayload(j.Payload)
	if err != nil {
		return ctx, named, nil, err
	}
	if len(payload) > c.cfg.MaxPayloadBytes {
		return ctx, named, nil, &backend.InputError{Field: "payload", Reason: fmt.Sprintf("%d bytes is over the %d-byte limit (ClientConfig.MaxPayloadBytes)", len(payload), c.cfg.MaxPayloadBytes)}
	}
	if c.cfg.Registry != nil {
		if h, ok := c.cfg.Registry.lookup(j.Type); ok && h.opts.MaxAttempts > 0 {
			if o.maxAttempts != 0 && o.maxAttempts != h.opts.MaxAttempts {
				// Workers apply the type's limit: this one would be ignored.
				return ctx, named, nil, &backend.InputError{Field: "max attempts", Reason: fmt.Sprintf("%d contradicts the %d that type %q declares (HandlerOptions.MaxAttempts), which workers apply to every job of it", o.maxAttempts, h.opts.MaxAttempts, j.Type)}
			}
			o.maxAttempts = h.opts.MaxAttempts
		}
	}
	if o.maxAttempts == 0 {
		o.maxAttempts = c.cfg.MaxAttempts
	}
	if o.uniqueBy != nil {
		if o.uniqueKey, err = uniqueIdentity(j.Type, &o, payload, j.Payload, time.Now()); err != nil {
			return ctx, named, nil, err
		}
	}
	if err := o.conflictMode(call.workflow); err != nil {
		return ctx, named, nil, err
	}
	p := backend.InsertParams{
		Queue: o.queue, Type: j.Type, Payload: payload, Priority: o.priority,
		MaxAttempts: o.maxAttempts, Delay: o.delay, RunAt: o.runAt, UniqueKey: o.uniqueKey,
		Metadata: o.metadata, Key: o.key,
		OnConflict: o.onConflict, Debounce: o.debounce, DebounceMax: o.debounceMax, KeepLast: o.keepLast,
		Deadline: o.deadline,
	}
	if o.uniqueBy != nil {
		p.UniqueStates = o.uniqueBy.States
	}
	return ctx, p, o.deps, backend.ValidateInsert(p)
}

// beforeEnqueue lets the BeforeEnqueue hooks see the job, add to its
// metadata and make its context; it returns that context.
func (c *Client) beforeEnqueue(ctx context.Context, typ string, o *enqueueOptions, call jobCall) (context.Context, error) {
	for _, h := range c.cfg.Hooks {
		if h.BeforeEnqueue == nil {
			continue
		}
		if o.metadata == nil {
			o.metadata = map[string]string{}
		}
		info := EnqueueInfo{Type: typ, Queue: o.queue, Metadata: o.metadata, Context: ctx, InTx: call.inTx, Task: call.task}
		err := h.BeforeEnqueue(ctx, &info)
		if info.Context != nil {
			ctx = info.Context
		}
		o.metadata = info.Metadata
		if err != nil {
			return ctx, fmt.Errorf("before enqueue hook: %w", err)
		}
	}
	if len(o.metadata) == 0 {
		o.metadata = nil
	}
	return ctx, nil
}

func marshalPayload(v any) ([]byte, error) {
	switch p := v.(type) {
	case nil:
		return []byte("{}"), nil
	case json.RawMessage:
		return p, nil
	case []byte:
		return p, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, &backend.InputError{Field: "payload", Reason: "marshal to JSON: " + err.Error()}
	}
	return b, nil
}
