package verify

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/ticker"
)

// Enqueue pacing: a batch every tick, at most maxBatch jobs a call.
const (
	enqueueTick  = 100 * time.Millisecond
	maxBatch     = 500
	enqueueShare = 0.8 // of the run's duration, over which jobs are enqueued
	callTimeout  = 15 * time.Second
)

// producer enqueues the run's jobs in batches spread over most of the
// run, so the faults hit jobs at every stage. Each job has a unique key,
// so a batch whose reply was lost (the proxy cut it, the broker died) is
// sent again as it was: the jobs it did insert come back as duplicates
// naming their IDs, and every job ends with a known ID.
type producer struct {
	client       *jobq.Client
	queue, runID string
	n            int
	spread       time.Duration
	maxAttempts  int
	plan         func(seq int64) payload
	events       *historyWriter
	// keyOf, in the keyed workload, gives job seq its queue and key and
	// fills in the payload's; nil otherwise. It is called once per seq,
	// in seq order, which is each key's enqueue order.
	keyOf func(seq int64, p *payload) (queue string)

	// The workflow workload (fanOut > 0): n counts workflows, each of
	// fanOut parts and a join, as planWF plans workflow n.
	fanOut int
	planWF func(n int64) (tasks []payload, perm bool)

	// identity, in the unique workload, is the identity job seq asks
	// for; nil otherwise.
	identity func(seq int64) int64
	// deadlineOf, in the deadline workload, is how far ahead of its
	// batch's first send job seq's deadline is, and its class (see
	// deadlinePlanner); 0 for a job without one. nil otherwise. It is
	// called once per seq, in seq order.
	deadlineOf func(seq int64) (time.Duration, int)

	mu    sync.Mutex
	acked map[int64]int64 // job ID -> seq: the jobs whose enqueue was acknowledged
	// ackMono is when each acknowledged job's enqueue was first
	// acknowledged (monoNow): the job was live then, unless it had
	// already ended.
	ackMono map[int64]int64
	dups    int             // requests the unique workload was answered as duplicates
	wfAcked map[int64]int64 // workflow ID -> number: the workflows acknowledged
	wfPerm  map[int64]bool  // the numbers of the workflows with a part failing for good
	// deadlines are the deadline workload's, by seq: the deadline each
	// job was sent with, fixed at its batch's first send (every job
	// planned, acknowledged or not); givenUp counts the jobs left out of
	// a batch sent again because their deadline had passed first.
	deadlines map[int64]plannedDeadline
	givenUp   int

	enqueued atomic.Int64 // jobs acknowledged so far
	retries  atomic.Int64 // batches sent again
}

func newProducer(client *jobq.Client, cfg Config, queue, run string, rng *rand.Rand, events *historyWriter) *producer {
	p := &producer{
		client: client, queue: queue, runID: run, n: cfg.Jobs,
		spread:      time.Duration(float64(cfg.Duration) * enqueueShare),
		maxAttempts: cfg.MaxAttempts, events: events,
		plan: func(seq int64) payload {
			return planJob(rng, run, seq, cfg.SlowShare, cfg.Lease)
		},
		planWF: func(n int64) ([]payload, bool) {
			return planWorkflow(rng, run, n, cfg.FanOut, cfg.SlowShare, cfg.Lease, replaySpread(cfg))
		},
		acked:   make(map[int64]int64, cfg.Jobs),
		ackMono: make(map[int64]int64, cfg.Jobs),
		wfAcked: map[int64]int64{}, wfPerm: map[int64]bool{},
	}
	if cfg.Workflows > 0 {
		p.n, p.fanOut = cfg.Workflows, cfg.FanOut
	}
	if cfg.Unique > 0 {
		p.identity = cfg.identityOf
	}
	if cfg.Keys > 0 {
		p.keyOf = keyPlanner(cfg.keyQueues(queue), cfg.Keys, seeded(cfg.Seed, streamKeys))
	}
	if cfg.Deadlines > 0 {
		p.deadlineOf = deadlinePlanner(cfg.Deadlines, cfg.Lease, seeded(cfg.Seed, streamDeadlines))
		p.deadlines = make(map[int64]plannedDeadline, int(float64(cfg.Jobs)*cfg.Deadlines)+1)
	}
	return p
}

// keyPlanner spreads the keyed workload's jobs: key i ("k" and i) lives
// on queue i modulo the number of queues, so each queue has its share of
// the keys, and each job draws its key from rng. Its place in its key
// counts the key's jobs planned before it.
func keyPlanner(qs []keyQueue, keys int, rng *rand.Rand) func(seq int64, p *payload) string {
	next := make([]int64, keys)
	return func(_ int64, p *payload) string {
		i := rng.IntN(keys)
		q := qs[i%len(qs)]
		p.Key, p.KPos, p.Ord = "k"+strconv.Itoa(i), next[i], q.rules.Ordered
		next[i]++
		return q.name
	}
}

// uniqueKey is job seq's unique key: its own, or in the unique workload
// its identity's.
func (p *producer) uniqueKey(seq int64) string {
	if p.identity != nil {
		return p.queue + "-u" + strconv.FormatInt(p.identity(seq), 10)
	}
	return p.queue + "-" + strconv.FormatInt(seq, 10)
}

// run enqueues every job (or workflow), on schedule, until done or ctx
// ends.
func (p *producer) run(ctx context.Context) error {
	start := time.Now()
	t := time.NewTicker(enqueueTick)
	defer t.Stop()
	next := 0
	for next < p.n {
		target := p.n
		if el := time.Since(start); el < p.spread {
			target = min(p.n, int(float64(p.n)*float64(el)/float64(p.spread))+1)
		}
		for next < target {
			k := min(target-next, maxBatch)
			insert := p.insert
			if p.fanOut > 0 {
				insert = p.insertWorkflows
			}
			if err := insert(ctx, next, k); err != nil {
				return err
			}
			next += k
		}
		if next >= p.n {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// insert enqueues jobs seq from..from+k-1 in one batch, sending it again
// until it is acknowledged.
func (p *producer) insert(ctx context.Context, from, k int) error {
	specs, seqs := make([]jobq.JobSpec, k), make([]int64, k)
	sent := time.Now()
	for i := range specs {
		seq := int64(from + i)
		seqs[i] = seq
		pl, queue := p.plan(seq), p.queue
		var opts []jobq.EnqueueOption
		if p.keyOf != nil {
			// A batch sent again after a lost reply keeps its keys in
			// order: the jobs the lost send inserted come back as
			// duplicates with their IDs (a batch is inserted whole or
			// not at all), so within a key ID order stays the order of
			// the first insert. (One that already ended is inserted
			// again, a new job after the others: the checks go by ID,
			// the backend's insertion order.)
			queue = p.keyOf(seq, &pl)
			opts = append(opts, jobq.Key(pl.Key))
		}
		if p.deadlineOf != nil {
			opts = p.withDeadline(seq, sent, opts)
		}
		specs[i] = jobq.JobSpec{Type: JobType, Payload: pl, Options: append(opts,
			jobq.Queue(queue), jobq.UniqueKey(p.uniqueKey(seq)), jobq.MaxAttempts(p.maxAttempts),
		)}
	}
	backoff := 50 * time.Millisecond
	var margin time.Duration // how far ahead a deadline must be to be sent
	for {
		if p.deadlineOf != nil {
			if specs, seqs = p.dropPassed(specs, seqs, margin); len(specs) == 0 {
				p.enqueued.Add(int64(k))
				return nil
			}
		}
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		res, err := p.client.EnqueueMany(cctx, specs)
		cancel()
		if err == nil {
			now := monoNow()
			p.mu.Lock()
			for i, r := range res {
				if _, seen := p.acked[r.ID]; seen {
					// A duplicate of the unique workload: the job keeps
					// the seq that made it.
					p.dups++
					continue
				}
				// (A duplicate naming a job not acknowledged yet names
				// the one a send whose reply was lost made.)
				p.acked[r.ID], p.ackMono[r.ID] = seqs[i], now
			}
			p.mu.Unlock()
			p.enqueued.Add(int64(k))
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if p.deadlineOf != nil && deadlinePassed(err) {
			// The store's clock passed a deadline while the batch was
			// on its way (proxy latency, a send again after a cut): the
			// batch was refused whole. Send it again without the jobs
			// whose deadline is that close.
			margin = 2*margin + 100*time.Millisecond
			p.retries.Add(1)
			p.events.write(evEnqueueFail, num("seq", seqs[0]), num("n", int64(len(seqs))), str("err", "deadline"))
			continue
		}
		if errors.Is(err, jobq.ErrInvalidInput) {
			return fmt.Errorf("verify: enqueue: %w", err)
		}
		p.retries.Add(1)
		p.events.write(evEnqueueFail, num("seq", int64(from)), num("n", int64(k)), str("err", errClass(err)))
		if !ticker.Sleep(ctx, backoff) {
			return ctx.Err()
		}
		backoff = min(2*backoff, time.Second)
	}
}

// withDeadline gives job seq its planned deadline, if any, counted from
// sent, the first send of its batch, and records it.
func (p *producer) withDeadline(seq int64, sent time.Time, opts []jobq.EnqueueOption) []jobq.EnqueueOption {
	ahead, class := p.deadlineOf(seq)
	if ahead <= 0 {
		return opts
	}
	// Whole milliseconds: every store keeps them exactly (the durable
	// ones keep microseconds), so the check compares what was sent.
	at := sent.Add(ahead).Truncate(time.Millisecond)
	p.mu.Lock()
	p.deadlines[seq] = plannedDeadline{at: at, class: class}
	p.mu.Unlock()
	return append(opts, jobq.Deadline(at))
}

// dropPassed leaves out of a batch about to be sent (specs, with their
// seqs) the jobs whose deadline is not at least margin ahead by the
// producer's clock: the store would refuse the batch whole. A job left
// out is given up, never acknowledged; a send whose reply was lost may
// have inserted it, and the checks take it in all the same.
func (p *producer) dropPassed(specs []jobq.JobSpec, seqs []int64, margin time.Duration) ([]jobq.JobSpec, []int64) {
	limit := time.Now().Add(margin)
	p.mu.Lock()
	defer p.mu.Unlock()
	keep := 0
	for i, seq := range seqs {
		if d, ok := p.deadlines[seq]; ok && d.at.Before(limit) {
			p.givenUp++
			continue
		}
		specs[keep], seqs[keep] = specs[i], seqs[i]
		keep++
	}
	return specs[:keep], seqs[:keep]
}

// deadlinePassed reports whether err is the store's refusal of a batch
// holding a deadline that had passed by its clock.
func deadlinePassed(err error) bool {
	var ie *backend.InputError
	return errors.As(err, &ie) && ie.Field == "deadline"
}

// deadlineState returns the deadline workload's deadlines by seq, and
// how many jobs were given up because theirs passed before a send.
func (p *producer) deadlineState() (map[int64]plannedDeadline, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.deadlines), p.givenUp
}

// ackedJobs returns the acknowledged jobs: ID to seq.
func (p *producer) ackedJobs() map[int64]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.acked)
}

// uniqueAcks returns when each acknowledged job was first acknowledged,
// and how many requests were answered as duplicates.
func (p *producer) uniqueAcks() (map[int64]int64, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.ackMono), p.dups
}
