package verify

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/jobq/jobq"
)

// JobType is the type of the jobs verify enqueues; its handler is the
// one RunWorker registers.
const JobType = "jobq.verify"

// payload is a verification job: which run and which of its jobs it is
// (seq, also in its unique key), and what its handler does, decided at
// enqueue so that every attempt of a job behaves alike.
type payload struct {
	Run  string `json:"run"`
	Seq  int64  `json:"seq"`
	Ms   int64  `json:"ms"`             // how long each attempt works
	Fail int    `json:"fail,omitempty"` // the first attempts that fail on purpose
	Perm bool   `json:"perm,omitempty"` // fails for good at its first attempt
	// A workflow task (the workflow workload) also names its workflow:
	// its number, which send of it this is (a send whose reply was lost
	// is sent again, and may have been inserted twice), and the task.
	WF   int64  `json:"wf,omitempty"`
	Try  int    `json:"try,omitempty"`
	Task string `json:"task,omitempty"`
	// A job of the keyed workload also names its key (its queue is the
	// job's), its place among its key's jobs (0 first, in enqueue order)
	// and whether its queue is the ordered one.
	Key  string `json:"key,omitempty"`
	KPos int64  `json:"kpos,omitempty"`
	Ord  bool   `json:"ord,omitempty"`
}

// The workload's mix. Transient failures take one or two attempts, fewer
// than the allowance, so they end done unless faults take the rest.
const (
	transientShare = 0.10
	permanentShare = 0.02
	shortMinMs     = 1
	shortMaxMs     = 20
)

// errOnPurpose is the error of the attempts a job's plan fails.
var errOnPurpose = errors.New("verify: failed on purpose")

// onPurposeText is in the failed-jobs error of the jobs failed on purpose.
const onPurposeText = "failed on purpose"

// planJob decides what job seq of a run does: most work a few
// milliseconds; slow ones (share slow) work one to two and a half leases,
// so they need heartbeats and are still running when a paused holder
// comes back; some fail their first attempts, a few fail for good.
func planJob(rng *rand.Rand, run string, seq int64, slow float64, lease time.Duration) payload {
	p := payload{Run: run, Seq: seq}
	if rng.Float64() < slow {
		lo, hi := lease.Milliseconds(), lease.Milliseconds()*5/2
		p.Ms = lo + rng.Int64N(max(1, hi-lo))
	} else {
		p.Ms = shortMinMs + rng.Int64N(shortMaxMs-shortMinMs+1)
	}
	switch x := rng.Float64(); {
	case x < permanentShare:
		p.Perm = true
	case x < permanentShare+transientShare:
		p.Fail = 1
		if rng.Float64() < 0.3 {
			p.Fail = 2
		}
	}
	return p
}

// perform runs one attempt of p: it works p.Ms (or until ctx ends, with
// ctx's cause) and then fails or succeeds as planned. A part planned to
// fail for good succeeds once it was replayed (see replay.go).
func perform(ctx context.Context, job *jobq.Job, p payload, replayed bool) error {
	t := time.NewTimer(time.Duration(p.Ms) * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
	}
	switch {
	case p.Perm && replayed:
		return nil
	case p.Perm:
		return jobq.Permanent(errOnPurpose)
	case job.Attempt <= p.Fail:
		return errOnPurpose
	}
	return nil
}

// result classifies how an attempt ended, for its end line.
func result(ctx context.Context, err error) string {
	if err == nil {
		return resOK
	}
	cause := err
	if ctx.Err() != nil {
		cause = context.Cause(ctx)
	}
	switch {
	case errors.Is(cause, jobq.ErrLeaseLost):
		return resLeaseLost
	case errors.Is(cause, jobq.ErrShutdown):
		return resShutdown
	case errors.Is(cause, jobq.ErrJobCancelled):
		return resCancelled
	case errors.Is(cause, context.DeadlineExceeded):
		return resTimeout
	case jobq.IsPermanent(err):
		return resPermanent
	case errors.Is(err, errOnPurpose):
		return resError
	}
	return resOther
}

// decodePayload reads a verification job's payload.
func decodePayload(raw []byte) (payload, error) {
	var p payload
	if err := json.Unmarshal(raw, &p); err != nil {
		return p, err
	}
	return p, nil
}
