package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Pipelining. A transaction that ends tasks (workflow_end.go) runs several
// statements, most of which need nothing from the one before: the BEGIN
// and the settle, the lock and the ends of every workflow, the COMMIT.
// Sent one by one, each costs a round trip; queued on a pipeline, those
// that do not wait for a reply go out together (a pgx batch: one write,
// one Sync, the replies read in order), so a settle costs three round
// trips however many workflows it ends (docs/performance.md). The server
// runs the statements of a batch one after the other, each with its own
// snapshot as when sent alone, and skips the rest of a batch after an
// error (a COMMIT in it included), so batching changes neither what the
// statements see nor what commits.

// pipeline queues statements and sends them when their replies are needed.
type pipeline interface {
	// queue adds a statement: at the next flush its rows are scanned into
	// dest and each is called per row.
	queue(sql string, args, dest []any, each func() error)
	// flush sends what is queued and reads the replies.
	flush(ctx context.Context) error
}

// queued is a statement waiting on a pipeline.
type queued struct {
	sql        string
	args, dest []any
	each       func() error
	tag        string // a statement returning no rows: its command tag
}

// seqPipe runs the statements queued one at a time through q: a caller's
// transaction (pgx.Tx or *sql.Tx), which the backend cannot batch on.
type seqPipe struct {
	q       rowQuerier
	pending []queued
}

func (p *seqPipe) queue(sql string, args, dest []any, each func() error) {
	p.pending = append(p.pending, queued{sql: sql, args: args, dest: dest, each: each})
}

func (p *seqPipe) flush(ctx context.Context) error {
	stmts := p.pending
	p.pending = nil
	for _, s := range stmts {
		if err := p.q(ctx, s.sql, s.args, s.dest, s.each); err != nil {
			return err
		}
	}
	return nil
}

// batchPipe sends what is queued as one pgx batch on conn.
type batchPipe struct {
	conn    *pgx.Conn
	pending []queued
	// begin: the next batch holds the transaction's BEGIN (see inPipeTx).
	begin bool
}

func (p *batchPipe) queue(sql string, args, dest []any, each func() error) {
	p.pending = append(p.pending, queued{sql: sql, args: args, dest: dest, each: each})
}

// queueExec adds a statement that returns no rows and must answer with
// the command tag tag: a COMMIT of a transaction the server rolled back
// answers ROLLBACK.
func (p *batchPipe) queueExec(sql, tag string) {
	p.pending = append(p.pending, queued{sql: sql, tag: tag})
}

func (p *batchPipe) flush(ctx context.Context) error {
	err := p.send(ctx)
	if err != nil && p.begin {
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) {
			err = beginError{err}
		}
	}
	p.begin = false
	return err
}

// send is flush but for marking a failed BEGIN.
func (p *batchPipe) send(ctx context.Context) error {
	stmts := p.pending
	p.pending = nil
	return sendBatch(ctx, p.conn, stmts)
}

// batchSender runs a pgx batch: a pool, a connection or a pgx.Tx.
type batchSender interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// sendBatch sends stmts as one pgx batch on sender and reads their replies in
// order. Outside a transaction (on a pool or a connection) the batch is
// one implicit transaction: it commits at its end, all or nothing, as a
// single statement does.
func sendBatch(ctx context.Context, sender batchSender, stmts []queued) error {
	if len(stmts) == 0 {
		return nil
	}
	batch := &pgx.Batch{}
	for _, s := range stmts {
		batch.Queue(s.sql, s.args...)
	}
	br := sender.SendBatch(ctx, batch)
	for _, s := range stmts {
		if s.tag != "" {
			tag, err := br.Exec()
			if err == nil && tag.String() != s.tag {
				err = fmt.Errorf("%s answered %s", s.sql, tag)
			}
			if err != nil {
				_ = br.Close()
				return err
			}
			continue
		}
		rows, err := br.Query()
		if err == nil {
			_, err = pgx.ForEachRow(rows, s.dest, s.each)
		}
		if err != nil {
			_ = br.Close()
			return err
		}
	}
	return br.Close()
}

// inPipeTx runs fn in a transaction on a pooled connection, through a
// batchPipe, and commits it: the BEGIN goes out with fn's first
// statements and the COMMIT with its last. As with inTx, a failure of the
// pool or of the batch holding the BEGIN, but for an error the server
// reported, comes back as a beginError, which retryable may send again:
// nothing of the transaction committed.
func (b *Backend) inPipeTx(ctx context.Context, fn func(p *batchPipe) error) (err error) {
	c, err := b.pool.Acquire(ctx)
	if err != nil {
		return beginError{err}
	}
	// Release closes, rather than pools, a connection left in a
	// transaction: one whose ROLLBACK failed too.
	defer c.Release()
	conn := c.Conn()
	defer func() {
		if err != nil && !conn.IsClosed() && conn.PgConn().TxStatus() != 'I' {
			_, _ = conn.Exec(ctx, "ROLLBACK")
		}
	}()
	p := &batchPipe{conn: conn, begin: true}
	p.queueExec("BEGIN", "BEGIN")
	if err := fn(p); err != nil {
		return err
	}
	p.queueExec("COMMIT", "COMMIT")
	return p.flush(ctx)
}
