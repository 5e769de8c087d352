package verify

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jobq/jobq/backend"
)

// The deadline workload's anomalies.
const (
	// AnomalyStartedAfterDeadline: a job was claimed after its deadline:
	// the store reserved it later than the deadline by its own clock, or
	// the claim call began later than the deadline (and the clock
	// tolerance) by the claiming worker's.
	AnomalyStartedAfterDeadline = "STARTED AFTER DEADLINE"
	// AnomalyExpiredButRan: a job that expired into the failed jobs was
	// claimed after it expired, was still held when it expired (an
	// outcome of an attempt applied afterwards), or was done.
	AnomalyExpiredButRan = "EXPIRED BUT RAN"
	// AnomalyExpiredEarly: a job expired into the failed jobs at or
	// before its deadline by the store's clock, without a deadline, or
	// with an error other than backend.DeadlineError of its deadline.
	AnomalyExpiredEarly = "EXPIRED EARLY"
)

// deadlineFinal is what the deadline workload's checks need beyond the
// history: the deadline each planned job was sent with (by seq), the jobs
// given up at enqueue, and the clock tolerance.
type deadlineFinal struct {
	planned   map[int64]plannedDeadline
	givenUp   int
	tolerance time.Duration
}

// expiredRow is the failed-jobs row in which job j expired (its error is
// a DeadlineError), nil when it did not.
func expiredRow(j *jobInfo) *backend.FailedJob {
	for _, f := range j.failed {
		if strings.HasPrefix(f.Error, backend.DeadlineErrorPrefix) {
			return f
		}
	}
	return nil
}

// nsField is the integer field key of r (Unix nanoseconds), 0 when r has
// none.
func nsField(r *record, key string) int64 {
	if r == nil {
		return 0
	}
	n, err := strconv.ParseInt(r.get(key), 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// stamp shows Unix nanoseconds ns as a UTC time to the microsecond.
func stamp(ns int64) string { return time.Unix(0, ns).UTC().Format("15:04:05.000000") }

// deadlineOf is job j's deadline in Unix nanoseconds: the one it was sent
// with when its seq is known, else the one its claims carried; false when
// it had none.
func (c *checker) deadlineOf(j *jobInfo) (int64, int, bool) {
	if pd, ok := c.fs.deadlines.planned[j.seq]; ok && j.seq >= 0 {
		return pd.at.UnixNano(), pd.class, true
	}
	for _, a := range j.attempts {
		if dl := nsField(a.claim, "dl"); dl != 0 {
			return dl, -1, true
		}
	}
	return 0, -1, false
}

// checkDeadlines: no job was claimed after its deadline, and every job
// that expired did so after its deadline, with its DeadlineError, and ran
// no attempt from then on.
//
// A claim is the store's act: it happens after the worker's call began
// (c0, read off the clock the store uses, which on this machine is the
// same clock) and at the time the store records as the row's reserved
// time (rat, its own clock, the one its deadline check reads). Either
// past the deadline is a claim after it; c0 allows the tolerance for a
// store's clock behind the worker's. The handler starts later still: a
// handler that starts after the deadline of a job claimed before it is
// what the contract allows (the deadline is about the claim), and is
// only counted.
//
// An attempt before the deadline does not forbid the expiry: a job
// whose attempt failed, or whose holder was killed or paused past its
// lease, is pending again and expires if its deadline passes before the
// next claim. What an expiry forbids is a claim after it and the job
// being held when it happened: an outcome applied later proves the
// holder still held it. The write came after its handler's end, which
// came at least the time between the claim line and the end line after
// c0.
func (c *checker) checkDeadlines() {
	tol := c.fs.deadlines.tolerance.Nanoseconds()
	r := c.rep
	r.DeadlineGivenUp = c.fs.deadlines.givenUp
	r.DeadlineClosest = -1
	for _, id := range slices.Sorted(maps.Keys(c.jobs)) {
		j := c.jobs[id]
		exp := expiredRow(j)
		dl, class, ok := c.deadlineOf(j)
		if !ok {
			if exp != nil {
				c.anomaly(AnomalyExpiredEarly, j, fmt.Sprintf("expired into failed jobs (%q) though it was sent without a deadline", exp.Error), j.attempts...)
			}
			continue
		}
		r.DeadlineJobs++
		if class >= 0 {
			r.DeadlineByClass[class]++
		}
		claims := c.checkDeadlineClaims(j, dl, tol)
		switch {
		case exp != nil:
			r.DeadlineExpired++
			if class >= 0 {
				r.DeadlineExpiredByClass[class]++
			}
			if claims == 0 {
				r.DeadlineExpiredUnclaimed++
			}
			c.checkExpiry(j, exp, dl, tol)
		case j.ended:
			r.DeadlineRan++
		}
	}
}

// checkDeadlineClaims checks each claim of j, whose deadline is dl,
// against it, counts them and returns how many there were.
func (c *checker) checkDeadlineClaims(j *jobInfo, dl, tol int64) int {
	r := c.rep
	claims := 0
	reported := false
	for _, a := range j.attempts {
		if a.claim == nil {
			continue
		}
		claims++
		r.DeadlineClaims++
		c0, rat := nsField(a.claim, "c0"), nsField(a.claim, "rat")
		var why string
		switch {
		case rat != 0 && rat > dl:
			why = fmt.Sprintf("the store reserved it (att %d tok %d, %s) at %s by its own clock, %s after its deadline %s",
				a.key.att, a.key.tok, a.key.proc, stamp(rat), time.Duration(rat-dl), stamp(dl))
		case c0 != 0 && c0 > dl+tol:
			why = fmt.Sprintf("the claim call that returned it (att %d tok %d, %s) began at %s by the worker's clock, %s after its deadline %s (tolerance %s)",
				a.key.att, a.key.tok, a.key.proc, stamp(c0), time.Duration(c0-dl), stamp(dl), time.Duration(tol))
		}
		if why != "" {
			if !reported {
				c.anomaly(AnomalyStartedAfterDeadline, j, why, a)
			}
			reported = true
			continue
		}
		if rat != 0 && (r.DeadlineClosest < 0 || time.Duration(dl-rat) < r.DeadlineClosest) {
			r.DeadlineClosest = time.Duration(dl - rat)
		}
		if a.start != nil && c0 != 0 && c0+(a.start.mono-a.claim.mono) > dl {
			r.DeadlineLateHandlers++
		}
	}
	return claims
}

// checkExpiry checks the expiry of j (its failed-jobs row exp), whose
// deadline is dl.
func (c *checker) checkExpiry(j *jobInfo, exp *backend.FailedJob, dl, tol int64) {
	if want := backend.DeadlineError(time.Unix(0, dl)); exp.Error != want {
		c.anomaly(AnomalyExpiredEarly, j, fmt.Sprintf("expired with the error %q; its deadline's is %q", exp.Error, want), j.attempts...)
	}
	at := exp.FailedAt.UnixNano()
	if !exp.FailedAt.IsZero() && at <= dl {
		c.anomaly(AnomalyExpiredEarly, j, fmt.Sprintf("moved to failed jobs at %s by the store's clock, not after its deadline %s", stamp(at), stamp(dl)), j.attempts...)
	}
	if exp.FailedAt.IsZero() {
		return // no time to check the claims against
	}
	for _, a := range j.attempts {
		if a.claim == nil {
			continue
		}
		c0, rat := nsField(a.claim, "c0"), nsField(a.claim, "rat")
		var why string
		switch {
		case rat != 0 && rat > at:
			why = fmt.Sprintf("claimed (att %d tok %d, %s) at %s by the store's clock, after it expired at %s", a.key.att, a.key.tok, a.key.proc, stamp(rat), stamp(at))
		case c0 != 0 && c0 > at+tol:
			why = fmt.Sprintf("claimed (att %d tok %d, %s) by a call that began at %s by the worker's clock, after it expired at %s (tolerance %s)", a.key.att, a.key.tok, a.key.proc, stamp(c0), stamp(at), time.Duration(tol))
		case c0 != 0 && c.outcome(a) == outApplied && a.end != nil && c0+(a.end.mono-a.claim.mono) > at+tol:
			why = fmt.Sprintf("still held when it expired at %s: the outcome (%s) of att %d tok %d (%s) was applied after its handler ended, no earlier than %s by the worker's clock (tolerance %s)",
				stamp(at), a.written.val, a.key.att, a.key.tok, a.key.proc, stamp(c0+(a.end.mono-a.claim.mono)), time.Duration(tol))
		}
		if why != "" {
			c.anomaly(AnomalyExpiredButRan, j, why, a)
			return
		}
	}
}

// deadlineChecks are the deadline workload's rows of the verdict.
func (c *checker) deadlineChecks(n func(kinds ...string) int) []Check {
	r := c.rep
	closest := "no claim"
	if r.DeadlineClosest >= 0 {
		closest = r.DeadlineClosest.Round(time.Microsecond).String()
	}
	return []Check{
		{Name: "no claim after the deadline", Anomalies: n(AnomalyStartedAfterDeadline),
			Detail: fmt.Sprintf("%d claims of jobs with a deadline, the closest %s before it (store's clock); %d handlers started after it, claimed before", r.DeadlineClaims, closest, r.DeadlineLateHandlers)},
		{Name: "expired jobs never ran after", Anomalies: n(AnomalyExpiredButRan, AnomalyExpiredEarly),
			Detail: fmt.Sprintf("%d expired, %d of them never claimed: each after its deadline, with its error, none claimed, held or done once expired", r.DeadlineExpired, r.DeadlineExpiredUnclaimed)},
	}
}

// deadlineRow is the deadline workload's line of the report's counts.
func (r *Report) deadlineRow() string {
	var classes []string
	for i, name := range deadlineClassNames {
		pct := 0.0
		if r.DeadlineByClass[i] > 0 {
			pct = 100 * float64(r.DeadlineExpiredByClass[i]) / float64(r.DeadlineByClass[i])
		}
		classes = append(classes, fmt.Sprintf("%s %d of %d (%.0f %%)", name, r.DeadlineExpiredByClass[i], r.DeadlineByClass[i], math.Round(pct)))
	}
	return fmt.Sprintf("%d jobs with a deadline: %d ran, %d expired (%d never claimed); expired by class: %s; %d given up at enqueue (deadline passed before a send)",
		r.DeadlineJobs, r.DeadlineRan, r.DeadlineExpired, r.DeadlineExpiredUnclaimed, strings.Join(classes, ", "), r.DeadlineGivenUp)
}
