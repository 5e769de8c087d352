package verify

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/ticker"
)

// The replay fault (FaultReplay) does what an operator does to a failed
// workflow task: it replays the task's job from failed jobs
// (FailedReplay), which returns the workflow to running and its join to
// waiting. The verifier does it as soon as it sees the failure, while the
// task's siblings are still running and completing: a sibling's end must
// count down the join whether it lands before, during or after the
// replay, or the workflow stays running for good.
//
// A part planned to fail for good does so only in its first life: after
// its replay it succeeds, so its workflow must end succeeded with exactly
// one join completion. The handler tells its second life by its LastError:
// every backend gives a replayed job the error of its failed record as
// LastError (attempts reset), and a part planned to fail fails for good at
// its first attempt that returns, so in its first life no attempt sees
// that error. Should the second life's attempt die (a kill), the next one
// sees "lease expired" instead; for that, the verifier lists the job in
// the history directory's replayFile before it replays it, and the
// handler looks there too.

// evReplay is the verifier's line for one replay call: job, fid (its
// failed record), wf, try, task, perm (the part planned to fail), res,
// and err for an error. Its time is when the call began, before any claim
// of the job's second life.
const evReplay = "replay"

// The results of a replay line.
const (
	replayMoved   = "replayed" // back among the live jobs
	replaySkipped = "skipped"  // left in failed jobs (a cancelled workflow, a unique key held)
	replayError   = "error"    // the call failed, maybe after it applied: tried again next tick
	replayGone    = "gone"     // no longer in failed jobs: a call that failed had moved it
)

// replayFile, in the history directory, lists (one ID a line) the jobs
// the verifier replays, each written before its first replay call.
const replayFile = "replays.ids"

// replayer replays, every ReplayEvery, the run's failed workflow tasks:
// each job once (a job that fails again after its replay stays failed);
// a call that failed is made again on the next tick.
func (r *verifier) replayer(ctx context.Context) {
	st := &replayState{done: map[int64]bool{}, listed: map[int64]bool{}}
	ticker.Loop(ctx, r.cfg.ReplayEvery, func(ctx context.Context) { r.replayFailed(ctx, st) })
}

// replaySpread is planWorkflow's spread for cfg: wfReplaySpread with the
// replay fault, else none.
func replaySpread(cfg Config) time.Duration {
	if cfg.has(FaultReplay) {
		return wfReplaySpread
	}
	return 0
}

// replayState is what the replayer has done: the jobs it is done with
// (replayed, skipped, gone, or no task of the run) and those it listed
// in replayFile.
type replayState struct {
	done, listed map[int64]bool
}

func (r *verifier) replayFailed(ctx context.Context, st *replayState) {
	lctx, cancel := context.WithTimeout(ctx, callTimeout)
	failed, err := r.failedJobs(lctx)
	cancel()
	if err != nil {
		return // a restart may keep it from answering: next tick
	}
	for i := len(failed) - 1; i >= 0; i-- { // oldest first
		f := failed[i]
		if st.done[f.JobID] {
			continue
		}
		p, err := decodePayload(f.Payload)
		if err != nil || p.Run != r.id || p.Task == "" {
			st.done[f.JobID] = true
			continue
		}
		if !st.listed[f.JobID] {
			if err := r.listReplay(f.JobID); err != nil {
				r.fleetFail(err)
				return
			}
			st.listed[f.JobID] = true
		}
		if r.replay(ctx, f, p) != replayError {
			st.done[f.JobID] = true
		}
	}
}

// replay replays failed job f, a task p, and records the call.
func (r *verifier) replay(ctx context.Context, f *backend.FailedJob, p payload) string {
	at := monoNow()
	fields := []field{num("job", f.JobID), num("fid", f.ID), num("wf", p.WF), num("try", int64(p.Try)),
		str("task", p.Task), str("perm", strconv.FormatBool(p.Perm))}
	out, errf := r.replayJob(ctx, f.JobID)
	r.events.writeAt(at, evReplay, append(append(fields, errf...), str("res", out))...)
	return out
}

// replayJob replays failed job id as the run's operator and says how it
// went: replayMoved, replayGone, replaySkipped, or replayError with the
// error's class in errf. A call that began completes whatever ctx does
// (the faults stopping): its result is what the checker needs.
func (r *verifier) replayJob(ctx context.Context, id int64) (out string, errf []field) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
	defer cancel()
	res, err := r.direct.FailedReplay(cctx, backend.FailedReplayParams{IDs: []int64{id}})
	switch {
	case errors.Is(err, backend.ErrNotFound):
		return replayGone, nil
	case err != nil:
		return replayError, []field{str("err", errClass(err))}
	case res.Replayed > 0:
		r.count("replay")
		return replayMoved, nil
	}
	return replaySkipped, nil
}

// failedJobs lists the run queues' failed jobs, newest first.
func (r *verifier) failedJobs(ctx context.Context) ([]*backend.FailedJob, error) {
	var out []*backend.FailedJob
	for _, q := range r.queues {
		var before int64
		for {
			page, err := r.direct.FailedList(ctx, backend.FailedListParams{Filter: backend.FailedFilter{Queue: q}, Limit: 1000, BeforeID: before})
			if err != nil {
				return nil, err
			}
			out = append(out, page...)
			if len(page) < 1000 {
				break
			}
			before = page[len(page)-1].ID
		}
	}
	if len(r.queues) > 1 {
		slices.SortFunc(out, func(a, b *backend.FailedJob) int { return cmp.Compare(b.ID, a.ID) })
	}
	return out, nil
}

// listReplay appends job to replayFile.
func (r *verifier) listReplay(job int64) error {
	f, err := os.OpenFile(filepath.Join(r.dir, replayFile), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("verify: list a replay: %w", err)
	}
	_, err = f.WriteString(strconv.FormatInt(job, 10) + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("verify: list a replay: %w", err)
	}
	return nil
}

// isPermanentOnPurpose reports whether a job's error is the permanent
// failure its plan asked for.
func isPermanentOnPurpose(e string) bool {
	return strings.Contains(e, onPurposeText) && strings.Contains(e, "permanent")
}

// replayedBy says how the handler knows that job, a part planned to fail
// for good, was replayed: "lasterror" (its LastError is its failure's),
// "listed" (the verifier listed it in replayFile), or "" (its first life).
func (h *historyWriter) replayedBy(job *jobq.Job) string {
	if isPermanentOnPurpose(job.LastError) {
		return "lasterror"
	}
	f, err := os.Open(filepath.Join(filepath.Dir(h.f.Name()), replayFile))
	if err != nil {
		return ""
	}
	defer f.Close()
	id := strconv.FormatInt(job.ID, 10)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if sc.Text() == id {
			return "listed"
		}
	}
	return ""
}

// The checker's side.

// mayMove reports whether replay line r may have moved its job back
// among the live ones.
func mayMove(r *record) bool {
	switch r.val {
	case replayMoved, replayError, replayGone:
		return true
	}
	return false
}

// wfReplays is what the replay lines say of one send of a workflow.
type wfReplays struct {
	moved int  // tasks replayed (or maybe: a call that failed)
	perm  bool // among them the part planned to fail for good
}

// indexReplay files a replay line of the verifier under its job and its
// workflow, and counts it.
func (c *checker) indexReplay(r *record) {
	j := c.job(r.job)
	if len(j.replays) == 0 {
		c.rep.Replays++
	}
	j.replays = append(j.replays, r)
	switch r.val {
	case replayMoved, replayGone:
		c.rep.Replayed++
		c.rep.Injected["replay"]++
	case replaySkipped:
		c.rep.ReplaysSkipped++
	case replayError:
		c.rep.ReplayErrors++
	}
	if !mayMove(r) {
		return
	}
	if j.replayAt == 0 {
		j.replayAt = r.mono
	}
	n, err1 := strconv.ParseInt(r.get("wf"), 10, 64)
	try, err2 := strconv.Atoi(r.get("try"))
	if err1 != nil || err2 != nil {
		return
	}
	k := wfKey{n, try}
	w := c.wfReplays[k]
	if w == nil {
		w = &wfReplays{}
		c.wfReplays[k] = w
	}
	if len(j.replays) == 1 || !mayMoveAny(j.replays[:len(j.replays)-1]) {
		w.moved++
	}
	w.perm = w.perm || r.get("perm") == "true"
}

func mayMoveAny(rs []*record) bool {
	for _, r := range rs {
		if mayMove(r) {
			return true
		}
	}
	return false
}

// replayedBetween reports whether a replay of j that may have moved it
// began after from and before to.
func (j *jobInfo) replayedBetween(from, to int64) bool {
	for _, r := range j.replays {
		if mayMove(r) && from < r.mono && r.mono < to {
			return true
		}
	}
	return false
}

// life is how many replays of j that may have moved it began before
// attempt a was claimed: 0 in its first life. (A call that failed and the
// one made again count as two: a life may then have no claim, which only
// loosens the allowance per life.)
func (j *jobInfo) life(a *attempt) int {
	n := 0
	for _, r := range j.replays {
		if mayMove(r) && a.at() > r.mono {
			n++
		}
	}
	return n
}
