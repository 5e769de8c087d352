// Package redis is jobq's Redis backend: jobs live under one key prefix of
// a Redis server (or Redis Cluster) that many worker processes on many
// machines share.
//
// Importing the package registers the "redis" and "rediss" (TLS) URL
// schemes with backend.Open:
//
//	redis://[[user]:password@]host[:port][/db][?key_prefix=app1]
//	rediss://:password@host:6380/0?key_prefix=app1&timeout=5s&pool_size=50
//	redis://host1:7001?cluster=true&addr=host2:7002&addr=host3:7003
//
// Parameters: key_prefix (default "jobq"; several applications can share a
// server under different prefixes), timeout (per call and per step of
// connecting, default 10s), pool_size (connections, default 10 per CPU),
// cluster=true (a Redis Cluster, reached through the URL's host and every
// addr; database 0 only). Any other parameter is refused. The server
// must be Redis 6.2 or later (SET … GET).
//
// # Atomicity
//
// Every state change is one Lua script (scripts.lua, one header per script
// saying its KEYS, ARGV and reply), run atomically by EVALSHA: a job is
// never popped by one call and pushed by another, so a crash between calls
// loses nothing. Every script touches the keys of one queue only, all
// sharing the hash tag {queue} ("prefix:{queue}:…"), so each runs in one
// Cluster slot; the test TestScriptKeysOneSlot checks every call's keys.
// Work spanning queues (a claim from several queues, failed-job lists,
// replay and purge by filter, stats, sweeps) runs one script per queue in
// a pipeline and merges the replies in Go: atomic per queue, not across
// queues. Concretely, a JobInsertMany across queues is one MULTI/EXEC on a
// single server but one script per queue on a cluster, and a claim
// from several queues first looks at each queue's best jobs, then takes
// its share from each. Plain inserts into one queue that callers make
// while another is in flight are merged into one script call (see
// inserter), so many producers share round trips and scripts.
//
// # Data
//
// Per queue: ready jobs in a sorted set in claim order, scored -priority
// with the time the job became due (14 hex digits of µs) and its ID as
// member, so that equal scores order by due time, then by ID (a double
// score cannot hold priority and a µs due time exactly: 53 bits); the same
// jobs by due time (for QueueStats.OldestDue); besides, the ready jobs of
// priority 0 with no options that plain enqueues wrote (single ones, and
// the batches of one queue whose IDs the script mints), in a list in ID
// order, which is their due order too (an RPUSH costs the enqueue less
// than two sorted-set inserts; claims merge the list with the sorted set
// in claim order, reading a listed job's creation time when they must
// compare it with a sorted one of priority 0); delayed and
// backing-off jobs by due time, promoted into the ready set inside the
// claim script (at most 1000 a call); reserved jobs by lease deadline
// (the sweeper's index); failed jobs by failed ID; and one hash per job
// (BenchmarkMemoryPerJob and BenchmarkMemoryPerJobSingle measure a small
// pending job's Redis memory, in the list, inserted in a batch or alone:
// docs/performance.md, Redis). Times are microseconds of the Redis
// clock (TIME inside the scripts), never a worker's.
//
// IDs are ts<<12 | queue index, ts being microseconds since 2025 and
// strictly increasing per queue: unique under the prefix, increasing with
// time across queues, and decodable to their queue, so a fenced write or a
// JobGet finds the job from its ID alone. A key prefix holds at most
// MaxQueues (4095) queues; a queue's index is assigned at its first insert
// and kept for good. A failed job's failed_at is the time of its failed ID.
//
// # Unique keys
//
// A unique key is unique among the live jobs of the whole key prefix,
// whatever their queue, as on the other backends; the conformance suite
// requires it (a live job in one queue keeps a failed job of another queue
// from being replayed). A key's holder is kept in one hash (prefix:unique,
// its own slot), which no queue script can touch atomically, so it is a
// reservation checked before the job is written: the insert mints the
// job's ID, reserves the key for it (free, or held by the same ID), writes
// the job, and frees the key again when the job ends (done, failed). A key
// found held is checked: a live holder whose state is in its set
// (backend.UniqueStates, field us) makes the insert a duplicate, and one
// out of its set loses the key to the insert at once (compare and set); a
// holder that is not live (its job ended but the key was not freed, say
// the process died in between) is taken over once its reservation is older
// than a grace period (3 × the call timeout, at least 30s). Until then its
// insert or replay may still be in flight, or may never have reached the
// server: an insert of the key waits a second for the job to appear (then
// it is a duplicate naming it: a duplicate always names a live job) and
// otherwise fails with ErrUnavailable, to be tried again. Inserts without
// a unique key skip all this: one round trip.
//
// A job of a set with backend.UniqueCompleted that completes, kept, while
// the hash still names it keeps its key: complete does not free it, and
// an insert that finds its job gone reads the finished record (field s,
// with u and us) and is its duplicate, whatever the item's set and
// conflict mode, until the prune that deletes the record frees the key.
// The holder's completion (in its queue's slot) and a takeover (in the
// hash's) are two scripts, so the takeover of a holder found running out
// of its set may land after the job completed: the first insert to name
// the completed job marks the key "<ID>@0" first, by compare and set, so
// that such a late takeover fails and is judged again, and every insert
// agrees on the holder. A key whose job finished holding nothing
// (cancelled, or of another set), or a marked key whose job is gone, is
// taken over at once: no insert of that job can be in flight.
//
// An insert or replay that fails gives its reserved keys back only when
// its script never reached the server. One whose reply was lost may have
// written its jobs, so their keys stay reserved: a written job holds its
// key (an insert sent again is a duplicate naming it), and a key whose job
// was not written is taken over after the grace period, as above. A
// replay reuses its job's ID, so it never gives back a key that ID held
// before its reservation, nor one reserved again since (by another replay
// of the same job): a replay sent again while the first one's reply was
// lost leaves the key with the live job.
//
// # Workflows
//
// Backend implements backend.Workflower (workflow.go, workflows.lua). A
// workflow's keys are in the slot of its queue, and all its tasks must be
// in that one queue (WorkflowInsert refuses others): the script that ends
// a task's job ends the task and releases its dependants' jobs, all in one
// slot, atomically. Listing, stats, checks and prunes of workflows run one
// script per queue.
//
// # Keys
//
// Backend implements backend.KeyController (keyrules.go, key_lib in
// scripts.lua). A keyed job waits among its key's jobs, in keys of its
// queue's slot, and the queue's sorted set of claimable keys holds each
// key's next claimable job under the key's rules; the claim script merges
// it with the ready jobs without a key. Every script that changes a keyed
// job puts its key right before it returns, so limits and order hold over
// every claimer, and a key's next job is claimable in the script that
// ends the one before. Jobs without a key never touch these keys: their
// claim pays one ZCARD.
//
// # Deadlines
//
// A job's deadline (backend.InsertParams.Deadline) goes by the Redis clock
// too: the insert checks it against the clock of the server holding the
// job's queue, and a waiting job with a deadline is also in its queue's
// set of deadlines, whose head a claim reads first: it moves the jobs
// past theirs to the failed jobs before it takes any, so none is claimed,
// and a lease sweep moves those of queues nobody claims from (deadline.go).
// Queues without such jobs pay one read of an empty set per claim.
//
// # Lost replies
//
// A script whose reply was lost (a timeout, a dropped connection) may have
// run. The client never sends one again by itself: only a command that
// never reached the server is sent again (on a connection found dead
// before anything was written to it, or refused unrun with NOSCRIPT after
// the server lost its scripts, when a transaction goes again whole, so a
// batch insert stays all or nothing). What callers send again is safe by
// design: every holder's write is fenced by its claim's token, so a resent
// complete, retry, fail or release is stale once the first applied, and
// a resent extension only extends the same claim again.
//
// # Wake-ups
//
// Backend implements backend.Notifier with pub/sub: a script that makes a
// queue's ready set non-empty publishes on the queue's channel, and one
// that schedules a job due before every other delayed job publishes its due
// time, so subscribers arm a timer and claim within a millisecond or two of
// it; a claim's reply also carries the queue's next due time. A Backend
// wakes its own subscribers without the round trip.
//
// # Durability
//
// What Redis keeps is what its persistence settings keep: with neither AOF
// nor snapshots a restart loses every job, with AOF appendfsync everysec up
// to about a second of acknowledged writes, with always none. Open logs a
// warning through Options.Logger when CONFIG GET shows persistence off (and
// says nothing when CONFIG is refused).
package redis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/lifecycle"
	"github.com/jobq/jobq/internal/limitwake"
)

func init() {
	open := func(ctx context.Context, url string, oo backend.OpenOptions) (backend.Backend, error) {
		b, err := Open(ctx, url, Options{Existing: oo.Existing, Logger: oo.Logger})
		if err != nil {
			return nil, err
		}
		return b, nil
	}
	backend.Register("redis", open)
	backend.Register("rediss", open)
}

// LayoutVersion is the version of the key layout this build reads and
// writes, kept in the key prefix:schema. Layout 1 (job fields one by one,
// a member of o per ready job) was written only by development builds
// before the first release; a prefix holding its jobs is refused, not
// converted (see Migrate). Layout 3 adds the ready list l of single
// enqueues: a layout-2 build would neither claim, count nor cancel the
// jobs in it, so the marker keeps such builds out of a prefix a layout-3
// build wrote, and Migrate raises 2 to 3 in place (layout-2 data is valid
// layout-3 data with l empty). Layout 4 adds the claim token k to the job
// hash, the fence of every holder's write: a layout-3 build claims without
// raising it, so a layout-4 holder whose claim it took over would still
// match, and the marker keeps it out; Migrate raises 2 and 3 to 4 in place
// (their jobs have no k, read as 0: never claimed under a token). Layout
// 5 orders the ready set by priority, then due time, then ID: its members
// carry the due time, so it is a new key (ready, P:{Q}:q) beside layout
// 4's (readyOld, P:{Q}:p, members the bare IDs). Migrate moves the jobs of
// readyOld into ready; lease sweeps move any that a layout-4 process still
// running puts in readyOld later (claims never read it), and a layout-4
// process never sees ready, so neither build strands the other's jobs
// while both run (the old one claims only what it readied itself, in its
// old order). The marker keeps layout-4 builds from starting on the
// prefix.
// Layout 6 adds workflows (workflows.lua): new keys, and the field w of a
// task's job hash, which obliges whatever ends or replays the job to end
// or reopen its task in the same script. A layout-5 build would end such
// a job and leave its task active for good (its workflow never ends), or
// replay it and leave its task failed, so the marker keeps it out; Migrate
// raises 5 to 6 in place (layout-5 data is valid layout-6 data without
// workflows).
// Layout 7 indexes failed jobs by the ID they had while live (the hash
// failedByJob, P:{Q}:xj), the ID every surface names them by: Migrate
// indexes the failed records already there, and a layout-6 build, which
// would write records without an entry, is kept out. The records a
// layout-6 process still running writes are found all the same, by a
// slower walk (script "failedof").
// Layout 8 adds keys (backend.KeyController, keyrules.go): new keys, and
// the fields ky and tu of a keyed job's hash, which oblige whatever
// readies, ends, fails, cancels, replays or purges the job to keep its
// key's structures in the same script. A layout-7 build would rescue such
// a job into the ready set without a key and never free its slot, end it
// and leave it claimable in its key's sets, or replay it and leave its key
// held for good, so the marker keeps it out; Migrate raises 7 to 8 in
// place (layout-7 data is valid layout-8 data without keyed jobs).
// Layout 9 keeps fewer keyed structures, for claims and completions of
// keyed jobs with fewer calls: the claimable keys' set Kk holds the keys
// alone (its map Km goes), and each key's highest turn is one field of
// the hash Kn instead of the zset Kt:<key>. A layout-8 build would read
// Kk's members as jobs, so the marker keeps it out; Migrate converts each
// queue's keys (script "rekey"). Layout 8 was written only by development
// builds: stop them before migrating, as one still running would write
// layout 8's structures beside the new ones.
// Layout 10 adds deadlines (backend.InsertParams.Deadline, deadline.go):
// the field dl of a job's hash and the queue's set of waiting jobs with a
// deadline (deadlines, P:{Q}:e), which oblige every claim to leave out
// the jobs past it and every script that makes a job wait again (retry,
// release, rescue) or cancels it to keep the set. A layout-9 build would
// claim and run a job whose deadline passed, the one thing a deadline
// rules out, and retry one without putting it back in the set (no sweep
// would expire it), so the marker keeps it out; Migrate raises 9 to 10 in
// place (layout-9 data is valid layout-10 data without deadlines).
// The completed unique state (backend.UniqueCompleted: a kept completed
// job holds its unique key until pruned) keeps layout 10: it adds no key
// or field, only a meaning to bit 16 of us (which a layout-10 build masks
// away, judging live jobs as before) and a value "<ID>@0" of the unique
// hash, which a layout-10 build reads as a reservation from 1970 whose
// job is not live: abandoned, taken over at once. So an older build
// running beside a newer one sees a completed holder as a job whose key
// was not freed: it takes the key over (at once when marked, else once
// the reservation is past the grace period, failing with ErrUnavailable
// until then), and the job then holds nothing, as one that build
// completes, whose key it frees; it leaves the key of a holder it prunes
// for the next insert to take over. Nothing is misread or lost: the old
// build only does not honour the new state, as it could not.
const LayoutVersion = 10

// promoteLimit bounds the delayed jobs one claim promotes.
const promoteLimit = 1000

// Options configures Open. The zero value is ready to use.
type Options struct {
	// KeyPrefix starts every key the backend writes, so that several
	// applications can share one server. 1 to 64 letters, digits, '_',
	// '-', '.' or ':'. The URL parameter key_prefix sets it too; naming
	// two different prefixes is an error. Defaults to "jobq".
	KeyPrefix string

	// Timeout bounds every step of a call to Redis, on top of the
	// caller's context: the wait for a connection, sending the command
	// and reading its reply each take at most this long, and so does each
	// step of making a connection (TCP, the TLS handshake, AUTH and
	// SELECT); a call that runs out fails with backend.ErrUnavailable. The
	// URL parameter timeout sets it too, and wins. Defaults to 10 seconds.
	Timeout time.Duration

	// PoolSize caps the connections. The URL parameter pool_size sets it
	// too, and wins. Defaults to 10 per CPU.
	PoolSize int

	// Logger receives the warning about persistence at open and the
	// notifier's reconnect messages. Defaults to slog.Default().
	Logger *slog.Logger

	// Existing opens only a key prefix that already holds jobq data at
	// this build's layout: nothing is written, and a prefix without it
	// fails with backend.ErrNoSchema (see backend.OpenOptions). Defaults
	// to false: Open writes the layout marker.
	Existing bool
}

func (o Options) resolve(u urlSettings) (Options, error) {
	if u.keyPrefix != "" {
		if o.KeyPrefix != "" && o.KeyPrefix != u.keyPrefix {
			return o, &backend.InputError{Field: "key prefix", Reason: fmt.Sprintf("URL names %q but Options.KeyPrefix is %q", u.keyPrefix, o.KeyPrefix)}
		}
		o.KeyPrefix = u.keyPrefix
	}
	if o.KeyPrefix == "" {
		o.KeyPrefix = DefaultKeyPrefix
	}
	if err := validateKeyPrefix(o.KeyPrefix); err != nil {
		return o, err
	}
	if u.timeout > 0 {
		o.Timeout = u.timeout
	}
	if o.Timeout < 0 {
		return o, &backend.InputError{Field: "timeout", Reason: fmt.Sprintf("%s is negative", o.Timeout)}
	}
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Second
	}
	if u.poolSize > 0 {
		o.PoolSize = u.poolSize
	}
	if o.PoolSize < 0 || o.PoolSize > 10000 {
		return o, &backend.InputError{Field: "pool size", Reason: fmt.Sprintf("%d is outside 0..10000", o.PoolSize)}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o, nil
}

// Backend is a jobq store under one key prefix of a Redis server or
// cluster. It is safe for concurrent use; many Backends (in one process or
// many) may share a prefix.
type Backend struct {
	c        *client
	opts     Options
	keys     *keyspace
	reg      *registry
	notifier *notifier
	limits   *limitwake.Tracker // wakes local workers when a limited queue's job ends
	inserts  *inserter
	origin   string // tags this Backend's pub/sub messages
	finish   *finishSender
	url      string // as given to Open when it has secrets, to scrub them from errors
	grace    time.Duration

	cancelPoll cancelPoll // what JobCancelling last saw (cancel.go)
	expired    expiredLog // what claims expired, for the next sweep (deadline.go)

	closed     atomic.Bool
	closeMu    sync.Mutex
	background lifecycle.Group // the notifier's loop
}

var (
	_ backend.Backend  = (*Backend)(nil)
	_ backend.Migrator = (*Backend)(nil)
	_ backend.Notifier = (*Backend)(nil)
)

// Open connects to the Redis server or cluster named by a redis:// or
// rediss:// URL and, unless opts.Existing, writes the key prefix's layout
// marker (prefix:schema). ctx bounds only the opening, each step of it
// (connecting included), as Options.Timeout does.
//
// It fails with backend.ErrInvalidInput for a malformed URL or option,
// backend.ErrUnavailable when the server cannot be reached, refuses the
// login, or does not answer before ctx's deadline (a rediss:// URL for a
// plain port, or the reverse, says so), backend.ErrSchemaTooNew when the
// prefix was written by a newer jobq, and, with opts.Existing,
// backend.ErrNoSchema when the prefix holds no jobq data. No error shows
// the URL's password.
func Open(ctx context.Context, rawURL string, opts Options) (*Backend, error) {
	b, err := openBackend(ctx, rawURL, opts)
	if err != nil {
		return nil, backend.RedactError(err, rawURL)
	}
	return b, nil
}

func openBackend(ctx context.Context, rawURL string, opts Options) (*Backend, error) {
	u, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	opts, err = opts.resolve(u)
	if err != nil {
		return nil, err
	}
	cfg := u.client
	cfg.timeout = opts.Timeout
	cfg.poolSize = opts.PoolSize
	c, err := newClient(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open: %w", err)
	}
	b := &Backend{
		c:      c,
		opts:   opts,
		keys:   newKeyspace(opts.KeyPrefix),
		origin: strconv.FormatUint(rand.Uint64(), 36),
		grace:  max(30*time.Second, 3*opts.Timeout),
	}
	if len(backend.Secrets(rawURL)) > 0 {
		b.url = rawURL
	}
	b.reg = newRegistry(b)
	b.notifier = newNotifier(b)
	b.finish = newFinishSender(b)
	b.limits = limitwake.New(b.notifier.wake)
	b.inserts = newInserter(b)
	err = b.start(ctx)
	if !b.c.opened() && err == nil {
		// ctx ended as start returned: a connection may have been closed.
		err = fmt.Errorf("open: %w", context.Cause(ctx))
	}
	if err != nil {
		_ = b.c.close()
		return nil, err
	}
	return b, nil
}

// start checks the server, the layout marker and persistence.
func (b *Backend) start(ctx context.Context) error {
	if err := b.c.ping(ctx); err != nil {
		return fmt.Errorf("open: %w", err)
	}
	if b.opts.Existing {
		if err := b.checkExisting(ctx); err != nil {
			return err
		}
	} else if _, err := b.Migrate(ctx); err != nil {
		return err
	}
	if err := b.c.loadScripts(ctx, allScripts); err != nil {
		return fmt.Errorf("open: load scripts: %w", err)
	}
	b.warnIfVolatile(ctx)
	return nil
}

// checkExisting refuses a key prefix without jobq data at this layout.
func (b *Backend) checkExisting(ctx context.Context) error {
	v, ok, err := b.layout(ctx)
	switch {
	case err != nil:
		return fmt.Errorf("open: %w", err)
	case !ok:
		return fmt.Errorf("open: %w", b.layoutError(0, fmt.Sprintf("the prefix holds no jobq data (no key %s)", b.keys.schema)))
	case v != LayoutVersion:
		return fmt.Errorf("open: %w", b.layoutError(v, ""))
	}
	return nil
}

// layoutError is the error of a key prefix at layout have (0: no marker,
// missing saying so) when this build needs LayoutVersion. It names the
// server and prefix but never the URL, which may hold a password.
func (b *Backend) layoutError(have int, missing string) *backend.SchemaError {
	return &backend.SchemaError{
		Store:   fmt.Sprintf("redis at %s key prefix %q", b.c.host, b.opts.KeyPrefix),
		Have:    have,
		Want:    LayoutVersion,
		Missing: missing,
	}
}

// layout reads the layout marker; ok is false when there is none.
func (b *Backend) layout(ctx context.Context) (version int, ok bool, err error) {
	s, ok, err := b.c.get(ctx, b.keys.schema)
	if err != nil || !ok {
		return 0, ok, err
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		return 0, false, fmt.Errorf("key %s holds %q, not a jobq layout version", b.keys.schema, s)
	}
	return v, true, nil
}

// Migrate writes the layout marker of the key prefix and returns its
// version. Redis creates every other key when it is first written, so
// there is nothing else to set up for a new prefix; a layout-2, 3 or 4
// prefix has its ready jobs moved into the ready set of layout 5, and a
// prefix of any layout before 7 its failed jobs indexed by job ID, and a
// layout-8 prefix its keyed structures converted (see LayoutVersion),
// queue by queue, before the marker is raised (a layout-9 prefix needs
// only the marker). It fails with backend.ErrSchemaTooNew, writing
// nothing, when the prefix was written by a newer jobq.
func (b *Backend) Migrate(ctx context.Context) (int, error) {
	if b.closed.Load() {
		return 0, fmt.Errorf("migrate: %w", backend.ErrClosed)
	}
	v, ok, err := b.layout(ctx)
	if err != nil {
		return 0, b.fail("migrate", err)
	}
	if ok && v > LayoutVersion {
		return 0, fmt.Errorf("migrate: %w", b.layoutError(v, ""))
	}
	if ok && v < 2 {
		// Nothing reads layout 1's jobs: upgrade only a prefix that never
		// had a queue.
		used, err := b.c.existAll(ctx, []string{b.keys.queues})
		if err != nil {
			return 0, b.fail("migrate", err)
		}
		if used[0] {
			return 0, fmt.Errorf("migrate: key prefix %q holds queues of layout %d, written by a development build of jobq whose jobs this build cannot read: drain them with that build, then delete the prefix's keys", b.opts.KeyPrefix, v)
		}
	}
	if ok && v < 5 {
		if err := b.adoptReady(ctx); err != nil {
			return 0, b.fail("migrate", err)
		}
	}
	if ok && v < 7 {
		if err := b.indexFailed(ctx); err != nil {
			return 0, b.fail("migrate", err)
		}
	}
	if ok && v == 8 {
		if err := b.rekey(ctx); err != nil {
			return 0, b.fail("migrate", err)
		}
	}
	if !ok || v < LayoutVersion {
		if err := b.c.set(ctx, b.keys.schema, strconv.Itoa(LayoutVersion)); err != nil {
			return 0, b.fail("migrate", err)
		}
	}
	return LayoutVersion, nil
}

// warnIfVolatile logs one warning when the server's settings show that a
// restart would lose jobs. A server that refuses CONFIG says nothing.
func (b *Backend) warnIfVolatile(ctx context.Context) {
	aof, err := b.c.configGet(ctx, "appendonly")
	if err != nil {
		return
	}
	save, err := b.c.configGet(ctx, "save")
	if err != nil {
		return
	}
	if aof == "yes" {
		return
	}
	if strings.TrimSpace(save) == "" {
		b.opts.Logger.Warn("jobq redis: persistence is off (appendonly no, save \"\"): a restart of the server loses every job; turn on appendonly",
			"addr", b.c.host, "key_prefix", b.opts.KeyPrefix)
		return
	}
	b.opts.Logger.Warn("jobq redis: only snapshots persist (appendonly no): a restart of the server loses the jobs written since the last snapshot; turn on appendonly",
		"addr", b.c.host, "key_prefix", b.opts.KeyPrefix, "save", save)
}

// KeyPrefix is the prefix of every key the backend uses.
func (b *Backend) KeyPrefix() string { return b.opts.KeyPrefix }

// Close stops the notifier and closes the connections. It is idempotent;
// calls after Close fail with backend.ErrClosed.
func (b *Backend) Close() error {
	b.closeMu.Lock()
	defer b.closeMu.Unlock()
	if b.closed.Swap(true) {
		return nil
	}
	b.notifier.stop()
	b.finish.stop()
	b.limits.Close()
	b.background.Stop()
	return b.c.close()
}

// begin refuses calls after Close.
func (b *Backend) begin(op string) error {
	if b.closed.Load() {
		return fmt.Errorf("%s: %w", op, backend.ErrClosed)
	}
	return nil
}

// fail wraps err with the operation once, and scrubs the URL's secrets.
func (b *Backend) fail(op string, err error) error {
	if err == nil {
		return nil
	}
	if b.closed.Load() && !errors.Is(err, backend.ErrClosed) {
		err = fmt.Errorf("%w: %w", backend.ErrClosed, err)
	}
	return backend.RedactError(fmt.Errorf("%s: %w", op, err), b.url)
}
