package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"

	"github.com/jobq/jobq/backend"
)

// stmts holds the statements prepared once and reused for the backend's
// life: inside a write transaction tx.StmtContext reuses the statement
// already prepared on the single write connection, so the hot paths never
// re-parse SQL.
type stmts struct {
	// write connection
	uniqueLookup  *sql.Stmt
	insertOne     *sql.Stmt // insertSQL(1, false): the common single enqueue
	insertChunk   *sql.Stmt // insertSQL(insertChunkRows, false)
	insertOneMD   *sql.Stmt // the same with metadata
	insertChunkMD *sql.Stmt
	done          *sql.Stmt
	retry         *sql.Stmt
	failCopy      *sql.Stmt
	jobDelete     *sql.Stmt
	extend        *sql.Stmt
	progress      *sql.Stmt
	release       *sql.Stmt
	sweepExpired  *sql.Stmt
	sweepRescue   *sql.Stmt
	replay        *sql.Stmt
	failedExists  *sql.Stmt
	failedDelete  *sql.Stmt
	settings      *sql.Stmt // qQueueSettings: read inside every claim
	reservedCount *sql.Stmt
	rateUpdate    *sql.Stmt
	finishKeep    *sql.Stmt
	finishCancel  *sql.Stmt
	// claims of a queue with key rules (claimKeyed)
	keyWalk     *sql.Stmt
	keyReserved *sql.Stmt
	keyHead     *sql.Stmt
	keyFailed   *sql.Stmt
	claimIDs    *sql.Stmt
	// wf holds the workflow statements of the completion paths by their
	// text (see wfTx.stmt): a batch that ends tasks would otherwise parse
	// each of them again.
	wf map[string]*sql.Stmt
	// read connections
	jobGet    *sql.Stmt
	failedGet *sql.Stmt

	// prepared lists every statement above as it is prepared, so close
	// cannot miss one added later.
	prepared []*sql.Stmt

	claimMu sync.Mutex
	claim   map[int]*sql.Stmt // by number of queues
}

// statements returns the prepared statements, preparing them on first use.
// Preparing needs the schema, so it is deferred past Open: a backend opened
// with NoMigrate on an empty file can still run Migrate.
func (b *Backend) statements(ctx context.Context) (*stmts, error) {
	b.stmtMu.Lock()
	defer b.stmtMu.Unlock()
	if b.closed.Load() {
		return nil, backend.ErrClosed
	}
	if b.st != nil {
		return b.st, nil
	}
	st := &stmts{claim: make(map[int]*sql.Stmt)}
	for _, p := range []struct {
		db   *sql.DB
		dst  **sql.Stmt
		text string
	}{
		{b.w, &st.uniqueLookup, qUniqueLookup},
		{b.w, &st.insertOne, insertSQL(1, false)},
		{b.w, &st.insertChunk, insertSQL(insertChunkRows, false)},
		{b.w, &st.insertOneMD, insertSQL(1, true)},
		{b.w, &st.insertChunkMD, insertSQL(insertChunkRows, true)},
		{b.w, &st.done, qCompleteDone},
		{b.w, &st.retry, qCompleteRetry},
		{b.w, &st.failCopy, qFailCopy},
		{b.w, &st.jobDelete, qJobDelete},
		{b.w, &st.extend, qExtendLease},
		{b.w, &st.progress, qProgress},
		{b.w, &st.release, qRelease},
		{b.w, &st.sweepExpired, qSweepExpired},
		{b.w, &st.sweepRescue, qSweepRescue},
		{b.w, &st.replay, qReplay},
		{b.w, &st.failedExists, qFailedExists},
		{b.w, &st.failedDelete, qFailedDelete},
		{b.w, &st.settings, qQueueSettings},
		{b.w, &st.reservedCount, qQueueReserved},
		{b.w, &st.rateUpdate, qQueueRateUpdate},
		{b.w, &st.finishKeep, qFinishKeep},
		{b.w, &st.finishCancel, qFinishCancelled},
		{b.w, &st.keyWalk, qKeyWalk},
		{b.w, &st.keyReserved, qKeyReserved},
		{b.w, &st.keyHead, qKeyHead},
		{b.w, &st.keyFailed, qKeyFailed},
		{b.w, &st.claimIDs, qClaimIDs},
		{b.r, &st.jobGet, qJobGet},
		{b.r, &st.failedGet, qFailedGet},
	} {
		s, err := p.db.PrepareContext(ctx, p.text)
		if err != nil {
			_ = st.close()
			return nil, fmt.Errorf("prepare statements: %w", err)
		}
		*p.dst = s
		st.prepared = append(st.prepared, s)
	}
	st.wf = make(map[string]*sql.Stmt, len(wfHotQueries))
	for _, q := range wfHotQueries {
		s, err := b.w.PrepareContext(ctx, q)
		if err != nil {
			_ = st.close()
			return nil, fmt.Errorf("prepare statements: %w", err)
		}
		st.wf[q] = s
		st.prepared = append(st.prepared, s)
	}
	b.st = st
	return st, nil
}

// wfHotQueries are the statements with which a completion, a sweep or a
// cancel ends a task, resolves its edges and releases its dependants.
var wfHotQueries = []string{
	qCompleteDoneTask, qTaskEnd, qEdgesCountDown, qEdgesCancel, qWorkflowTasksEnded,
	qTasksToRelease, qTaskActivate, qJobsSetWorkflow,
}

// wfStmt returns the prepared workflow statement with text query, if it is
// one of wfHotQueries and st is not nil.
func (st *stmts) wfStmt(query string) (*sql.Stmt, bool) {
	if st == nil {
		return nil, false
	}
	s, ok := st.wf[query]
	return s, ok
}

// insertStmt returns the prepared insertSQL(n, metadata), or nil when
// there is none for n rows or st is nil (a caller's transaction, see
// insertTx): then the caller runs the SQL text.
func (st *stmts) insertStmt(n int, metadata bool) *sql.Stmt {
	switch {
	case st == nil:
		return nil
	case n == 1 && metadata:
		return st.insertOneMD
	case n == 1:
		return st.insertOne
	case n == insertChunkRows && metadata:
		return st.insertChunkMD
	case n == insertChunkRows:
		return st.insertChunk
	}
	return nil
}

// claimStmt returns the claim statement for n queues and whether the caller
// must close it (when n is beyond the cached range).
func (st *stmts) claimStmt(ctx context.Context, w *sql.DB, n int) (*sql.Stmt, bool, error) {
	if n > maxCachedClaimQueues {
		s, err := w.PrepareContext(ctx, claimSQL(n))
		return s, true, err
	}
	st.claimMu.Lock()
	defer st.claimMu.Unlock()
	if s, ok := st.claim[n]; ok {
		return s, false, nil
	}
	s, err := w.PrepareContext(ctx, claimSQL(n))
	if err != nil {
		return nil, false, err
	}
	st.claim[n] = s
	return s, false, nil
}

// claimStmtTx returns the claim statement for n queues bound to tx: the
// cached one when it was prepared, else one prepared on tx (the write
// connection is tx's, so it cannot be prepared outside), closed with tx.
func (st *stmts) claimStmtTx(ctx context.Context, tx *sql.Tx, n int) (*sql.Stmt, error) {
	st.claimMu.Lock()
	s, ok := st.claim[n]
	st.claimMu.Unlock()
	if ok {
		return tx.StmtContext(ctx, s), nil
	}
	return tx.PrepareContext(ctx, claimSQL(n))
}

func (st *stmts) close() error {
	var errs []error
	for _, s := range st.prepared {
		errs = append(errs, s.Close())
	}
	st.claimMu.Lock()
	for _, s := range st.claim {
		errs = append(errs, s.Close())
	}
	st.claimMu.Unlock()
	return errors.Join(errs...)
}
