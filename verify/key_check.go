package verify

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// The anomalies of the keyed workload.
const (
	// AnomalyKeyOverLimit: an attempt of a key of a limited queue, its
	// outcome never refused, started while the queue's key limit of
	// other attempts of the key whose outcomes were applied ran.
	AnomalyKeyOverLimit = "KEY OVER LIMIT"
	// AnomalyKeyOverlap: an attempt of an ordered key, its outcome never
	// refused, started while another of the key whose outcome was
	// applied ran.
	AnomalyKeyOverlap = "KEY OVERLAP"
	// AnomalyKeyOrder: an ordered key's jobs did not run in insertion
	// (ID) order: a job started after a later one of its key had, or
	// completed before an earlier one's handler had returned.
	AnomalyKeyOrder = "KEY OUT OF ORDER"
	// AnomalyKeyHeld: a key is held after the drain though the job named
	// as its head is not among the failed jobs.
	AnomalyKeyHeld = "KEY HELD"
)

// keyID names one key: keys are per queue.
type keyID struct{ queue, key string }

func (k keyID) String() string { return fmt.Sprintf("key %s of queue %s", k.key, k.queue) }

// keyRun is what the history says of one key: its attempts with a start
// line whose outcome was not refused, sorted by start.
//
// As in the per-job overlap check, only an applied outcome proves that an
// attempt held its claim, and so its key's slot, all the while it ran:
// the fence applies a holder's write only while the job is still reserved
// under its token, from the claim on. An attempt refused had lost its
// claim (its lease ran out and the sweep gave the job, and the slot, to
// another holder), so another attempt of its key was free to start; one
// never written (its process killed, maybe just after a pause that cost
// it its lease) or whose fate is unknown proves nothing either way. So
// each attempt not refused is counted, when it starts, against the
// attempts of its key running then whose outcome was applied: more than
// the limit in all means the backend let one more start while the limit
// held their slots.
type keyRun struct {
	id       keyID
	attempts []*attempt
}

// counted reports whether attempt a counts against its key's rules when
// it starts: it has a start line and was not refused.
func (c *checker) counted(a *attempt) bool {
	switch c.outcome(a) {
	case outRefused, outAmbiguous:
		return false
	}
	return a.start != nil
}

// indexKeyReplay files the verifier's replay of a held key's head under
// its job, as a life boundary when it may have moved it, and counts it.
func (c *checker) indexKeyReplay(r *record) {
	j := c.job(r.job)
	j.replays = append(j.replays, r)
	switch r.val {
	case replayMoved, replayGone:
		c.rep.KeyReplayed++
	case replayError:
		c.rep.KeyReplayErrors++
	case replayPurged:
		c.rep.KeyReplaysPurged++
	}
	if mayMove(r) && j.replayAt == 0 {
		j.replayAt = r.mono
	}
}

// checkKeys runs the keyed workload's checks: each key's running attempts
// against its queue's rules, the order of each ordered key, and the held
// keys after the drain.
func (c *checker) checkKeys() {
	rules := c.fs.keys.rules
	runs := map[keyID]*keyRun{}
	for _, j := range c.jobs {
		for _, a := range j.attempts {
			if a.start == nil || a.start.get("key") == "" {
				continue
			}
			id := keyID{a.start.get("kq"), a.start.get("key")}
			k := runs[id]
			if k == nil {
				k = &keyRun{id: id}
				runs[id] = k
			}
			if c.counted(a) {
				k.attempts = append(k.attempts, a)
			}
		}
	}
	ids := make([]keyID, 0, len(runs))
	for id := range runs {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b keyID) int { return cmp.Or(cmp.Compare(a.queue, b.queue), cmp.Compare(a.key, b.key)) })
	c.rep.Keys = len(ids)
	if c.rep.KeyMostRunning == nil {
		c.rep.KeyMostRunning = map[int]int{}
	}
	for _, id := range ids {
		k, r := runs[id], rules[id.queue]
		sort.SliceStable(k.attempts, func(x, y int) bool { return k.attempts[x].start.mono < k.attempts[y].start.mono })
		switch {
		case r.Ordered:
			c.rep.OrderedKeys++
			c.rep.OrderedMostRunning = max(c.rep.OrderedMostRunning, c.checkKeyRunning(k, 1, AnomalyKeyOverlap))
			c.checkKeyOrder(k)
		case r.Limit > 0:
			c.rep.KeyMostRunning[r.Limit] = max(c.rep.KeyMostRunning[r.Limit], c.checkKeyRunning(k, r.Limit, AnomalyKeyOverLimit))
		}
	}
	c.checkHeld()
}

// checkKeyRunning sweeps key k's attempts (see keyRun), each running from
// its start line to its end (or its process's exit): when one starts, it
// and those running whose outcome was applied are never more than limit.
// It reports the first time they were, with those attempts, and returns
// the most there were.
func (c *checker) checkKeyRunning(k *keyRun, limit int, kind string) int {
	type edge struct {
		t     int64
		start bool
		a     *attempt
	}
	edges := make([]edge, 0, 2*len(k.attempts))
	for _, a := range k.attempts {
		edges = append(edges, edge{a.start.mono, true, a}, edge{a.endMono, false, a})
	}
	// On a tie an end goes first: the next attempt may start in the
	// nanosecond the previous one's handler returned.
	sort.SliceStable(edges, func(x, y int) bool {
		if edges[x].t != edges[y].t {
			return edges[x].t < edges[y].t
		}
		return !edges[x].start && edges[y].start
	})
	var running []*attempt
	most, reported := 0, false
	for _, e := range edges {
		if !e.start {
			running = slices.DeleteFunc(running, func(a *attempt) bool { return a == e.a })
			continue
		}
		held := []*attempt{}
		for _, a := range running {
			if c.outcome(a) == outApplied {
				held = append(held, a)
			}
		}
		held = append(held, e.a)
		running = append(running, e.a)
		most = max(most, len(held))
		if len(held) > limit && !reported {
			reported = true
			c.anomaly(kind, c.job(e.a.key.job), fmt.Sprintf("%s (limit %d): %d attempts ran at once, the last to start not refused and the others applied: %s",
				k.id, limit, len(held), describeAttempts(held)), held...)
		}
	}
	return most
}

// describeAttempts names attempts by job, attempt, token and process.
func describeAttempts(as []*attempt) string {
	parts := make([]string, len(as))
	for i, a := range as {
		parts[i] = fmt.Sprintf("job %d (att %d tok %d, %s)", a.key.job, a.key.att, a.key.tok, a.key.proc)
	}
	return strings.Join(parts, ", ")
}

// checkKeyOrder: an ordered key's attempts whose outcome was applied
// (those that provably held their claim while they ran, see keyRun)
// started in ID order (a job never starts once a later one of its key
// has: a head that retries or is replayed keeps its place), and its jobs
// completed in ID order (a job whose done was applied, by the time its
// hook heard of it, before an earlier job's handler had returned
// completed before it). Replays count as any attempt: the replayed head
// runs again before the rest.
func (c *checker) checkKeyOrder(k *keyRun) {
	var latest *attempt // the started attempt of the highest job ID so far
	for _, a := range k.attempts {
		if c.outcome(a) != outApplied {
			continue
		}
		if latest != nil && a.key.job < latest.key.job {
			c.anomaly(AnomalyKeyOrder, c.job(a.key.job), fmt.Sprintf("%s: job %d (place %s) started after job %d (place %s), enqueued after it, had started",
				k.id, a.key.job, a.start.get("kpos"), latest.key.job, latest.start.get("kpos")), latest, a)
			return
		}
		if latest == nil || a.key.job > latest.key.job {
			latest = a
		}
	}
	var done []*attempt
	for _, a := range k.attempts {
		if c.outcome(a) == outApplied && a.written.val == "done" {
			done = append(done, a)
		}
	}
	slices.SortStableFunc(done, func(x, y *attempt) int { return cmp.Compare(x.key.job, y.key.job) })
	c.rep.OrderedDone += len(done)
	var before *attempt // of the lower IDs, the one whose handler returned last
	for _, a := range done {
		if before != nil && before.key.job < a.key.job && a.written.mono < before.endMono {
			c.anomaly(AnomalyKeyOrder, c.job(a.key.job), fmt.Sprintf("%s: job %d (place %s) completed before job %d (place %s), enqueued before it, had returned",
				k.id, a.key.job, a.start.get("kpos"), before.key.job, before.start.get("kpos")), before, a)
			return
		}
		if before == nil || a.endMono > before.endMono {
			before = a
		}
	}
}

// checkHeld: after the drain, a key is held only by a failed head that
// the failed jobs list (the verifier leaves a key held when nothing waits
// behind its head).
func (c *checker) checkHeld() {
	failed := map[int64]bool{}
	for _, f := range c.fs.failed {
		failed[f.JobID] = true
	}
	for _, k := range c.fs.keys.held {
		if failed[k.HeadID] {
			c.rep.KeysHeld++
			continue
		}
		detail := fmt.Sprintf("key %s of queue %s is held by job %d, which is not among the failed jobs (%d pending behind it)", k.Key, k.Queue, k.HeadID, k.Pending)
		j := c.jobs[k.HeadID]
		if j == nil {
			j = &jobInfo{id: k.HeadID, seq: -1}
		}
		c.anomaly(AnomalyKeyHeld, j, detail, j.attempts...)
	}
}

// keyChecks are the keyed workload's rows of the verdict.
func (c *checker) keyChecks(n func(kinds ...string) int) []Check {
	r := c.rep
	return []Check{
		{Name: "never more than N of a key at once", Anomalies: n(AnomalyKeyOverLimit),
			Detail: fmt.Sprintf("%d keys ran jobs; most attempts of one key at once: %s", r.Keys, r.mostRunning())},
		{Name: "ordered keys in insertion order", Anomalies: n(AnomalyKeyOverlap, AnomalyKeyOrder),
			Detail: fmt.Sprintf("%d ordered keys, at most %d attempt of one at once, %d jobs done in ID order; %d held heads replayed", r.OrderedKeys, r.OrderedMostRunning, r.OrderedDone, r.KeyReplayed)},
		{Name: "no key held without its failed head", Anomalies: n(AnomalyKeyHeld),
			Detail: fmt.Sprintf("%d keys held after the drain, each by a failed head listed", r.KeysHeld)},
	}
}

// mostRunning lists the most attempts of one key at once, per limit.
func (r *Report) mostRunning() string {
	limits := make([]int, 0, len(r.KeyMostRunning))
	for l := range r.KeyMostRunning {
		limits = append(limits, l)
	}
	if len(limits) == 0 {
		return "no limited queue"
	}
	slices.Sort(limits)
	parts := make([]string, len(limits))
	for i, l := range limits {
		parts[i] = "limit " + strconv.Itoa(l) + ": " + strconv.Itoa(r.KeyMostRunning[l])
	}
	return strings.Join(parts, ", ")
}
