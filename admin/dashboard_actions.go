package admin

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/jobq/jobq"
)

// The dashboard's state changes: form POSTs (wrapped by dashboard.post)
// that redirect (303) to a page saying what was done.

// bulkForm reads the failed list's form: the filter, and either the
// ticked IDs or all=1 for every job matching the filter.
func bulkForm(r *http.Request) (f jobq.FailedFilter, all bool, ids []int64, err error) {
	f = jobq.FailedFilter{Queue: strings.TrimSpace(r.PostForm.Get("queue")), Type: strings.TrimSpace(r.PostForm.Get("type"))}
	all = r.PostForm.Get("all") == "1"
	if all {
		return f, true, nil, nil
	}
	for _, s := range r.PostForm["id"] {
		id, perr := strconv.ParseInt(s, 10, 64)
		if perr != nil || id < 1 {
			return f, false, nil, fmt.Errorf("id %q is not a job ID", s)
		}
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		return f, false, nil, fmt.Errorf("tick at least one job, or \"all matching\"")
	}
	return f, false, ids, nil
}

// bulkReplay replays the ticked failed jobs or all matching the filter.
func (d *dashboard) bulkReplay(w http.ResponseWriter, r *http.Request) {
	f, all, ids, err := bulkForm(r)
	back := filterQuery(f.Queue, f.Type)
	if err != nil {
		d.redirect(w, r, "/failed", back, "Nothing replayed: "+err.Error()+".")
		return
	}
	var replayed, skipped int
	if all {
		replayed, skipped, err = d.s.opts.Inspector.ReplayAll(r.Context(), f)
	} else {
		replayed, skipped, err = d.s.opts.Inspector.Replay(r.Context(), ids...)
	}
	d.counts.invalidate()
	if err != nil && replayed == 0 {
		d.failErr(w, r, "replay failed jobs", err)
		return
	}
	msg := replayedMsg(replayed, skipped)
	if err != nil {
		d.s.log.Error("admin: dashboard replay stopped part-way", "err", err)
		msg += " Then the backend failed; see the server's log and try again for the rest."
	}
	d.redirect(w, r, "/failed", back, msg)
}

// bulkPurge deletes the ticked failed jobs or all matching the filter;
// "all matching" with no filter is every failed job, which the form's
// all=1 says explicitly.
func (d *dashboard) bulkPurge(w http.ResponseWriter, r *http.Request) {
	f, all, ids, err := bulkForm(r)
	back := filterQuery(f.Queue, f.Type)
	if err != nil {
		d.redirect(w, r, "/failed", back, "Nothing purged: "+err.Error()+".")
		return
	}
	var n int
	switch {
	case !all:
		n, err = d.s.opts.Inspector.PurgeIDs(r.Context(), ids...)
	case f == (jobq.FailedFilter{}):
		n, err = d.s.opts.Inspector.PurgeAll(r.Context())
	default:
		n, err = d.s.opts.Inspector.PurgeMatching(r.Context(), f, 0)
	}
	d.counts.invalidate()
	if err != nil {
		d.failErr(w, r, "purge failed jobs", err)
		return
	}
	d.redirect(w, r, "/failed", back, fmt.Sprintf("Purged %s.", plural(n, "failed job")))
}

// replayOne replays one failed job and shows it live again, under the
// same ID, or returns to the keys page whose button was pressed.
func (d *dashboard) replayOne(w http.ResponseWriter, r *http.Request) {
	id, ok := d.pathID(w, r, "failed job")
	if !ok {
		return
	}
	replayed, skipped, err := d.s.opts.Inspector.Replay(r.Context(), id)
	d.counts.invalidate()
	if err != nil {
		d.failErr(w, r, "replay failed job "+strconv.FormatInt(id, 10), err)
		return
	}
	if replayed == 0 {
		if !d.backTo(w, r, replayedMsg(replayed, skipped)) {
			d.redirect(w, r, "/failed/"+strconv.FormatInt(id, 10), nil, replayedMsg(replayed, skipped))
		}
		return
	}
	// From a keys page, back to it: the operator sees the key go on.
	if !d.backTo(w, r, "Replayed job "+strconv.FormatInt(id, 10)+": it is pending again.") {
		d.redirect(w, r, "/jobs/"+strconv.FormatInt(id, 10), nil, "Replayed: the job is pending again.")
	}
}

// purgeOne deletes one failed job (a keys page's Discard: a held key
// goes on with its next job).
func (d *dashboard) purgeOne(w http.ResponseWriter, r *http.Request) {
	id, ok := d.pathID(w, r, "failed job")
	if !ok {
		return
	}
	n, err := d.s.opts.Inspector.PurgeIDs(r.Context(), id)
	d.counts.invalidate()
	if err != nil {
		d.failErr(w, r, "purge failed job "+strconv.FormatInt(id, 10), err)
		return
	}
	if !d.backTo(w, r, fmt.Sprintf("Purged %s.", plural(n, "failed job"))) {
		d.redirect(w, r, "/failed", nil, fmt.Sprintf("Purged %s.", plural(n, "failed job")))
	}
}

// pause and resume set a queue's paused flag.
func (d *dashboard) pause(w http.ResponseWriter, r *http.Request)  { d.setPaused(w, r, true) }
func (d *dashboard) resume(w http.ResponseWriter, r *http.Request) { d.setPaused(w, r, false) }

func (d *dashboard) setPaused(w http.ResponseWriter, r *http.Request, paused bool) {
	q := r.PathValue("queue")
	var err error
	verb := "Paused"
	if paused {
		err = d.s.opts.Inspector.PauseQueue(r.Context(), q)
	} else {
		verb = "Resumed"
		err = d.s.opts.Inspector.ResumeQueue(r.Context(), q)
	}
	d.counts.invalidate()
	if err != nil {
		d.failErr(w, r, strings.ToLower(verb[:len(verb)-1])+" queue "+q, err)
		return
	}
	d.redirect(w, r, "/queues", nil, verb+" queue "+q+".")
}

// cancel cancels one live job.
func (d *dashboard) cancel(w http.ResponseWriter, r *http.Request) {
	id, ok := d.pathID(w, r, "job")
	if !ok {
		return
	}
	res, err := d.s.opts.Inspector.Cancel(r.Context(), id)
	d.counts.invalidate()
	if err != nil {
		d.failErr(w, r, "cancel job "+strconv.FormatInt(id, 10), err)
		return
	}
	msg := "Nothing changed."
	if len(res) == 1 {
		msg = "Cancel: " + res[0].Outcome.String() + "."
	}
	d.redirect(w, r, "/jobs/"+strconv.FormatInt(id, 10), nil, msg)
}

// replayedMsg says what a replay did.
func replayedMsg(replayed, skipped int) string {
	msg := fmt.Sprintf("Replayed %s.", plural(replayed, "job"))
	if skipped > 0 {
		msg += fmt.Sprintf(" Skipped %s: a live job holds its unique key.", plural(skipped, "job"))
	}
	return msg
}

// plural is "1 job", "2 jobs".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmtNum(int64(n)) + " " + noun + "s"
}
