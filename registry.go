package jobq

import (
	"context"
	"encoding/json"
	"errors"
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
// settings. NewWorker and NewClient check every registered type's options
// with the rules WorkerConfig follows and refuse bad ones with an error
// naming the type, the field and the limit.
type HandlerOptions struct {
	// Timeout bounds one attempt. Defaults to WorkerConfig.JobTimeout;
	// negative is refused.
	Timeout time.Duration
	// Retry overrides the worker's retry policy for this type, field by
	// field; the merged policy must be valid (see RetryPolicy).
	Retry RetryPolicy
	// MaxAttempts is the attempt limit of every job of this type: a
	// worker applies it however the job was enqueued (a client without
	// this registry, 'jobq enqueue', the HTTP API), and a client that has
	// this registry stores it and refuses a job's own MaxAttempts that
	// says otherwise. Zero leaves each job its own (ClientConfig.MaxAttempts
	// unless the job sets one); otherwise 1..1000.
	MaxAttempts int
}

// check refuses options no worker could honour. base is the worker's
// retry policy, with which Retry is merged (nil: the defaults).
func (o HandlerOptions) check(typ string, base RetryPolicy) error {
	field := fmt.Sprintf("HandlerOptions for type %q", typ)
	if o.Timeout < 0 {
		return fmt.Errorf("%w: %s: Timeout %s is negative", ErrInvalidInput, field, o.Timeout)
	}
	if o.MaxAttempts < 0 || o.MaxAttempts > backend.MaxMaxAttempts {
		return fmt.Errorf("%w: %s: MaxAttempts %d is outside 1..%d (0 means the client's default)", ErrInvalidInput, field, o.MaxAttempts, backend.MaxMaxAttempts)
	}
	if err := o.Retry.validate(field + ": Retry"); err != nil {
		return err
	}
	return o.Retry.withDefaults(base).validate(field + ": Retry merged with the worker's")
}

type handlerEntry struct {
	fn   HandlerFunc
	opts HandlerOptions
}

// Registry maps job types to handlers. The worker itself knows no types:
// whatever is registered here is what it can run. It is safe for concurrent
// use; register before starting workers.
type Registry struct {
	mu         sync.RWMutex
	handlers   map[string]handlerEntry
	middleware []Middleware
	// wrapped holds each registered type's handler inside the middleware,
	// made on the type's first attempt: wrapping on every attempt cost an
	// allocation per middleware per job. HandleFunc and Use start it
	// afresh and raise gen, so a wrapping made from what they replaced is
	// not stored.
	wrapped map[string]HandlerFunc
	gen     uint64
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{handlers: map[string]handlerEntry{}, wrapped: map[string]HandlerFunc{}}
}

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
	r.changed()
}

// changed drops the wrapped handlers after a registration or a
// middleware was added; r.mu is held.
func (r *Registry) changed() {
	r.gen++
	clear(r.wrapped)
}

// Handle registers a typed handler: the job's JSON payload is decoded into a
// T before fn runs. A payload that does not decode fails the job
// permanently, since no retry can fix it. The job itself is available
// through JobFromContext. A T that names its own type (Args) must name
// typ, or Handle panics; HandleArgs spares writing it.
func Handle[T any](r *Registry, typ string, fn func(ctx context.Context, args T) error, opts ...HandlerOptions) {
	var zero T
	if msg := kindMismatch(typ, zero); msg != "" {
		panic("jobq: Handle: " + msg + "; register it with HandleArgs, which takes the type from Kind")
	}
	r.HandleFunc(typ, func(ctx context.Context, job *Job) error {
		var args T
		if err := json.Unmarshal(job.Payload, &args); err != nil {
			return Permanent(fmt.Errorf("decode %s payload: %w", typ, err))
		}
		return fn(ctx, args)
	}, opts...)
}

// Use adds middleware around every handler of the registry, for workers
// and for the sync backend alike: the first added is the outermost. It
// wraps unknown types' attempts too, so an observer sees every attempt.
// Add middleware before starting workers.
func (r *Registry) Use(mw ...Middleware) {
	for _, m := range mw {
		if m == nil {
			panic("jobq: Use needs non-nil middleware")
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.middleware = append(r.middleware, mw...)
	r.changed()
}

// check validates every registered type's options against the worker's
// retry policy base.
func (r *Registry) check(base RetryPolicy) error {
	for _, typ := range r.Types() {
		h, _ := r.lookup(typ)
		if err := h.opts.check(typ, base); err != nil {
			return err
		}
	}
	return nil
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

// handler returns typ's entry and its handler inside the middleware; an
// unknown type gets a handler that fails the attempt, wrapped too (and not
// kept: unknown types are unbounded). The middleware runs outside r.mu, so
// a middleware that reads the registry cannot deadlock.
func (r *Registry) handler(typ string) (h handlerEntry, fn HandlerFunc) {
	r.mu.RLock()
	h, ok := r.handlers[typ]
	fn, wrapped := r.wrapped[typ]
	mw, gen := r.middleware, r.gen
	r.mu.RUnlock()
	if wrapped {
		return h, fn
	}
	fn = h.fn
	if !ok {
		fn = func(context.Context, *Job) error { return errNoHandler{typ: typ} }
	}
	for i := len(mw) - 1; i >= 0; i-- {
		fn = mw[i](fn)
	}
	if ok {
		r.mu.Lock()
		if r.gen == gen {
			r.wrapped[typ] = fn
		}
		r.mu.Unlock()
	}
	return h, fn
}

// errNoHandler is the error of a job of a type without a handler: what
// the sync backend's Enqueue returns, and what EventDeferred carries.
type errNoHandler struct{ typ string }

func (e errNoHandler) Error() string { return "no handler registered for type " + e.typ }

// Is lets errors.Is(err, ErrNoHandler) match.
func (e errNoHandler) Is(target error) bool { return target == ErrNoHandler }

// run executes one attempt: looks the handler up, bounds it with timeout
// (when > 0), runs it inside the middleware, and turns a panic (of the
// handler or a middleware) into an error carrying the stack, so a bad
// handler costs one attempt and never the worker. jc travels in the
// handler's context (see JobFromContext and CompleteTx).
func (r *Registry) run(ctx context.Context, jc *jobCtx, timeout time.Duration) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v\n%s", p, debug.Stack())
		}
	}()
	// A middleware that panics while it wraps costs the attempt too.
	h, fn := r.handler(jc.job.Type)
	if h.opts.Timeout > 0 {
		timeout = h.opts.Timeout
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, timeout, &timeoutError{d: timeout})
		defer cancel()
		defer func() {
			// "context deadline exceeded" alone does not say which limit
			// fired; the job's timeout is the one worth naming.
			var te *timeoutError
			if err != nil && errors.Is(err, context.DeadlineExceeded) && !errors.As(err, &te) &&
				errors.As(context.Cause(ctx), &te) {
				err = fmt.Errorf("%s: %w", te.Error(), err)
			}
		}()
	}
	ctx = context.WithValue(ctx, jobCtxKey{}, jc)
	return fn(ctx, jc.job)
}

// timeoutError is the cause of a handler context whose attempt ran out of
// its timeout, so the error says which limit fired.
type timeoutError struct{ d time.Duration }

func (e *timeoutError) Error() string {
	return "job timeout of " + e.d.String() + " exceeded"
}

func (e *timeoutError) Unwrap() error { return context.DeadlineExceeded }
