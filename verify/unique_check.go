package verify

import (
	"cmp"
	"fmt"
	"slices"
)

// AnomalyUniqueTwoLive: two jobs of one identity of the unique workload
// were provably live at the same moment.
const AnomalyUniqueTwoLive = "UNIQUE TWO LIVE"

// uniqueFinal is what the unique workload's checks need beyond the
// history: how many identities there are, when each job was acknowledged,
// and how many requests were answered as duplicates.
type uniqueFinal struct {
	identity func(seq int64) int64
	ackMono  map[int64]int64
	dups     int
}

// liveSpan is a stretch of time over which one job was provably live.
type liveSpan struct {
	j      *jobInfo
	lo, hi int64
}

// liveSpan returns when job j was provably live, or false when the
// history proves no stretch of it.
//
// An attempt whose outcome was applied held its claim from its claim to
// the write that ended it, after its handler returned, so the job was
// live (reserved) from the attempt's claim to its end, whatever the
// outcome: done and failed end the job only when written, and a retry
// or release leaves it live. The job was live too from its first
// acknowledgement to any such end that came later: it had been inserted
// before the acknowledgement and had not ended yet. Attempts refused,
// never written or of unknown fate prove nothing (a stale holder's
// handler may run on after its job ended).
func (c *checker) liveSpan(j *jobInfo, ackMono int64) (liveSpan, bool) {
	s := liveSpan{j: j, lo: -1, hi: -1}
	for _, a := range j.attempts {
		if c.outcome(a) != outApplied || a.end == nil {
			continue
		}
		if at := a.at(); s.lo < 0 || at < s.lo {
			s.lo = at
		}
		s.hi = max(s.hi, a.end.mono)
	}
	if s.hi < 0 {
		return s, false
	}
	if ackMono > 0 && ackMono <= s.hi {
		s.lo = min(s.lo, ackMono)
	}
	return s, true
}

// checkUnique: no two jobs of one identity were ever provably live at
// once. A job's identity is that of the seq that made it (its payload's); a store that let a second job of an identity
// in while the first lived would show two overlapping live spans.
func (c *checker) checkUnique() {
	u := c.fs.unique
	byIdentity := map[int64][]liveSpan{}
	for _, j := range c.jobs {
		if j.seq < 0 {
			continue
		}
		s, ok := c.liveSpan(j, u.ackMono[j.id])
		if !ok {
			continue
		}
		byIdentity[u.identity(j.seq)] = append(byIdentity[u.identity(j.seq)], s)
	}
	idents := make([]int64, 0, len(byIdentity))
	for id := range byIdentity {
		idents = append(idents, id)
	}
	slices.Sort(idents)
	c.rep.UniqueIdentities, c.rep.UniqueDuplicates = len(idents), u.dups
	for _, ident := range idents {
		spans := byIdentity[ident]
		if len(spans) > 1 {
			c.rep.UniqueRemade++
		}
		slices.SortFunc(spans, func(a, b liveSpan) int { return cmp.Or(cmp.Compare(a.lo, b.lo), cmp.Compare(a.j.id, b.j.id)) })
		last := spans[0] // of the spans so far, the one that lasted longest
		for _, cur := range spans[1:] {
			if cur.lo > last.hi {
				if cur.hi > last.hi {
					last = cur
				}
				continue
			}
			c.anomaly(AnomalyUniqueTwoLive, cur.j, fmt.Sprintf("identity %d: job %d was live from %d while job %d of the same identity was live until %d",
				ident, cur.j.id, cur.lo, last.j.id, last.hi), append(slices.Clone(last.j.attempts), cur.j.attempts...)...)
			break
		}
	}
}

// uniqueCheck is the unique workload's row of the verdict.
func (c *checker) uniqueCheck(n func(kinds ...string) int) Check {
	r := c.rep
	return Check{Name: "one live job per identity", Anomalies: n(AnomalyUniqueTwoLive),
		Detail: fmt.Sprintf("%d identities ran; %d requests answered as duplicates; %d identities had a new job after the last one ended", r.UniqueIdentities, r.UniqueDuplicates, r.UniqueRemade)}
}
