package admin

import (
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/jobview"
)

// failedFilter is the filter of failed jobs, in a query or a bulk body.
type failedFilter struct {
	Queue        string `json:"queue"`
	Type         string `json:"type"`
	FailedBefore string `json:"failed_before"` // RFC 3339
	OlderThan    string `json:"older_than"`    // a Go duration, "24h"
	// Key narrows to one key's failed jobs: replaying a held key's by
	// filter puts them back in their order (see backend.FailedFilter).
	Key string `json:"key"`
}

// filter checks f and converts it.
func (f failedFilter) filter() (jobq.FailedFilter, error) {
	q := url.Values{}
	for k, v := range map[string]string{"queue": f.Queue, "type": f.Type, "failed_before": f.FailedBefore, "older_than": f.OlderThan, "key": f.Key} {
		if v != "" {
			q.Set(k, v)
		}
	}
	return parseFailedFilter(q)
}

// parseFailedFilter reads queue, type, key, failed_before (RFC 3339)
// and older_than (a duration) from q.
func parseFailedFilter(q url.Values) (jobq.FailedFilter, error) {
	var f jobq.FailedFilter
	var err error
	if f.Queue, f.Type, err = queueType(q); err != nil {
		return f, err
	}
	if f.Key, err = keyParam(q); err != nil {
		return f, err
	}
	if f.FailedBefore, err = timeParam(q, "failed_before"); err != nil {
		return f, err
	}
	if v := q.Get("older_than"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return f, badField("older_than", "%q: use a positive duration such as \"24h\"", v)
		}
		f.OlderThan = d
	}
	return f, nil
}

// parseFailedQuery reads GET /api/v1/failed's query: the filter, limit and
// cursor.
func parseFailedQuery(q url.Values) (f jobq.FailedFilter, limit int, cursor int64, err error) {
	if err = onlyParams(q, "queue", "type", "key", "failed_before", "older_than", "limit", "cursor"); err != nil {
		return f, 0, 0, err
	}
	if f, err = parseFailedFilter(q); err != nil {
		return f, 0, 0, err
	}
	limit, cursor, err = pageParams(q)
	return f, limit, cursor, err
}

// listFailed lists failed jobs, the last to fail first, a page at a time.
// Each shows its job's ID; next_cursor is the last row's own ID, a
// position in the list that only the next page's cursor takes.
func (s *server) listFailed(w http.ResponseWriter, r *http.Request) {
	f, limit, cursor, err := parseFailedQuery(r.URL.Query())
	if err == nil {
		err = s.needKeys(r.Context(), f.Key)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	rows, err := s.opts.Inspector.FailedPage(r.Context(), f, limit, cursor)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := struct {
		Failed     []jobview.Failed `json:"failed"`
		NextCursor int64            `json:"next_cursor,omitempty"`
	}{Failed: jobview.FailedList(s.mask, rows)}
	if n := len(rows); n > 0 {
		out.NextCursor = nextCursor(n, limit, rows[n-1].ID)
	}
	writeJSON(w, http.StatusOK, out)
}

// getFailed shows one failed job, named by its job ID.
func (s *server) getFailed(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	f, err := s.opts.Inspector.Failed(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, jobview.FailedJob(s.mask, f))
}

// replayResult is the answer of a replay.
type replayResult struct {
	Replayed int `json:"replayed"`
	Skipped  int `json:"skipped"`
}

// replayOne replays one failed job, named by its job ID.
func (s *server) replayOne(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	n, skipped, err := s.opts.Inspector.Replay(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, replayResult{n, skipped})
}

// purgeOne deletes one failed job, named by its job ID; an unknown one
// is 404.
func (s *server) purgeOne(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	n, err := s.opts.Inspector.PurgeIDs(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if n == 0 {
		s.fail(w, r, fmt.Errorf("purge failed job %d: %w", id, jobq.ErrNotFound))
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Purged int `json:"purged"`
	}{n})
}

// bulkRequest selects failed jobs for a replay or purge: those of the
// listed job IDs, or with all set every job matching the filter (not just
// a page). "all" must be said, so an empty body never touches every
// failed job.
type bulkRequest struct {
	IDs []int64 `json:"ids"`
	All bool    `json:"all"`
	failedFilter
	// KeepNewest (purge with all only) keeps the newest this many
	// matching jobs.
	KeepNewest int `json:"keep_newest"`
}

// selection checks the request: IDs or all, not both, not neither.
func (b *bulkRequest) selection() (jobq.FailedFilter, error) {
	hasFilter := b.failedFilter != (failedFilter{})
	switch {
	case len(b.IDs) > 0 && (b.All || hasFilter || b.KeepNewest != 0):
		return jobq.FailedFilter{}, badField("ids", "give ids, or all with a filter, not both")
	case len(b.IDs) == 0 && !b.All:
		return jobq.FailedFilter{}, badField("all", "name the failed jobs in ids, or set all to true (with queue, type, key, failed_before or older_than to narrow it)")
	case len(b.IDs) > maxPage:
		return jobq.FailedFilter{}, badField("ids", "%d IDs: send at most %d, or use all with a filter", len(b.IDs), maxPage)
	case b.KeepNewest < 0:
		return jobq.FailedFilter{}, badField("keep_newest", "%d is negative", b.KeepNewest)
	}
	for _, id := range b.IDs {
		if id < 1 {
			return jobq.FailedFilter{}, badField("ids", "%d: IDs start at 1", id)
		}
	}
	return b.filter()
}

// replayMany replays the listed failed jobs (all or none: an unknown ID
// is 404 and nothing moves) or every one matching a filter.
func (s *server) replayMany(w http.ResponseWriter, r *http.Request) {
	var req bulkRequest
	if err := decodeBody(r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	f, err := req.selection()
	if err == nil && req.KeepNewest != 0 {
		err = badField("keep_newest", "applies to purge only")
	}
	if err == nil {
		err = s.needKeys(r.Context(), f.Key)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var n, skipped int
	if len(req.IDs) > 0 {
		n, skipped, err = s.opts.Inspector.Replay(r.Context(), req.IDs...)
	} else {
		n, skipped, err = s.opts.Inspector.ReplayAll(r.Context(), f)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, replayResult{n, skipped})
}

// purgeMany deletes the listed failed jobs or every one matching a filter
// (keeping the newest keep_newest of them when set). selection has already
// refused a body naming neither ids nor all, so {"all":true} with no filter
// is the only way here to empty the table, and it is said.
func (s *server) purgeMany(w http.ResponseWriter, r *http.Request) {
	var req bulkRequest
	if err := decodeBody(r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	f, err := req.selection()
	if err == nil {
		err = s.needKeys(r.Context(), f.Key)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var n int
	switch {
	case len(req.IDs) > 0:
		n, err = s.opts.Inspector.PurgeIDs(r.Context(), req.IDs...)
	case req.KeepNewest > 0:
		n, err = s.opts.Inspector.PurgeKeepNewest(r.Context(), f, req.KeepNewest)
	case req.failedFilter == (failedFilter{}):
		n, err = s.opts.Inspector.PurgeAll(r.Context())
	default:
		n, err = s.opts.Inspector.PurgeMatching(r.Context(), f, 0)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Purged int `json:"purged"`
	}{n})
}
