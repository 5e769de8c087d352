package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/jobview"
)

// enqueueRequest is one job to enqueue, as the API takes it.
type enqueueRequest struct {
	Type        string          `json:"type"`
	Payload     json.RawMessage `json:"payload"`
	Queue       string          `json:"queue"`
	Delay       string          `json:"delay"`  // a Go duration, "90s"
	RunAt       string          `json:"run_at"` // RFC 3339
	Priority    int             `json:"priority"`
	MaxAttempts int             `json:"max_attempts"`
	UniqueKey   string          `json:"unique_key"`
	// Unique computes the unique key from the job's parts (its type,
	// and the args, queue and due-time period it names), as jobq.Unique.
	Unique *jobq.UniqueBy `json:"unique"`
	// OnConflict is what a duplicate does: "skip" (the default),
	// "replace" or "debounce" (jobq.Replace, jobq.Debounce with Debounce
	// and DebounceMax, Go durations).
	OnConflict  string `json:"on_conflict"`
	Debounce    string `json:"debounce"`
	DebounceMax string `json:"debounce_max"`
	// KeepLast, with "replace", makes a duplicate of a running job its
	// follow-up (jobq.KeepLast).
	KeepLast bool              `json:"keep_last"`
	Metadata map[string]string `json:"metadata"`
	// Deadline is the latest time the job may start (jobq.Deadline): an
	// RFC 3339 time, or a Go duration from now ("10m").
	Deadline string `json:"deadline"`
	// Key names what the job acts on (an account, a tenant): the queue's
	// key rules apply to it (see PUT /api/v1/queues/{queue}/keys).
	Key string `json:"key"`
}

// maxBatch bounds one batch request; larger imports go in several.
const maxBatch = 1000

// idempotencyHeader maps to the job's unique key.
const idempotencyHeader = "Idempotency-Key"

// spec checks the request and turns it into a JobSpec; prefix names the
// job in a batch ("jobs[3].") and idem is the Idempotency-Key to use as
// its unique key. Everything the backend would refuse is refused here,
// with the field named, so nothing is written.
func (q *enqueueRequest) spec(prefix, idem string) (jobq.JobSpec, error) {
	if q.Type == "" {
		return jobq.JobSpec{}, badField(prefix+"type", "is required")
	}
	if q.Queue == "" {
		q.Queue = "default"
	}
	if len(q.Payload) == 0 {
		q.Payload = json.RawMessage("{}")
	}
	if q.MaxAttempts < 0 {
		return jobq.JobSpec{}, badField(prefix+"max_attempts", "%d is negative: use 1..%d, or leave it out for the default", q.MaxAttempts, backend.MaxMaxAttempts)
	}
	opts := []jobq.EnqueueOption{jobq.Queue(q.Queue), jobq.Priority(q.Priority)}
	p := backend.InsertParams{Queue: q.Queue, Type: q.Type, Payload: q.Payload, Priority: q.Priority, MaxAttempts: max(q.MaxAttempts, 1), Metadata: q.Metadata}
	if q.MaxAttempts > 0 {
		opts = append(opts, jobq.MaxAttempts(q.MaxAttempts))
	}
	if q.Delay != "" && q.RunAt != "" {
		return jobq.JobSpec{}, badField(prefix+"run_at", "give delay or run_at, not both")
	}
	if q.Delay != "" {
		d, err := time.ParseDuration(q.Delay)
		if err != nil || d < 0 {
			return jobq.JobSpec{}, badField(prefix+"delay", "%q: use a non-negative duration such as \"90s\" or \"1h30m\"", q.Delay)
		}
		p.Delay = d
		opts = append(opts, jobq.Delay(d))
	}
	if q.RunAt != "" {
		t, err := time.Parse(time.RFC3339Nano, q.RunAt)
		if err != nil {
			return jobq.JobSpec{}, badField(prefix+"run_at", "%q: use RFC 3339, such as \"2026-01-02T15:04:05Z\"", q.RunAt)
		}
		p.RunAt = t
		opts = append(opts, jobq.RunAt(t))
	}
	if idem != "" {
		if q.UniqueKey != "" && q.UniqueKey != idem {
			return jobq.JobSpec{}, badField(prefix+"unique_key", "differs from the %s header: send one or the other", idempotencyHeader)
		}
		q.UniqueKey = idem
	}
	if q.UniqueKey != "" {
		p.UniqueKey = q.UniqueKey
		opts = append(opts, jobq.UniqueKey(q.UniqueKey))
	}
	if q.Unique != nil {
		opts = append(opts, jobq.Unique(*q.Unique))
	}
	conflict, err := q.conflictOption(prefix)
	if err != nil {
		return jobq.JobSpec{}, err
	}
	if conflict != nil {
		opts = append(opts, conflict)
	}
	if len(q.Metadata) > 0 {
		opts = append(opts, jobq.Metadata(q.Metadata))
	}
	if q.Deadline != "" {
		t, err := time.Parse(time.RFC3339Nano, q.Deadline)
		if err != nil {
			d, derr := time.ParseDuration(q.Deadline)
			if derr != nil || d <= 0 {
				return jobq.JobSpec{}, badField(prefix+"deadline", "%q: use RFC 3339, such as \"2026-01-02T15:04:05Z\", or a positive duration from now, such as \"10m\"", q.Deadline)
			}
			t = time.Now().Add(d)
		}
		p.Deadline = t
		opts = append(opts, jobq.Deadline(t))
	}
	if q.Key != "" {
		p.Key = q.Key
		opts = append(opts, jobq.Key(q.Key))
	}
	if err := backend.ValidateInsert(p); err != nil {
		var ie *backend.InputError
		if errors.As(err, &ie) {
			return jobq.JobSpec{}, badField(prefix+jsonField(ie.Field), "%s", ie.Reason)
		}
		return jobq.JobSpec{}, err
	}
	return jobq.JobSpec{Type: q.Type, Payload: q.Payload, Options: opts}, nil
}

// conflictOption turns on_conflict and the debounce durations into the
// enqueue option they name (nil for skip); the client checks the rest
// (a unique key to conflict on, no delay with debounce).
func (q *enqueueRequest) conflictOption(prefix string) (jobq.EnqueueOption, error) {
	if q.OnConflict != "debounce" && (q.Debounce != "" || q.DebounceMax != "") {
		return nil, badField(prefix+"debounce", "is only for \"on_conflict\": \"debounce\"")
	}
	if q.KeepLast && q.OnConflict != "replace" {
		return nil, badField(prefix+"keep_last", "is only for \"on_conflict\": \"replace\"")
	}
	switch q.OnConflict {
	case "", "skip":
		return nil, nil
	case "replace":
		if q.KeepLast {
			return jobq.Replace(jobq.KeepLast()), nil
		}
		return jobq.Replace(), nil
	case "debounce":
		d, err := time.ParseDuration(q.Debounce)
		if err != nil || d <= 0 {
			return nil, badField(prefix+"debounce", "%q: use a positive duration such as \"30s\"", q.Debounce)
		}
		bound, err := time.ParseDuration(q.DebounceMax)
		if err != nil || bound < d {
			return nil, badField(prefix+"debounce_max", "%q: use a duration no shorter than debounce, such as \"5m\"", q.DebounceMax)
		}
		return jobq.Debounce(d, bound), nil
	}
	return nil, badField(prefix+"on_conflict", "%q: use skip, replace or debounce", q.OnConflict)
}

// jsonField spells a backend field name ("max attempts") as the API's JSON
// does ("max_attempts").
func jsonField(f string) string {
	b := []byte(f)
	for i, c := range b {
		if c == ' ' {
			b[i] = '_'
		}
	}
	return string(b)
}

// enqueued is the answer for one job.
type enqueued struct {
	ID        int64 `json:"id"`
	Duplicate bool  `json:"duplicate"`
	// Replaced: the duplicate's on_conflict changed the waiting job.
	Replaced bool `json:"replaced,omitempty"`
}

// enqueueOne enqueues one job: 201 with its ID, or 200 with the existing
// job's ID when its unique key (or Idempotency-Key) is held.
func (s *server) enqueueOne(w http.ResponseWriter, r *http.Request) {
	if s.opts.Client == nil {
		s.fail(w, r, fmt.Errorf("enqueue: %w: this server has no client", jobq.ErrNotSupported))
		return
	}
	var req enqueueRequest
	if err := decodeBody(r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	spec, err := req.spec("", r.Header.Get(idempotencyHeader))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	res, err := s.opts.Client.EnqueueMany(r.Context(), []jobq.JobSpec{spec})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	status := http.StatusCreated
	if res[0].Duplicate {
		status = http.StatusOK
	}
	writeJSON(w, status, enqueued{ID: res[0].ID, Duplicate: res[0].Duplicate, Replaced: res[0].Replaced})
}

// batchRequest is the body of a batch enqueue.
type batchRequest struct {
	Jobs []enqueueRequest `json:"jobs"`
}

// enqueueBatch enqueues all the jobs in one transaction or none: 201 when
// any was inserted, 200 when every one was a duplicate. With an
// Idempotency-Key, job i gets the unique key "<key>/<i>", so a retried
// batch is all duplicates.
func (s *server) enqueueBatch(w http.ResponseWriter, r *http.Request) {
	if s.opts.Client == nil {
		s.fail(w, r, fmt.Errorf("enqueue: %w: this server has no client", jobq.ErrNotSupported))
		return
	}
	var req batchRequest
	if err := decodeBody(r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if len(req.Jobs) == 0 || len(req.Jobs) > maxBatch {
		s.fail(w, r, badField("jobs", "%d jobs: send 1 to %d", len(req.Jobs), maxBatch))
		return
	}
	idem := r.Header.Get(idempotencyHeader)
	specs := make([]jobq.JobSpec, len(req.Jobs))
	for i := range req.Jobs {
		key := ""
		if idem != "" {
			key = idem + "/" + strconv.Itoa(i)
		}
		spec, err := req.Jobs[i].spec(fmt.Sprintf("jobs[%d].", i), key)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		specs[i] = spec
	}
	res, err := s.opts.Client.EnqueueMany(r.Context(), specs)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := struct {
		Jobs       []enqueued `json:"jobs"`
		Inserted   int        `json:"inserted"`
		Duplicates int        `json:"duplicates"`
	}{Jobs: make([]enqueued, len(res))}
	for i, e := range res {
		out.Jobs[i] = enqueued{ID: e.ID, Duplicate: e.Duplicate, Replaced: e.Replaced}
		if e.Duplicate {
			out.Duplicates++
		} else {
			out.Inserted++
		}
	}
	status := http.StatusCreated
	if out.Inserted == 0 {
		status = http.StatusOK
	}
	writeJSON(w, status, out)
}

// timePtr is nil for the zero time, so it is left out of the answer.
func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// listQuery is a parsed job list request.
type listQuery struct {
	state  jobq.JobState
	filter jobq.JobFilter
	limit  int
	cursor int64
}

// maxPage bounds a page.
const maxPage = 1000

// parseListQuery reads GET /api/v1/jobs's query: state (pending,
// scheduled, reserved, completed, cancelled; default pending), queue,
// type, key, since and until (RFC 3339), limit (1..1000) and cursor (the last
// ID of the previous page). Unknown parameters are refused.
func parseListQuery(q url.Values) (listQuery, error) {
	lq := listQuery{state: jobq.StatePending}
	if err := onlyParams(q, "state", "queue", "type", "key", "since", "until", "limit", "cursor"); err != nil {
		return lq, err
	}
	if v := q.Get("state"); v != "" {
		// The parser's own refusal lists every state, cancelling and
		// failed too, which this list does not take: name its own.
		st, err := jobq.ParseJobState(v)
		if err != nil || !slices.Contains(listStates, st) {
			return lq, badField("state", "%q: use pending, scheduled, reserved, completed or cancelled (failed jobs are at /api/v1/failed)", v)
		}
		lq.state = st
	}
	var err error
	if lq.filter.Queue, lq.filter.Type, err = queueType(q); err != nil {
		return lq, err
	}
	if lq.filter.Key, err = keyParam(q); err != nil {
		return lq, err
	}
	if lq.filter.Since, err = timeParam(q, "since"); err != nil {
		return lq, err
	}
	if lq.filter.Until, err = timeParam(q, "until"); err != nil {
		return lq, err
	}
	if err := backend.ValidateJobFilter(lq.filter); err != nil {
		return lq, badField("until", "must be after since")
	}
	lq.limit, lq.cursor, err = pageParams(q)
	return lq, err
}

// onlyParams refuses a query parameter not in allowed.
func onlyParams(q url.Values, allowed ...string) error {
	for k := range q {
		known := false
		for _, a := range allowed {
			known = known || k == a
		}
		if !known {
			return badField(k, "unknown query parameter")
		}
	}
	return nil
}

// queueType reads the queue and type filters.
func queueType(q url.Values) (queue, typ string, err error) {
	queue, typ = q.Get("queue"), q.Get("type")
	if queue != "" {
		if err := backend.ValidateQueue(queue); err != nil {
			return "", "", badField("queue", "not a queue name: use letters, digits, '_', '-', '.' or ':'")
		}
	}
	if len(typ) > backend.MaxTypeLen {
		return "", "", badField("type", "longer than %d bytes", backend.MaxTypeLen)
	}
	return queue, typ, nil
}

// keyParam reads the key filter: "" (any key or none) or a key as
// enqueued.
func keyParam(q url.Values) (string, error) {
	key := q.Get("key")
	if err := backend.ValidateKey(key); err != nil {
		return "", badField("key", "not a key: use at most %d bytes of UTF-8 without control characters", backend.MaxKeyLen)
	}
	return key, nil
}

// needKeys refuses a key filter on a backend that keeps no keys, with
// its ErrNotSupported. Such a backend ignores JobFilter.Key and
// FailedFilter.Key, so without this a purge "of key K" would purge every
// failed job of the queue. A backend with keys answers the probe from
// its own KeyList; no filter, no probe.
func (s *server) needKeys(ctx context.Context, key string) error {
	if key == "" {
		return nil
	}
	_, err := s.opts.Inspector.Keys(ctx, jobq.KeyListParams{Limit: 1})
	return err
}

// timeParam reads an RFC 3339 time parameter; zero when absent.
func timeParam(q url.Values, name string) (time.Time, error) {
	v := q.Get(name)
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, badField(name, "%q: use RFC 3339, such as 2026-01-02T15:04:05Z", v)
	}
	return t, nil
}

// pageParams reads limit (default 100, at most 1000) and cursor.
func pageParams(q url.Values) (limit int, cursor int64, err error) {
	limit = backend.DefaultListLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxPage {
			return 0, 0, badField("limit", "%q: use 1..%d", v, maxPage)
		}
		limit = n
	}
	if v := q.Get("cursor"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return 0, 0, badField("cursor", "%q: pass next_cursor from the previous page", v)
		}
		cursor = n
	}
	return limit, cursor, nil
}

// nextCursor is the cursor of the page after one of n items ending at
// last, 0 (left out) when the page was not full.
func nextCursor(n, limit int, last int64) int64 {
	if n < limit {
		return 0
	}
	return last
}

// listJobs lists jobs of one state, newest first, a page at a time.
func (s *server) listJobs(w http.ResponseWriter, r *http.Request) {
	lq, err := parseListQuery(r.URL.Query())
	if err == nil {
		err = s.needKeys(r.Context(), lq.filter.Key)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := struct {
		Jobs       []jobview.Job `json:"jobs"`
		NextCursor int64         `json:"next_cursor,omitempty"`
	}{Jobs: []jobview.Job{}}
	switch lq.state {
	case jobq.StateCompleted, jobq.StateCancelled:
		rows, err := s.opts.Inspector.FinishedPage(r.Context(), lq.state, lq.filter, lq.limit, lq.cursor)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		out.Jobs = jobview.FinishedList(s.mask, rows)
	default:
		rows, err := s.opts.Inspector.JobsPage(r.Context(), lq.state, lq.filter, lq.limit, lq.cursor)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		out.Jobs = jobview.LiveList(s.mask, lq.state, rows) // a cancelling job shows as such
	}
	if n := len(out.Jobs); n > 0 {
		out.NextCursor = nextCursor(n, lq.limit, out.Jobs[n-1].ID)
	}
	writeJSON(w, http.StatusOK, out)
}

// pathID reads the {id} path value.
func pathID(r *http.Request) (int64, error) {
	v := r.PathValue("id")
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil || id < 1 {
		return 0, badField("id", "%q: IDs are whole numbers from 1", v)
	}
	return id, nil
}

// getJob shows one job, live, failed or kept.
func (s *server) getJob(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	info, err := s.opts.Inspector.Job(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	switch {
	case info.Live != nil:
		writeJSON(w, http.StatusOK, jobview.Live(s.mask, info.State, info.Live))
	case info.Failed != nil:
		writeJSON(w, http.StatusOK, jobview.FailedAsJob(s.mask, info.Failed))
	default:
		writeJSON(w, http.StatusOK, jobview.Finished(s.mask, info.Finished))
	}
}

// cancelJob cancels one job; the outcome says what happened. An unknown
// job is 404.
func (s *server) cancelJob(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	res, err := s.opts.Inspector.Cancel(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if len(res) != 1 || res[0].Outcome == jobq.CancelNotFound {
		s.fail(w, r, fmt.Errorf("cancel job %d: %w", id, jobq.ErrNotFound))
		return
	}
	writeJSON(w, http.StatusOK, struct {
		ID      int64  `json:"id"`
		Outcome string `json:"outcome"`
		Changed bool   `json:"changed"`
	}{id, jsonField(res[0].Outcome.String()), res[0].Outcome.Changed()})
}
