package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/lifecycle"
	"github.com/jobq/jobq/internal/ticker"
	"github.com/jobq/jobq/internal/wakeup"
)

// DefaultWakeInterval is how often a Backend with subscribers looks for
// commits of other connections to its file while they keep coming
// (Options.WakeInterval): a worker in another process learns of a job
// within a few milliseconds instead of at its next poll.
const DefaultWakeInterval = 5 * time.Millisecond

// quietWatchMax is how far the watcher stretches the wait between looks
// while nothing is committed. A look costs a few microseconds, but waking
// an idle Go process costs about a hundred more (the runtime's monitor
// thread spins up after each wake-up): 200 looks a second kept an idle
// worker process at about 2.4 % of a core, against 0.2 % without them. So
// the wait grows with the quiet, a quarter of it (see watchWait): at most
// 4 looks a second in an idle process, while a job arriving after a quiet
// spell of q waits about q/8 for its wake-up, and never more than this.
const quietWatchMax = 250 * time.Millisecond

// Backoff of the watcher after a failed look (the file unreadable, say):
// doubling from watchBackoffMin up to watchBackoffMax, so a lasting error
// neither spins nor stops the watcher for good.
const (
	watchBackoffMin = 100 * time.Millisecond
	watchBackoffMax = 5 * time.Second
)

// hub wakes subscribers. This Backend's own calls wake the subscribers of
// the queues they made jobs claimable in at once, after their commit. A
// watcher loop wakes them for the commits of every other connection to the
// file: other processes, other Backends on the file, and the application's
// own transactions (JobInsertManyTx). It learns of those from PRAGMA
// data_version, which tells that someone else committed, not what: so it
// wakes every subscriber, and a wake-up that finds nothing costs one
// claim that claims nothing.
type hub struct {
	subs wakeup.Set

	interval time.Duration // between looks; negative: no watcher
	db       *sql.DB       // the watcher's one read-only connection
	started  atomic.Bool   // the watcher was started (or refused: Close came first)
}

// Subscribe implements backend.Notifier. An empty queues list watches no
// queue. The channel has a buffer of one, so wake-ups coalesce and the
// committing caller never blocks. The first subscription starts the
// watcher of other connections' commits, which runs until Close; it wakes
// every subscription once when it starts (and again whenever it had to
// reconnect), since a commit made before its first look is not seen as a
// change.
func (b *Backend) Subscribe(queues []string) (<-chan struct{}, func()) {
	ch, cancel := b.hub.subs.Subscribe(queues)
	if len(queues) > 0 && b.hub.interval >= 0 && b.hub.started.CompareAndSwap(false, true) {
		// The watcher lives as long as the Backend, not as any caller;
		// after Close the group refuses to start it.
		b.loops.Start(context.Background(), lifecycle.Component{Name: "sqlite watcher " + b.path, Run: b.watch})
	}
	return ch, cancel
}

// SubscribeFinished implements backend.FinishNotifier like Subscribe: this
// Backend's own calls that finished jobs wake the channel at once, and
// the watcher wakes it for every other connection's commits (which may
// have finished jobs: it cannot tell), so a waiter in another process
// looks again within the watcher's interval.
func (b *Backend) SubscribeFinished() (<-chan struct{}, func()) {
	return b.Subscribe([]string{backend.FinishedTopic})
}

// notifyFinished wakes the subscribers of finished jobs. It never blocks.
func (h *hub) notifyFinished() {
	h.subs.Wake(backend.FinishedTopic)
}

// notify wakes every subscriber of any of queues. It never blocks.
func (h *hub) notify(queues map[string]struct{}) {
	for q := range queues {
		h.subs.Wake(q)
	}
}

// watch is the watcher loop: every interval (longer while nothing is
// committed, see quietWatchMax) it reads PRAGMA data_version on its own
// connection (the value is only comparable on one connection) and wakes
// every subscriber when the value moved. Commits of this Backend move it
// too, so their subscribers get a second wake-up: an idle worker makes
// one empty claim per interval at most. Read on the write connection, the
// value would move for other connections' commits only, but every look
// would queue behind this process's writes; the second wake-ups cost
// nothing measurable (jobq bench, latency and steady in process). A
// failed look closes the connection and backs off; the first failure of a
// run of them is a warning.
func (b *Backend) watch(ctx context.Context) {
	h := &b.hub
	var (
		conn    *sql.Conn
		last    int64
		changed = time.Now() // when the value last moved
		backoff time.Duration
	)
	defer func() {
		if conn != nil {
			_ = conn.Close()
		}
	}()
	for {
		fresh := conn == nil
		v, err := b.dataVersion(ctx, &conn)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			if conn != nil {
				_ = conn.Close()
				conn = nil
			}
			// Said once per run of failures, so a lasting one does not
			// flood the log; every retry is at debug level.
			level := slog.LevelDebug
			if backoff == 0 {
				level = slog.LevelWarn
			}
			backoff = min(max(2*backoff, watchBackoffMin), watchBackoffMax)
			b.log.Log(ctx, level, "jobq sqlite: cannot see other processes' commits; their jobs wait for the workers' next poll until this recovers",
				"path", b.path, "retry_in", backoff, "err", err)
			if !ticker.Sleep(ctx, backoff) {
				return
			}
			continue
		case fresh || v != last:
			// On a fresh connection the commits since the last look
			// (or since Subscribe) are not seen as a change: wake
			// everyone once.
			h.subs.WakeAll()
			changed = time.Now()
		}
		if backoff > 0 {
			b.log.Info("jobq sqlite: sees other processes' commits again", "path", b.path)
		}
		last, backoff = v, 0
		if !ticker.Sleep(ctx, watchWait(h.interval, time.Since(changed))) {
			return
		}
	}
}

// watchWait is the watcher's wait before its next look when the last
// change was quiet ago: interval while commits keep coming, a quarter of
// the quiet once that is longer, up to quietWatchMax (never below
// interval).
func watchWait(interval, quiet time.Duration) time.Duration {
	return max(interval, min(quiet/4, quietWatchMax))
}

// dataVersion reads PRAGMA data_version on *conn, connecting first when
// *conn is nil.
func (b *Backend) dataVersion(ctx context.Context, conn **sql.Conn) (int64, error) {
	const op = "watch for other connections' commits"
	if *conn == nil {
		c, err := b.hub.db.Conn(ctx)
		if err != nil {
			return 0, b.mapErr(ctx, op, err)
		}
		*conn = c
	}
	var v int64
	if err := (*conn).QueryRowContext(ctx, "PRAGMA data_version").Scan(&v); err != nil {
		return 0, b.mapErr(ctx, op, fmt.Errorf("read data_version: %w", err))
	}
	return v, nil
}
