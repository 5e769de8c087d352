package jobq

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime/debug"
	"sort"
	"sync"
	"time"

	"github.com/jobq/jobq/backend"
)

// HandlerFunc runs one attempt of a job. Returning nil marks the job done;
// an error retries it (see RetryPolicy), unless wrapped with Permanent or the
// attempts are spent, which moves it to failed_jobs. The context is cancelled
// at the type's timeout, when the worker shuts down past its grace period, or
// when the job's lease was lost.
type HandlerFunc func(ctx context.Context, job *Job) error

// HandlerOptions tunes one job type. Zero fields fall back to the worker's
// settings.
type HandlerOptions struct {
	// Timeout bounds one attempt. Defaults to WorkerConfig.JobTimeout.
	Timeout time.Duration
	// Retry overrides the worker's retry policy for this type, field by
	// field.
	Retry RetryPolicy
	// MaxAttempts is the default for jobs of this type enqueued through a
	// client that has this registry. Defaults to ClientConfig.MaxAttempts.
	MaxAttempts int
}

type handlerEntry struct {
	fn   HandlerFunc
	opts HandlerOptions
}

// Registry maps job types to handlers. The worker itself knows no types:
// whatever is registered here is what it can run. It is safe for concurrent
// use; register before starting workers.
type Registry struct {
	mu       sync.RWMutex
	handlers map[string]handlerEntry
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{handlers: map[string]handlerEntry{}} }

// HandleFunc registers fn for jobs of type typ, receiving the raw payload.
// Registering a type twice, an empty type or a nil fn panics: these are
// programming errors found at start-up.
func (r *Registry) HandleFunc(typ string, fn HandlerFunc, opts ...HandlerOptions) {
	if typ == "" || fn == nil {
		panic("jobq: HandleFunc needs a type and a handler")
	}
	var o HandlerOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.handlers[typ]; dup {
		panic("jobq: handler for type " + typ + " registered twice")
	}
	r.handlers[typ] = handlerEntry{fn: fn, opts: o}
}

// Handle registers a typed handler: the job's JSON payload is decoded into a
// T before fn runs. A payload that does not decode fails the job
// permanently, since no retry can fix it. The job itself is available
// through JobFromContext.
func Handle[T any](r *Registry, typ string, fn func(ctx context.Context, args T) error, opts ...HandlerOptions) {
	r.HandleFunc(typ, func(ctx context.Context, job *Job) error {
		var args T
		if err := json.Unmarshal(job.Payload, &args); err != nil {
			return Permanent(fmt.Errorf("decode %s payload: %w", typ, err))
		}
		return fn(ctx, args)
	}, opts...)
}

// Types lists the registered types, sorted.
func (r *Registry) Types() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.handlers))
	for t := range r.handlers {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

func (r *Registry) lookup(typ string) (handlerEntry, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	h, ok := r.handlers[typ]
	return h, ok
}

// errNoHandler is an ordinary (retryable) failure: another deployment of the
// workers may know the type.
type errNoHandler struct{ typ string }

func (e errNoHandler) Error() string { return "no handler registered for type " + e.typ }

// run executes one attempt: looks the handler up, bounds it with timeout
// (when > 0), and turns a panic into an error carrying the stack, so a bad
// handler costs one attempt and never the worker. jc travels in the
// handler's context (see JobFromContext and CompleteTx).
func (r *Registry) run(ctx context.Context, jc *jobCtx, row *backend.JobRow, timeout time.Duration) (err error) {
	h, ok := r.lookup(row.Type)
	if !ok {
		return errNoHandler{typ: row.Type}
	}
	if h.opts.Timeout > 0 {
		timeout = h.opts.Timeout
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	ctx = context.WithValue(ctx, jobCtxKey{}, jc)
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v\n%s", p, debug.Stack())
		}
	}()
	return h.fn(ctx, jc.job)
}
