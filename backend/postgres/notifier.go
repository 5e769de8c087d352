package postgres

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/lifecycle"
	"github.com/jobq/jobq/internal/wakeup"
)

// Subscribe implements backend.Notifier with LISTEN/NOTIFY on the channel
// "jobq_<schema>", payload the queue name. Once a call that made jobs
// available (insert, retry with no delay, release, rescue, replay) has
// committed, the Backend wakes its own subscribers at once and NOTIFYs the
// other processes (see sqlNotify); a JobInsertManyTx notifies inside the
// caller's transaction, so only its commit wakes anyone. One listener
// connection per Backend (outside the pool, started on the first
// Subscribe, stopped by Close) fans the hints out. Each time
// the listener (re)connects it wakes every subscriber once, since hints sent
// before its LISTEN took effect are lost: after the first Subscribe, and
// after a dropped connection, which it re-establishes with backoff. Workers
// keep polling at their PollInterval throughout, so a lost hint only delays
// a pickup. Behind a transaction pooler (Options.Pooler) the listener
// connects to Options.ListenAddr, the server itself, or, without one, does
// not run: a pooler would hand the LISTEN's server connection to other
// clients, whose notifications it would then drop. After Close the channel
// never fires.
func (b *Backend) Subscribe(queues []string) (<-chan struct{}, func()) {
	return b.listener.subscribe(queues)
}

// SubscribeFinished implements backend.FinishNotifier on the same
// listener and channel as Subscribe: the calls that finished jobs send
// backend.FinishedTopic as their "queue" through the sender, coalesced
// with the other hints and at most one NOTIFY per minNotifyInterval, so
// a drain's completions cost no NOTIFY each.
func (b *Backend) SubscribeFinished() (<-chan struct{}, func()) {
	return b.listener.subscribe([]string{backend.FinishedTopic})
}

// wake tells subscribers everywhere that queues got jobs available now,
// after the statement that made them available committed: this process's
// subscribers at once, other processes' through a NOTIFY sent by the
// sender.
func (b *Backend) wake(queues []string) {
	if len(queues) == 0 {
		return
	}
	b.listener.notifyLocal(queues)
	b.sender.send(queues)
}

// Backoff between reconnect attempts of the listener: doubling from
// listenBackoffMin up to listenBackoffMax, with jitter; the first attempt
// after a drop is immediate.
const (
	listenBackoffMin = 100 * time.Millisecond
	listenBackoffMax = 5 * time.Second
)

// listener owns the LISTEN connection and this Backend's subscriptions.
// Its loop runs in the Backend's lifecycle group from the first Subscribe
// until Close.
type listener struct {
	b    *Backend
	subs wakeup.Set

	mu      sync.Mutex
	running bool
	stopped bool

	pid atomic.Uint32 // backend pid of the live LISTEN connection; 0 while down
}

func newListener(b *Backend) *listener {
	return &listener{b: b}
}

func (l *listener) subscribe(queues []string) (<-chan struct{}, func()) {
	// Subscribed before the loop starts, so its first wake-up after LISTEN
	// reaches this subscription.
	ch, cancel := l.subs.Subscribe(queues)
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.stopped && !l.running && (l.b.opts.Pooler == "" || l.b.opts.ListenAddr != "") {
		// The listener's lifetime is the Backend's: it ends in Close,
		// not with any caller's context.
		l.running = l.b.background.Start(context.Background(), lifecycle.Component{Name: "postgres listener", Run: l.run})
	}
	return ch, cancel
}

// notifyLocal wakes this process's subscribers of queues at once, without
// waiting for the round trip through the server.
func (l *listener) notifyLocal(queues []string) {
	l.subs.Wake(queues...)
}

// stop drops every subscriber and keeps the loop from starting; Close
// calls it before stopping the lifecycle group, which ends a running loop.
// Idempotent.
func (l *listener) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopped = true
	l.subs.Close()
}

// run is the listener loop: connect and LISTEN, deliver notifications until
// the connection fails, then reconnect with backoff. It returns when ctx
// ends.
func (l *listener) run(ctx context.Context) {
	backoff := time.Duration(0)
	for ctx.Err() == nil {
		if backoff > 0 {
			timer := time.NewTimer(backoff/2 + rand.N(backoff/2+1))
			select {
			case <-ctx.Done():
				timer.Stop()
				return
			case <-timer.C:
			}
		}
		conn, err := l.connect(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			backoff = min(max(2*backoff, listenBackoffMin), listenBackoffMax)
			l.b.opts.Logger.Warn("jobq postgres listener: connect failed, retrying",
				"schema", l.b.opts.Schema, "backoff", backoff, "err", l.b.mapError(ctx, "listen", err))
			continue
		}
		// Hints sent before LISTEN took effect (since Subscribe, or while
		// the connection was down) are lost: have everyone look once.
		l.subs.WakeAll()
		l.pid.Store(conn.PgConn().PID())
		backoff = 0
		err = l.receive(ctx, conn)
		l.pid.Store(0)
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		_ = conn.Close(closeCtx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		l.b.opts.Logger.Warn("jobq postgres listener: connection lost, reconnecting",
			"schema", l.b.opts.Schema, "err", l.b.mapError(ctx, "listen", err))
	}
}

// connect opens a connection outside the pool (LISTEN ties it up for good)
// and subscribes it to the channel.
func (l *listener) connect(ctx context.Context) (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, l.b.opts.QueryTimeout)
	defer cancel()
	cc := l.b.pool.Config().ConnConfig
	if a := l.b.opts.ListenAddr; a != "" {
		cc = cc.Copy()
		host, port, _ := net.SplitHostPort(a) // resolve checked it
		p, err := strconv.ParseUint(port, 10, 16)
		if err != nil {
			return nil, fmt.Errorf("listen address %q: bad port: %w", a, err)
		}
		cc.Host, cc.Port, cc.Fallbacks = host, uint16(p), nil
	}
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, l.b.q.listen); err != nil {
		_ = conn.Close(ctx)
		return nil, err
	}
	return conn, nil
}

// receive delivers notifications until the connection fails or ctx ends.
func (l *listener) receive(ctx context.Context, conn *pgx.Conn) error {
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		queue, origin, _ := strings.Cut(n.Payload, " ")
		if origin == l.b.origin {
			continue // this Backend woke its subscribers already
		}
		l.subs.Wake(queue)
	}
}

// minNotifyInterval spaces the sender's NOTIFY transactions. Each costs the
// server a transaction and takes NOTIFY's database-wide lock, so a Backend
// enqueuing thousands of jobs a second sends at most 1/minNotifyInterval
// of them; a remote idle worker then learns of a job at most this much
// later (this process's workers are woken at once, without NOTIFY).
const minNotifyInterval = 2 * time.Millisecond

// finishedNotifyInterval spaces the sender's finished-jobs hints
// (backend.FinishedTopic) further: a draining worker finishes jobs in
// every completion call, and a NOTIFY transaction every minNotifyInterval
// for them alone cost a drain about 6 µs of client CPU per job (jobq
// bench drain, postgres). A waiter in another process hears of its job
// at most this much later; its own process's waiters at once.
const finishedNotifyInterval = 10 * time.Millisecond

// sender sends the NOTIFY hints for statements that already committed
// (see sqlNotify). Hints for queues that pile up while one is in flight go
// out together in the next, so however many enqueuers run, at most one
// NOTIFY transaction per Backend is open at a time. Its loop runs in the
// Backend's lifecycle group from the first send until Close. A hint that
// fails to send is dropped: workers poll.
type sender struct {
	b *Backend

	mu           sync.Mutex
	queues       map[string]bool
	lastFinished time.Time // when a finished-jobs hint last went out
	running      bool
	stopped      bool
	kick         chan struct{}
}

func newSender(b *Backend) *sender {
	return &sender{b: b, queues: map[string]bool{}, kick: make(chan struct{}, 1)}
}

// send queues hints for queues without blocking.
func (s *sender) send(queues []string) {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return
	}
	for _, q := range queues {
		s.queues[q] = true
	}
	if !s.running {
		// Like the listener, the sender lives as long as the Backend.
		s.running = s.b.background.Start(context.Background(), lifecycle.Component{Name: "postgres sender", Run: s.run})
	}
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// stop keeps the loop from starting and drops later hints; Close calls it
// before stopping the lifecycle group, which ends a running loop (pending
// hints are dropped). Idempotent.
func (s *sender) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
}

func (s *sender) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
		}
		for {
			more := s.runOnce(ctx)
			// Rate limit: hints arriving meanwhile wait and go out together.
			timer := time.NewTimer(minNotifyInterval)
			select {
			case <-ctx.Done():
				timer.Stop()
				return
			case <-timer.C:
			}
			if !more {
				break
			}
		}
	}
}

// runOnce sends the hints gathered so far in one statement, but for a
// finished-jobs hint sent less than finishedNotifyInterval ago, which it
// keeps for a later round: it reports whether it kept one.
func (s *sender) runOnce(ctx context.Context) (kept bool) {
	s.mu.Lock()
	now := time.Now()
	queues := make([]string, 0, len(s.queues))
	for q := range s.queues {
		if q == backend.FinishedTopic {
			if now.Sub(s.lastFinished) < finishedNotifyInterval {
				kept = true
				continue
			}
			s.lastFinished = now
		}
		queues = append(queues, q)
		delete(s.queues, q)
	}
	s.mu.Unlock()
	if len(queues) == 0 {
		return kept
	}
	err := s.b.do(ctx, "notify", func(ctx context.Context) error {
		_, err := s.b.pool.Exec(ctx, s.b.q.notify, queues, s.b.origin)
		return err
	})
	if err != nil && ctx.Err() == nil {
		s.b.opts.Logger.Debug("jobq postgres: wake-up hint not sent; workers will poll",
			"schema", s.b.opts.Schema, "queues", queues, "err", err)
	}
	return kept
}
