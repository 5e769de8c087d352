package admin

import (
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jobq/jobq"
)

// pageSize is the number of rows a list page shows.
const pageSize = 50

// overviewData is the overview page's data.
type overviewData struct {
	Queues  []jobq.QueueInfo
	Totals  jobq.QueueStats
	Updated time.Time
}

// overview shows every queue's counts and the last hour's chart.
func (d *dashboard) overview(w http.ResponseWriter, r *http.Request) {
	qs, at, err := d.counts.get(r.Context())
	if err != nil {
		d.failErr(w, r, "read queue counts", err)
		return
	}
	d.render(w, r, http.StatusOK, "overview", "Overview", "overview", overviewData{Queues: qs, Totals: jobq.Totals(statsOf(qs)), Updated: at})
}

// countsJSON is one queue's (or the totals') counts in overview.json.
type countsJSON struct {
	Queue     string `json:"queue"`
	Pending   int64  `json:"pending"`
	Scheduled int64  `json:"scheduled"`
	Reserved  int64  `json:"reserved"`
	Failed    int64  `json:"failed"`
	Paused    bool   `json:"paused"`
	// LagSeconds is how long the longest-due pending job has waited, -1
	// when no job is due.
	LagSeconds int64 `json:"lag_seconds"`
}

func countsOf(s jobq.QueueStats, paused bool, now time.Time) countsJSON {
	c := countsJSON{Queue: s.Queue, Pending: s.Pending, Scheduled: s.Scheduled, Reserved: s.Reserved, Failed: s.Failed, Paused: paused, LagSeconds: -1}
	if !s.OldestDue.IsZero() {
		c.LagSeconds = max(0, int64(now.Sub(s.OldestDue)/time.Second))
	}
	return c
}

// overviewJSON feeds the overview's live refresh: counts and the chart.
func (d *dashboard) overviewJSON(w http.ResponseWriter, r *http.Request) {
	qs, at, err := d.counts.get(r.Context())
	if err != nil {
		d.s.log.Error("admin: dashboard counts", "err", err)
		writeError(w, http.StatusInternalServerError, "internal", "read queue counts: the backend failed; see the server's log", "")
		return
	}
	now := time.Now()
	out := struct {
		Updated time.Time    `json:"updated"`
		Totals  countsJSON   `json:"totals"`
		Queues  []countsJSON `json:"queues"`
		History []minute     `json:"history"`
	}{Updated: at, Totals: countsOf(jobq.Totals(statsOf(qs)), false, now), Queues: make([]countsJSON, len(qs)), History: d.counts.history()}
	for k, q := range qs {
		out.Queues[k] = countsOf(q.QueueStats, q.Paused, now)
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, out)
}

// queues lists every queue with its settings and pause/resume buttons.
func (d *dashboard) queues(w http.ResponseWriter, r *http.Request) {
	qs, _, err := d.counts.get(r.Context())
	if err != nil {
		d.failErr(w, r, "read queues", err)
		return
	}
	d.render(w, r, http.StatusOK, "queues", "Queues", "queues", qs)
}

// listStates are the states a queue's job list offers, in tab order.
var listStates = []jobq.JobState{jobq.StatePending, jobq.StateScheduled, jobq.StateReserved, jobq.StateCompleted, jobq.StateCancelled}

// jobRow is one job as the lists and the detail page show it, whatever
// its state.
type jobRow struct {
	ID          int64
	Queue       string
	Type        string
	State       jobq.JobState
	Attempts    int
	MaxAttempts int
	Priority    int
	CreatedAt   time.Time
	AvailableAt time.Time
	ReservedAt  time.Time
	LeaseUntil  time.Time
	// Deadline is the latest time a waiting job may start (jobq.Deadline),
	// zero for none.
	Deadline   time.Time
	FinishedAt time.Time
	LastError  string
	UniqueKey  string
	Releases   int
	Payload    string
	// Result is a kept completed job's result (SetResult), masked and
	// indented as the payload; "" for none.
	Result string
	// Progress is what a running job's handler last reported
	// (SetProgress), its message masked like an error; nil for none.
	Progress *jobq.Progress
	Metadata []kv
	Live     bool // cancellable
	History  []attemptRow
	// WorkflowID and Task name a live task's job's workflow task, which
	// the job page links to (0 and "": none, or a finished job).
	WorkflowID int64
	Task       string
	// Key is the job's key, "" for none: the job page links to the key's
	// page, where its place among the key's jobs shows.
	Key string
}

// attemptRow is one failed attempt as the job pages show it, its error
// masked like the job's.
type attemptRow struct {
	Attempt  int
	At       time.Time
	Duration string // "-" when unknown
	Worker   string // "-" when unknown
	Error    string
}

// history is a job's failed attempts as rows, oldest first.
func (d *dashboard) history(errs []jobq.AttemptError) []attemptRow {
	rows := make([]attemptRow, len(errs))
	for i, e := range errs {
		r := attemptRow{Attempt: e.Attempt, At: e.At, Duration: "-", Worker: "-", Error: d.s.maskedText(e.Error)}
		if e.Duration > 0 {
			r.Duration = e.Duration.String()
			if e.Duration >= time.Millisecond {
				r.Duration = e.Duration.Round(time.Millisecond).String()
			}
		}
		if e.Worker != "" {
			r.Worker = e.Worker
		}
		rows[i] = r
	}
	return rows
}

// liveRow is a live job's row, its error's URL credentials masked.
func (d *dashboard) liveRow(j *jobq.JobRow, state jobq.JobState) jobRow {
	return jobRow{ID: j.ID, Queue: j.Queue, Type: j.Type, State: state, Attempts: j.Attempts, MaxAttempts: j.MaxAttempts,
		Priority: j.Priority, CreatedAt: j.CreatedAt, AvailableAt: j.AvailableAt, ReservedAt: j.ReservedAt,
		LeaseUntil: j.LeaseUntil, LastError: d.s.maskedText(j.LastError), UniqueKey: j.UniqueKey, Releases: j.Releases, Live: true,
		WorkflowID: j.WorkflowID, Task: j.Task, Key: j.Key, Progress: d.progress(j.Progress), Deadline: j.Deadline}
}

// progress is a running job's progress as the pages show it, its message
// masked; nil for none.
func (d *dashboard) progress(p *jobq.Progress) *jobq.Progress {
	if p == nil {
		return nil
	}
	return &jobq.Progress{Percent: p.Percent, Message: d.s.maskedText(p.Message), At: p.At}
}

// finishedRow is a kept finished job's row, its error's URL credentials
// masked.
func (d *dashboard) finishedRow(j *jobq.FinishedJob, state jobq.JobState) jobRow {
	return jobRow{ID: j.ID, Queue: j.Queue, Type: j.Type, State: state, Attempts: j.Attempts, MaxAttempts: j.MaxAttempts,
		Priority: j.Priority, CreatedAt: j.CreatedAt, FinishedAt: j.FinishedAt, LastError: d.s.maskedText(j.LastError), UniqueKey: j.UniqueKey, Key: j.Key}
}

// jobsData is the queue page's data.
type jobsData struct {
	Queue  string
	Info   jobq.QueueInfo
	State  jobq.JobState
	States []jobq.JobState
	Type   string
	Jobs   []jobRow
	Next   template.URL // query of the next page (url.Values encoded), empty on the last
	Error  string       // a listing the backend cannot do
}

// queueJobs lists one queue's jobs in one state, filtered by type, newest
// first, paged by the last ID shown.
func (d *dashboard) queueJobs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	data := jobsData{Queue: r.PathValue("queue"), State: jobq.StatePending, States: listStates, Type: strings.TrimSpace(q.Get("type"))}
	if v := q.Get("state"); v != "" {
		// An unknown state parses as "", which the switch below refuses
		// with the states this page offers, after the cursor's check.
		data.State, _ = jobq.ParseJobState(v)
	}
	before, ok := cursor(q.Get("before"))
	if !ok {
		d.fail(w, r, http.StatusBadRequest, "Bad input", "before: give the ID of the last job shown, a positive number.")
		return
	}
	if qs, _, err := d.counts.get(r.Context()); err == nil {
		for _, qi := range qs {
			if qi.Queue == data.Queue {
				data.Info = qi
			}
		}
	}
	f := jobq.JobFilter{Queue: data.Queue, Type: data.Type}
	var err error
	switch data.State {
	case jobq.StatePending, jobq.StateScheduled, jobq.StateReserved:
		var rows []*jobq.JobRow
		rows, err = d.s.opts.Inspector.JobsPage(r.Context(), data.State, f, pageSize, before)
		for _, j := range rows {
			data.Jobs = append(data.Jobs, d.liveRow(j, data.State))
		}
	case jobq.StateCompleted, jobq.StateCancelled:
		var rows []*jobq.FinishedJob
		rows, err = d.s.opts.Inspector.FinishedPage(r.Context(), data.State, f, pageSize, before)
		for _, j := range rows {
			data.Jobs = append(data.Jobs, d.finishedRow(j, data.State))
		}
	default:
		d.fail(w, r, http.StatusBadRequest, "Bad input", "state: one of pending, scheduled, reserved, completed, cancelled.")
		return
	}
	if errors.Is(err, jobq.ErrNotSupported) {
		data.Error = "This backend keeps no job listings."
		err = nil
	}
	if err != nil {
		d.failErr(w, r, "list jobs", err)
		return
	}
	if len(data.Jobs) == pageSize {
		data.Next = template.URL(url.Values{"state": {string(data.State)}, "type": {data.Type}, "before": {strconv.FormatInt(data.Jobs[len(data.Jobs)-1].ID, 10)}}.Encode())
	}
	d.render(w, r, http.StatusOK, "jobs", "Queue "+data.Queue, "queues", data)
}

// cursor reads a "before" parameter: empty is 0 (the first page).
func cursor(s string) (int64, bool) {
	if s == "" {
		return 0, true
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && n > 0
}

// pathID reads the {id} of the request's path, a job's ("job") or a failed
// job's ("failed job"); a bad one gets the 400 page and ok false.
func (d *dashboard) pathID(w http.ResponseWriter, r *http.Request, what string) (id int64, ok bool) {
	id, err := pathID(r)
	if err != nil {
		d.fail(w, r, http.StatusBadRequest, "Bad input", "A "+what+" ID is a positive number.")
		return 0, false
	}
	return id, true
}

// job shows one live or kept job (Inspector.Job).
func (d *dashboard) job(w http.ResponseWriter, r *http.Request) {
	id, ok := d.pathID(w, r, "job")
	if !ok {
		return
	}
	info, err := d.s.opts.Inspector.Job(r.Context(), id)
	if errors.Is(err, jobq.ErrNotFound) {
		d.fail(w, r, http.StatusNotFound, "Job not found",
			"Job "+strconv.FormatInt(id, 10)+" is not live, failed nor kept: it completed and was not kept, its failed job was purged, or it never was.")
		return
	}
	if err != nil {
		d.failErr(w, r, "read job "+strconv.FormatInt(id, 10), err)
		return
	}
	if info.Failed != nil {
		// Its page is the failed job's, under the same ID, with its
		// error and the replay and purge buttons.
		d.redirect(w, r, "/failed/"+strconv.FormatInt(id, 10), nil, "")
		return
	}
	var row jobRow
	var payload []byte
	var metadata map[string]string
	if j := info.Live; j != nil {
		row, payload, metadata = d.liveRow(j, info.State), j.Payload, j.Metadata
		row.History = d.history(j.Errors)
		// A job whose cancel was requested is ending: nothing to cancel.
		row.Live = info.State != jobq.StateCancelling
	} else {
		j := info.Finished
		row, payload, metadata = d.finishedRow(j, info.State), j.Payload, j.Metadata
		row.Result = d.pretty(j.Result)
	}
	row.Payload, row.Metadata = d.pretty(payload), d.metadata(metadata)
	d.render(w, r, http.StatusOK, "job", "Job "+strconv.FormatInt(id, 10), "queues", &row)
}

// failedData is the failed list's data.
type failedData struct {
	Queue, Type string
	Jobs        []*jobq.FailedJob
	Queues      []string
	// Matching is how many failed jobs match the filter, -1 when the
	// counts cannot tell (a type filter: the counts are per queue).
	Matching int64
	Next     template.URL // query of the next page (url.Values encoded)
}

// failedList lists failed jobs, newest first, filtered by queue and type.
func (d *dashboard) failedList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	data := failedData{Queue: strings.TrimSpace(q.Get("queue")), Type: strings.TrimSpace(q.Get("type")), Matching: -1}
	before, ok := cursor(q.Get("before"))
	if !ok {
		d.fail(w, r, http.StatusBadRequest, "Bad input", "before: give the position the Older link gives, a positive number.")
		return
	}
	qs, _, err := d.counts.get(r.Context())
	if err != nil {
		d.failErr(w, r, "read queue counts", err)
		return
	}
	if data.Type == "" {
		data.Matching = 0
	}
	for _, qi := range qs {
		if qi.Failed > 0 {
			data.Queues = append(data.Queues, qi.Queue)
		}
		if data.Type == "" && (data.Queue == "" || data.Queue == qi.Queue) {
			data.Matching += qi.Failed
		}
	}
	data.Jobs, err = d.s.opts.Inspector.FailedPage(r.Context(), jobq.FailedFilter{Queue: data.Queue, Type: data.Type}, pageSize, before)
	if err != nil {
		d.failErr(w, r, "list failed jobs", err)
		return
	}
	for _, f := range data.Jobs { // the page's own copies
		f.Error = d.s.maskedText(f.Error)
	}
	if len(data.Jobs) == pageSize {
		// The last row's own ID: the list's position, not a job ID.
		n := filterQuery(data.Queue, data.Type)
		n.Set("before", strconv.FormatInt(data.Jobs[len(data.Jobs)-1].ID, 10))
		data.Next = template.URL(n.Encode())
	}
	d.render(w, r, http.StatusOK, "failed", "Failed jobs", "failed", data)
}

// filterQuery is a failed-jobs filter as query parameters, empty ones left
// out.
func filterQuery(queue, typ string) url.Values {
	v := url.Values{}
	if queue != "" {
		v.Set("queue", queue)
	}
	if typ != "" {
		v.Set("type", typ)
	}
	return v
}

// failedJobData is a failed job's page data.
type failedJobData struct {
	*jobq.FailedJob
	Pretty   string
	Metadata []kv
	History  []attemptRow
}

// failedJob shows one failed job, named by its job ID, with its payload,
// error and metadata.
func (d *dashboard) failedJob(w http.ResponseWriter, r *http.Request) {
	id, ok := d.pathID(w, r, "failed job")
	if !ok {
		return
	}
	fj, err := d.s.opts.Inspector.Failed(r.Context(), id)
	if err != nil {
		d.failErr(w, r, "read failed job "+strconv.FormatInt(id, 10), err)
		return
	}
	fj.Error = d.s.maskedText(fj.Error) // the page's own copy
	data := failedJobData{FailedJob: fj, Pretty: d.pretty(fj.Payload), Metadata: d.metadata(fj.Metadata), History: d.history(fj.Errors)}
	d.render(w, r, http.StatusOK, "failed_job", "Failed job "+strconv.FormatInt(id, 10), "failed", data)
}

// schedules lists the periodic schedules with their next and last ticks.
func (d *dashboard) schedules(w http.ResponseWriter, r *http.Request) {
	rows, err := d.s.opts.Inspector.Schedules(r.Context())
	if err != nil && !errors.Is(err, jobq.ErrNotSupported) {
		d.failErr(w, r, "list schedules", err)
		return
	}
	d.render(w, r, http.StatusOK, "schedules", "Schedules", "schedules", rows)
}

// loginData is the login page's data.
type loginData struct {
	Next   string
	NoAuth bool
	Failed bool // the last token given was refused (auth.go's redirect)
}

// login shows the token form; POST /login (auth.go) checks it.
func (d *dashboard) login(w http.ResponseWriter, r *http.Request) {
	d.render(w, r, http.StatusOK, "login", "Sign in", "", loginData{
		Next: d.s.localNext(r.URL.Query().Get("next")), NoAuth: len(d.s.opts.Tokens) == 0, Failed: r.URL.Query().Has("failed"),
	})
}
