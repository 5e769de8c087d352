package backend

// Unwrapper is implemented by a backend that wraps another (a test
// recorder, an instrumenting or fault-injecting layer) and passes some of
// its calls through. Unwrap returns the wrapped backend, so As can find a
// capability the wrapper does not implement itself.
//
// Without it a wrapper would have to implement every optional capability
// exactly when the wrapped backend does: one type per combination of
// capabilities, doubling with each capability added. With it a wrapper
// implements only what it intercepts and leaves the rest to As.
//
// The contract for a wrapper: a capability found through As must not need
// the wrapper (its calls go straight to the wrapped backend); a capability
// the wrapper must see the calls of, it implements itself, and As finds the
// wrapper's first. The runtime finds every capability this way, Inline and
// TxInserter included, so a wrapper never implements one only to keep it:
// implementing one the wrapped backend lacks would change what the runtime
// does (run jobs inside the insert, allow EnqueueTx). What a wrapper cannot
// see of a call that goes past it, the client's hooks report
// (jobq.ClientHooks: AfterEnqueue for EnqueueTx and workflows,
// InlineStarted and InlineFinished for the sync backend's runs).
type Unwrapper interface {
	// Unwrap returns the wrapped backend, never the wrapper itself.
	Unwrap() Backend
}

// maxUnwrap bounds the walk down an Unwrap chain, so a wrapper that
// (wrongly) unwraps to itself or to a cycle ends the search instead of
// hanging the caller. Real chains are one or two deep.
const maxUnwrap = 32

// As returns b as T if b implements T; otherwise it follows b's Unwrap
// chain (see Unwrapper) and returns the first backend on it that
// implements T. It is how the runtime discovers every optional capability
// (Inline, TxInserter, Notifier, Migrator, TxCompleter, QueueController,
// Canceller, Retainer, ScheduleStore, Workflower, WorkflowTxInserter,
// InsertCounter, ProgressReporter) through wrappers that do not intercept
// it.
// The chain is followed at most 32 links; past that, or at a backend that
// is not an Unwrapper, or at a nil one, As reports false.
func As[T any](b Backend) (T, bool) {
	for range maxUnwrap + 1 {
		if b == nil {
			break
		}
		if t, ok := b.(T); ok {
			return t, true
		}
		u, ok := b.(Unwrapper)
		if !ok {
			break
		}
		b = u.Unwrap()
	}
	var zero T
	return zero, false
}
