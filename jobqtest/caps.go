package jobqtest

import "github.com/jobq/jobq/backend"

// The recorder must see two optional capabilities' calls to record them:
// backend.Inline (the sync backend's handlers run inside the insert) and
// backend.TxInserter (EnqueueTx). The runtime discovers those two by direct
// type assertion, since their presence alone changes what it does, so the
// recorder's backend implements each exactly when the wrapped backend does:
// one type per combination of the two, below. Every other capability
// (Notifier, Migrator, TxCompleter, QueueController, Canceller, Retainer,
// ScheduleStore, and any added later) the runtime finds with backend.As
// through recBackend.Unwrap, on the wrapped backend; the workflow ones on
// the recording links of that chain (see chain).

// recInline is the recorder's backend over an Inline backend.
type recInline struct {
	*recBackend
	*inlineCap
}

// recTx is the recorder's backend over a TxInserter.
type recTx struct {
	*recBackend
	*txInsertCap
}

// recInlineTx is the recorder's backend over a backend with both.
type recInlineTx struct {
	*recBackend
	*inlineCap
	*txInsertCap
}

// compose returns base, with the recording Inline and TxInserter exactly
// when inner has them.
func compose(base *recBackend, inner backend.Backend) backend.Backend {
	_, inline := inner.(backend.Inline)
	_, txi := inner.(backend.TxInserter)
	in, tx := &inlineCap{r: base.r}, &txInsertCap{r: base.r}
	switch {
	case inline && txi:
		return &recInlineTx{base, in, tx}
	case inline:
		return &recInline{base, in}
	case txi:
		return &recTx{base, tx}
	}
	return base
}
