package verify

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/jobq/jobq/backend"
)

// finalState is what the backend holds once the run has drained.
type finalState struct {
	acked  map[int64]int64           // acknowledged job ID -> seq
	failed []*backend.FailedJob      // the run queue's failed jobs
	live   map[int64]*backend.JobRow // the jobs still live
	stats  backend.QueueStats        // the run queue's counts
	wf     *wfState                  // the workflow workload's; nil for lone jobs
	keys   *keyFinal                 // the keyed workload's; nil without keys
	unique *uniqueFinal              // the unique workload's; nil without it
	// deadlines is the deadline workload's; nil without it.
	deadlines *deadlineFinal
}

// attemptKey names one claim as the history sees it: the process that
// held it, the job, the attempt it counted and its token. (With tokens a
// claim is its token; a backend that gives none yet leaves the attempt
// number, unique within one process's run.)
type attemptKey struct {
	proc string
	job  int64
	att  int
	tok  int64
}

// attempt is one claim of a job and everything the history says of it.
type attempt struct {
	key                  attemptKey
	claim, start, end    *record
	written, stale, aban *record
	werr                 []*record
	// endMono is when the handler stopped running: its end line, else
	// its process's exit (killed mid-handler), else never.
	endMono int64
}

// first is the earliest line of the attempt.
func (a *attempt) first() *record {
	if a.claim != nil {
		return a.claim
	}
	return a.start
}

// at is when the attempt was claimed: its first line's time (its
// earliest line's when it has neither claim nor start).
func (a *attempt) at() int64 {
	if f := a.first(); f != nil {
		return f.mono
	}
	if ls := a.lines(); len(ls) > 0 {
		return ls[0].mono
	}
	return 0
}

// lines are the attempt's own history lines, in time order.
func (a *attempt) lines() []*record {
	var out []*record
	for _, r := range []*record{a.claim, a.start, a.end, a.written, a.stale, a.aban} {
		if r != nil {
			out = append(out, r)
		}
	}
	out = append(out, a.werr...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].mono < out[j].mono })
	return out
}

// outcome is what became of an attempt's outcome.
type outcome int

const (
	// outNone: nothing was written: the handler never returned (its
	// process died), or the worker dropped its result.
	outNone outcome = iota
	// outApplied: the backend applied it (the Written hook).
	outApplied
	// outRefused: the fence refused it (the Stale hook), at the first try.
	outRefused
	// outAmbiguous: refused after a try that failed: the failed try may
	// have been applied and its reply lost, so the refusal was of a write
	// already done.
	outAmbiguous
	// outUnknown: the handler returned but its process died (or its
	// writes kept failing) before the worker heard what became of it.
	outUnknown
)

func (o outcome) String() string {
	return [...]string{"never written", "applied", "refused", "refused after a failed try (maybe applied)", "unknown (its process died)"}[o]
}

// procInfo is what the history says of one worker process.
type procInfo struct {
	exitMono int64 // 0: no exit line
	killed   bool
	down     bool // stopped gracefully (its down line)
	skew     int  // the sign of its clock's skew
	events   []*record
}

// checker turns a history and the backend's final state into a Report.
type checker struct {
	maxAttempts  int
	run          string
	maxAnomalies int

	recs      []*record
	procs     map[string]*procInfo
	jobs      map[int64]*jobInfo
	wfReplays map[wfKey]*wfReplays // the replay fault's, by workflow send
	fs        finalState
	rep       *Report
}

// jobInfo is everything known of one job.
type jobInfo struct {
	id       int64
	seq      int64 // -1 unknown
	acked    bool
	attempts []*attempt
	failed   []*backend.FailedJob
	live     *backend.JobRow
	// replays are the verifier's replay lines of the job (the replay
	// fault, or the replay of a held key's head); replayAt is the time of
	// the first that may have moved it back from failed jobs (0: none),
	// where its second life begins. A held head that fails again is
	// replayed again: each replay that may have moved it begins a life.
	replays  []*record
	replayAt int64
	// ended: checkTerminal found the job done (or done unconfirmed) or in
	// failed jobs.
	ended bool
}

// check runs every check of the history recs against fs and fills rep.
func check(recs []*record, fs finalState, maxAttempts int, run string, maxAnomalies int, rep *Report) {
	c := &checker{maxAttempts: maxAttempts, run: run, maxAnomalies: maxAnomalies, recs: recs,
		procs: map[string]*procInfo{}, jobs: map[int64]*jobInfo{}, wfReplays: map[wfKey]*wfReplays{}, fs: fs, rep: rep}
	c.index()
	c.checkJobs()
	c.checkCounts()
	if fs.wf != nil {
		c.checkWorkflows()
	}
	if fs.keys != nil {
		c.checkKeys()
	}
	if fs.unique != nil {
		c.checkUnique()
	}
	if fs.deadlines != nil {
		c.checkDeadlines()
	}
	c.summarise()
}

func (c *checker) job(id int64) *jobInfo {
	j := c.jobs[id]
	if j == nil {
		j = &jobInfo{id: id, seq: -1}
		c.jobs[id] = j
	}
	return j
}

func (c *checker) proc(name string) *procInfo {
	p := c.procs[name]
	if p == nil {
		p = &procInfo{}
		c.procs[name] = p
	}
	return p
}

// index groups the records by job and attempt, and by process.
func (c *checker) index() {
	byKey := map[attemptKey]*attempt{}
	get := func(r *record) *attempt {
		k := attemptKey{proc: r.proc, job: r.job, att: r.att, tok: r.tok}
		a := byKey[k]
		if a == nil {
			a = &attempt{key: k, endMono: math.MaxInt64}
			byKey[k] = a
			j := c.job(r.job)
			j.attempts = append(j.attempts, a)
		}
		return a
	}
	for _, r := range c.recs {
		switch r.ev {
		case evClaim:
			get(r).claim = r
		case evStart:
			get(r).start = r
			if r.seq >= 0 {
				c.job(r.job).seq = r.seq
			}
		case evEnd:
			a := get(r)
			a.end, a.endMono = r, r.mono
		case evWritten:
			get(r).written = r
		case evStale:
			get(r).stale = r
		case evWriteErr:
			a := get(r)
			a.werr = append(a.werr, r)
		case evAbandoned:
			get(r).aban = r
		case evRescued:
			c.rep.Rescued++
		case evReplay:
			if r.proc == verifierProc {
				c.indexReplay(r)
			}
		case evKeyReplay:
			if r.proc == verifierProc {
				c.indexKeyReplay(r)
			}
		case evDown:
			c.proc(r.proc).down = true
		case evExit:
			p := c.proc(r.get("worker"))
			p.exitMono, p.killed = r.mono, r.get("killed") == "true"
			p.events = append(p.events, r)
		case evSpawn, evKill, evPause, evResume:
			p := c.proc(r.get("worker"))
			p.events = append(p.events, r)
			if s := r.get("skew"); r.ev == evSpawn && s != "" && s != "0s" {
				p.skew = 1
				if strings.HasPrefix(s, "-") {
					p.skew = -1
				}
			}
		}
		c.countFault(r)
	}
	// A handler without an end line stopped when its process did.
	for _, j := range c.jobs {
		for _, a := range j.attempts {
			if a.end == nil {
				if p := c.procs[a.key.proc]; p != nil && p.exitMono > 0 {
					a.endMono = p.exitMono
				}
			}
		}
		sort.SliceStable(j.attempts, func(x, y int) bool { return claimedBefore(j.attempts[x], j.attempts[y]) })
	}
	for id, seq := range c.fs.acked {
		j := c.job(id)
		j.acked, j.seq = true, seq
	}
	for _, f := range c.fs.failed {
		j := c.job(f.JobID)
		j.failed = append(j.failed, f)
		if j.seq < 0 {
			if p, err := decodePayload(f.Payload); err == nil && p.Run == c.run {
				j.seq = p.Seq
			}
		}
	}
	for id, row := range c.fs.live {
		c.job(id).live = row
	}
}

// countFault counts the faults the verifier's lines record.
func (c *checker) countFault(r *record) {
	if r.proc != verifierProc {
		return
	}
	switch r.ev {
	case evKill, evPause, evCut, evBlackhole:
		c.rep.Injected[r.ev]++
	case evLatency:
		if r.get("spike") == "true" {
			c.rep.Injected[evLatency]++
		}
	case evBrokerDown:
		c.rep.Injected["restart"]++
	case evSpawn:
		c.rep.WorkerProcs++
		if s := r.get("skew"); s != "" && s != "0s" {
			c.rep.Injected["skew"]++
		}
	case evEnqueueFail:
		c.rep.EnqueueRetries++
	}
}

// claimedBefore orders two claims of one job: by token when the backend
// gives them, else by attempt number, else by time.
func claimedBefore(a, b *attempt) bool {
	if a.key.tok != 0 && b.key.tok != 0 && a.key.tok != b.key.tok {
		return a.key.tok < b.key.tok
	}
	if a.key.att != b.key.att {
		return a.key.att < b.key.att
	}
	return a.first().mono < b.first().mono
}

// strictlyBefore reports whether claim a is known to precede claim b by
// their identity alone (token, or attempt number without tokens).
func strictlyBefore(a, b *attempt) bool {
	if a.key.tok != 0 && b.key.tok != 0 {
		return a.key.tok < b.key.tok
	}
	return a.key.att < b.key.att
}

func (c *checker) outcome(a *attempt) outcome {
	switch {
	case a.written != nil:
		return outApplied
	case a.stale != nil:
		for _, w := range a.werr {
			if w.mono <= a.stale.mono {
				return outAmbiguous
			}
		}
		return outRefused
	case a.end == nil || a.aban != nil:
		return outNone
	case len(a.werr) > 0:
		return outUnknown
	}
	if p := c.procs[a.key.proc]; p != nil && p.down {
		return outNone // stopped gracefully: the worker gave the write up
	}
	return outUnknown
}

// terminal reports whether an applied outcome ended the job.
func terminal(a *attempt) bool {
	if a.written == nil {
		return false
	}
	switch a.written.val {
	case "done", "failed", "cancelled":
		return true
	}
	return false
}

func (c *checker) anomaly(kind string, j *jobInfo, detail string, attempts ...*attempt) {
	c.rep.anomalyCount[kind]++
	an := Anomaly{Kind: kind, Job: j.id, Detail: detail}
	if len(c.rep.Anomalies) < c.maxAnomalies {
		an.Lines = c.linesOf(attempts)
		c.rep.Anomalies = append(c.rep.Anomalies, an)
	} else {
		c.rep.MoreAnomalies++
	}
}

// linesOf are the history lines behind an anomaly: the attempts' own,
// and what the verifier did to their processes while they ran.
func (c *checker) linesOf(attempts []*attempt) []string {
	var recs []*record
	seen := map[*record]bool{}
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for _, a := range attempts {
		for _, r := range a.lines() {
			if !seen[r] {
				seen[r] = true
				recs = append(recs, r)
			}
			lo, hi = min(lo, r.mono), max(hi, r.mono)
		}
		if a.endMono != math.MaxInt64 {
			hi = max(hi, a.endMono)
		}
	}
	for _, a := range attempts {
		p := c.procs[a.key.proc]
		if p == nil {
			continue
		}
		for _, r := range p.events {
			if r.mono >= lo && r.mono <= hi && !seen[r] {
				seen[r] = true
				recs = append(recs, r)
			}
		}
	}
	sort.SliceStable(recs, func(i, j int) bool { return recs[i].mono < recs[j].mono })
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.String()
	}
	return out
}

// checkJobs runs the per-job checks.
func (c *checker) checkJobs() {
	for _, id := range slices.Sorted(maps.Keys(c.jobs)) {
		j := c.jobs[id]
		if j.acked {
			c.rep.Enqueued++
		} else {
			c.rep.Extra++
		}
		c.checkAttempts(j)
		c.checkOverlaps(j)
		c.checkTerminal(j)
	}
}

// checkAttempts: no job was claimed more often than its allowance (in
// each of its lives: a replay resets its attempts), and no two claims of
// it shared a token.
func (c *checker) checkAttempts(j *jobInfo) {
	claims, ok := 0, 0
	var lives [][]*attempt
	byTok := map[int64]*attempt{}
	for _, a := range j.attempts {
		if a.claim == nil && a.start == nil {
			continue // an outcome line whose claim was not recorded
		}
		claims++
		l := j.life(a)
		for len(lives) <= l {
			lives = append(lives, nil)
		}
		lives[l] = append(lives[l], a)
		if p := c.procs[a.key.proc]; p != nil && p.skew > 0 {
			c.rep.ClaimsAhead++
		} else if p != nil && p.skew < 0 {
			c.rep.ClaimsBehind++
		}
		if a.end != nil && a.end.val == resOK {
			ok++
		}
		if a.key.tok != 0 {
			c.rep.Tokens = true
			if b := byTok[a.key.tok]; b != nil {
				c.anomaly(AnomalyTokenReused, j, fmt.Sprintf("two claims, by %s and %s, carry token %d: two holders of one claim", b.key.proc, a.key.proc, a.key.tok), b, a)
			}
			byTok[a.key.tok] = a
		}
	}
	c.rep.Attempts += claims
	if claims > 1 {
		c.rep.Reruns++
	}
	if ok > 1 {
		c.rep.OKTwice++
	}
	for l, as := range lives {
		c.rep.MostAttempts = max(c.rep.MostAttempts, len(as))
		if allow := c.maxAttempts + backend.MaxFreeReleases; len(as) > allow {
			when := ""
			if l > 0 {
				when = " since its replay"
			}
			c.anomaly(AnomalyTooManyAttempts, j, fmt.Sprintf("claimed %d times%s; its allowance is %d attempts + %d free releases", len(as), when, c.maxAttempts, backend.MaxFreeReleases), as...)
		}
	}
}

// checkOverlaps: two attempts of a job run at once only when the earlier
// claim's outcome was refused or never written; and no claim follows one
// whose outcome ended the job.
func (c *checker) checkOverlaps(j *jobInfo) {
	concurrent := false
	for x, a := range j.attempts {
		if a.start == nil {
			continue
		}
		for _, b := range j.attempts[x+1:] {
			if b.start == nil || !(a.start.mono < b.endMono && b.start.mono < a.endMono) {
				continue
			}
			early, late := a, b
			if claimedBefore(b, a) {
				early, late = b, a
			}
			switch o := c.outcome(early); o {
			case outApplied:
				c.anomaly(AnomalyUnfencedOverlap, j, fmt.Sprintf("the earlier claim (att %d tok %d, %s) had its outcome applied (%s) while a later claim (att %d tok %d, %s) ran: a stale write was applied",
					early.key.att, early.key.tok, early.key.proc, early.written.val, late.key.att, late.key.tok, late.key.proc), early, late)
			case outUnknown:
				c.rep.OverlapUnknown++
				concurrent = true
			default:
				concurrent = true
			}
		}
	}
	if concurrent {
		c.rep.Concurrent++
	}
	for _, t := range j.attempts {
		if !terminal(t) {
			continue
		}
		for _, b := range j.attempts {
			if b == t || !strictlyBefore(t, b) {
				continue
			}
			if b.start != nil && t.start != nil && t.start.mono < b.endMono && b.start.mono < t.endMono {
				continue // reported as an overlap
			}
			if t.written.val == "failed" && j.replayedBetween(t.at(), b.at()) {
				continue // its second life: the verifier replayed it from failed jobs
			}
			c.anomaly(AnomalyRanAfterEnd, j, fmt.Sprintf("claimed again (att %d tok %d, %s) after the claim att %d tok %d (%s) ended it %s",
				b.key.att, b.key.tok, b.key.proc, t.key.att, t.key.tok, t.key.proc, t.written.val), t, b)
		}
	}
}

// checkTerminal: the job ended in exactly one terminal state, and an
// acknowledged one was not lost.
func (c *checker) checkTerminal(j *jobInfo) {
	var done, failedApplied []*attempt
	var okUnsure *attempt
	for _, a := range j.attempts {
		switch o := c.outcome(a); {
		case o == outApplied && a.written.val == "done":
			done = append(done, a)
		case o == outApplied && a.written.val == "failed" && j.replayedBetween(a.at(), math.MaxInt64):
			// A failure of an earlier life, which a replay undid.
		case o == outApplied && a.written.val == "failed":
			failedApplied = append(failedApplied, a)
		case (o == outUnknown || o == outAmbiguous) && a.end != nil && a.end.val == resOK:
			okUnsure = a
		}
		switch c.outcome(a) {
		case outRefused:
			c.rep.Refused++
		case outAmbiguous:
			c.rep.MaybeApplied++
		}
		if a.end != nil && a.end.val == resLeaseLost {
			c.rep.LeaseLost++
		}
	}
	switch {
	case len(done) > 1:
		c.anomaly(AnomalyDoubleDone, j, fmt.Sprintf("%d claims had done applied", len(done)), done...)
	case len(done) == 1 && len(j.failed) > 0 && expiredRow(j) != nil:
		c.anomaly(AnomalyExpiredButRan, j, fmt.Sprintf("done applied (att %d, %s) and expired into failed jobs (%q)", done[0].key.att, done[0].key.proc, expiredRow(j).Error), done...)
	case len(done) == 1 && len(j.failed) > 0:
		c.anomaly(AnomalyDoneAndFailed, j, fmt.Sprintf("done applied (att %d, %s) and in failed jobs (%q)", done[0].key.att, done[0].key.proc, j.failed[0].Error), done...)
	}
	if len(j.failed) > 1 {
		c.anomaly(AnomalyFailedTwice, j, fmt.Sprintf("in failed jobs %d times", len(j.failed)), j.attempts...)
	}
	if j.live != nil {
		c.anomaly(AnomalyNotFinished, j, fmt.Sprintf("still %s after the drain (attempts %d of %d)", j.live.Status, j.live.Attempts, j.live.MaxAttempts), j.attempts...)
		return
	}
	j.ended = len(j.failed) > 0 || len(done) > 0 || okUnsure != nil
	switch {
	case len(j.failed) > 0:
		c.rep.Failed++
		switch e := j.failed[0].Error; {
		case strings.HasPrefix(e, backend.DeadlineErrorPrefix):
			c.rep.FailedExpired++
		case strings.Contains(e, onPurposeText) && strings.Contains(e, "permanent"):
			c.rep.FailedOnPurpose++
		case strings.Contains(e, "lease expired"):
			c.rep.FailedLeaseExpired++
		default:
			c.rep.FailedAttemptsSpent++
		}
	case len(done) > 0:
		c.rep.Done++
	case okUnsure != nil:
		c.rep.DoneUnconfirmed++
	case !j.acked:
		// An unacknowledged job may vanish: nobody was promised it.
	case len(failedApplied) > 0:
		c.anomaly(AnomalyLost, j, "its failure was applied but it is not in failed jobs", j.attempts...)
	default:
		why := "never claimed"
		if len(j.attempts) > 0 {
			why = fmt.Sprintf("%d claims, none succeeded", len(j.attempts))
		}
		if j.replayAt != 0 {
			why += ", replayed from failed jobs"
		}
		c.anomaly(AnomalyLost, j, "acknowledged, gone from the backend and not in failed jobs: "+why, j.attempts...)
	}
}

// checkCounts: the backend's own counts agree with the history.
func (c *checker) checkCounts() {
	s := c.fs.stats
	if n := s.Pending + s.Scheduled + s.Reserved; n > 0 {
		c.countsAnomaly(fmt.Sprintf("the queue still holds %d pending, %d scheduled, %d reserved jobs after the drain", s.Pending, s.Scheduled, s.Reserved))
	}
	if s.Failed != int64(len(c.fs.failed)) {
		c.countsAnomaly(fmt.Sprintf("the queue counts %d failed jobs but lists %d", s.Failed, len(c.fs.failed)))
	}
	for _, f := range c.fs.failed {
		j := c.jobs[f.JobID]
		if j != nil && (j.acked || len(j.attempts) > 0) {
			continue
		}
		if p, err := decodePayload(f.Payload); err == nil && p.Run == c.run {
			continue // a job of a batch sent again, never run: known by its payload
		}
		c.anomaly(AnomalyUnknownFailed, c.job(f.JobID), fmt.Sprintf("failed job %d is not one this run enqueued: %q", f.JobID, f.Error))
	}
	c.rep.BackendFailed = s.Failed
}

func (c *checker) countsAnomaly(detail string) {
	c.rep.anomalyCount[AnomalyCounts]++
	if len(c.rep.Anomalies) < c.maxAnomalies {
		c.rep.Anomalies = append(c.rep.Anomalies, Anomaly{Kind: AnomalyCounts, Detail: detail})
	} else {
		c.rep.MoreAnomalies++
	}
}

// summarise turns the anomaly counts into the checks' rows.
func (c *checker) summarise() {
	r := c.rep
	n := func(kinds ...string) int {
		t := 0
		for _, k := range kinds {
			t += r.anomalyCount[k]
		}
		return t
	}
	r.Checks = []Check{
		{Name: "no acknowledged job lost", Anomalies: n(AnomalyLost),
			Detail: fmt.Sprintf("%d acknowledged (+%d from batches sent again): %d done, %d done unconfirmed (writer killed), %d in failed jobs", r.Enqueued, r.Extra, r.Done, r.DoneUnconfirmed, r.Failed)},
		{Name: "one place at a time, or fenced", Anomalies: n(AnomalyUnfencedOverlap, AnomalyRanAfterEnd, AnomalyTokenReused),
			Detail: fmt.Sprintf("%d jobs ran in two places at once, the earlier claim refused or never written", r.Concurrent)},
		{Name: "exactly one terminal state", Anomalies: n(AnomalyDoubleDone, AnomalyDoneAndFailed, AnomalyFailedTwice, AnomalyNotFinished),
			Detail: "none done twice, done and failed, or left live"},
		{Name: "attempts within allowance", Anomalies: n(AnomalyTooManyAttempts),
			Detail: fmt.Sprintf("most claims of one job %d; allowance %d + %d free releases", r.MostAttempts, c.maxAttempts, backend.MaxFreeReleases)},
		{Name: "backend counts agree", Anomalies: n(AnomalyCounts, AnomalyUnknownFailed),
			Detail: fmt.Sprintf("failed %d (history %d); %d pending, %d scheduled, %d reserved", r.BackendFailed, r.Failed, c.fs.stats.Pending, c.fs.stats.Scheduled, c.fs.stats.Reserved)},
	}
	if c.fs.wf != nil {
		r.Checks = append(r.Checks, c.workflowChecks(n)...)
	}
	if c.fs.keys != nil {
		r.Checks = append(r.Checks, c.keyChecks(n)...)
	}
	if c.fs.unique != nil {
		r.Checks = append(r.Checks, c.uniqueCheck(n))
	}
	if c.fs.deadlines != nil {
		r.Checks = append(r.Checks, c.deadlineChecks(n)...)
	}
	for i := range r.Checks {
		r.Checks[i].OK = r.Checks[i].Anomalies == 0
	}
}
