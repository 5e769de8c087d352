package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
)

// registerKeys registers the keys pages. Their Replay and Discard buttons
// post to the failed job's own actions (/failed/{id}/replay and /purge),
// with a back field that returns the browser to the page it came from.
func (d *dashboard) registerKeys() {
	d.s.handle("GET /keys", ScopeRead, d.keys)
	d.s.handle("GET /queues/{queue}/keys/{key}", ScopeRead, d.key)
}

// keysData is the keys page's data.
type keysData struct {
	Queue    string
	HeldOnly bool
	// Held are the keys a failed head holds, shown first: they wait for
	// an operator. Busiest are the keys with the most pending and running
	// jobs (held ones among them), left out with HeldOnly.
	Held    []jobq.KeyInfo
	Busiest []jobq.KeyInfo
	// Reasons are the held keys' heads' errors, masked, by head ID: why
	// each key waits, which decides between a replay and a discard.
	Reasons map[int64]string
	Back    string // the page's own path and query, for the buttons' back field
}

// keysPage bounds each of the keys page's lists.
const keysPage = 100

// keys lists held keys with their failed heads, then the busiest keys,
// optionally of one queue.
func (d *dashboard) keys(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	data := keysData{Queue: strings.TrimSpace(q.Get("queue")), HeldOnly: q.Get("held") == "1"}
	if data.Queue != "" && backend.ValidateQueue(data.Queue) != nil {
		d.fail(w, r, http.StatusBadRequest, "Bad input", "queue: not a queue name; use letters, digits, '_', '-', '.' or ':'.")
		return
	}
	var err error
	data.Held, err = d.s.opts.Inspector.Keys(r.Context(), jobq.KeyListParams{Queue: data.Queue, Held: true, Limit: keysPage})
	if err == nil {
		data.Reasons, err = d.headReasons(r.Context(), data.Held)
	}
	if err == nil && !data.HeldOnly {
		data.Busiest, err = d.s.opts.Inspector.Keys(r.Context(), jobq.KeyListParams{Queue: data.Queue, Limit: keysPage})
	}
	if err != nil {
		d.failErr(w, r, "list keys", err)
		return
	}
	data.Back = "/keys"
	back := url.Values{}
	if data.Queue != "" {
		back.Set("queue", data.Queue)
	}
	if data.HeldOnly {
		back.Set("held", "1")
	}
	if len(back) > 0 {
		data.Back += "?" + back.Encode()
	}
	d.render(w, r, http.StatusOK, "keys", "Keys", "keys", data)
}

// headReasons reads the error of each held key's failed head, masked, by
// head ID. Held keys are few (the page shows at most keysPage), so each
// head is read on its own. A head replayed or discarded since the list
// was read has no reason: its key is no longer held.
func (d *dashboard) headReasons(ctx context.Context, held []jobq.KeyInfo) (map[int64]string, error) {
	reasons := make(map[int64]string, len(held))
	for _, k := range held {
		f, err := d.s.opts.Inspector.Failed(ctx, k.HeadID)
		if errors.Is(err, jobq.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read the head %d of key %s: %w", k.HeadID, k.Key, err)
		}
		reasons[k.HeadID] = d.s.maskedText(f.Error)
	}
	return reasons, nil
}

// keyData is a key's page data.
type keyData struct {
	Queue, Key string
	Rules      jobq.KeyRules
	// Head is the key as KeyList sees it: Held, HeadID and HeldSince.
	Head      jobq.KeyInfo
	Jobs      []keyJobView
	Truncated bool
	Back      string
}

// key shows one key of one queue: its jobs in ID order, the order an
// ordered key runs them in, and the failed head that holds it, with the
// buttons that replay or discard it.
func (d *dashboard) key(w http.ResponseWriter, r *http.Request) {
	queue, key, err := pathKey(r)
	if err != nil {
		d.fail(w, r, http.StatusBadRequest, "Bad input", "A key page names a queue and a key as enqueued (with '/' escaped as %2F).")
		return
	}
	data := keyData{Queue: queue, Key: key, Back: "/queues/" + url.PathEscape(queue) + "/keys/" + url.PathEscape(key)}
	if data.Head, err = d.s.keyHead(r.Context(), queue, key); err == nil {
		data.Jobs, data.Truncated, err = d.s.keyJobs(r.Context(), queue, key)
	}
	if err != nil {
		d.failErr(w, r, "show key "+key, err)
		return
	}
	if qs, _, err := d.counts.get(r.Context()); err == nil {
		for _, qi := range qs {
			if qi.Queue == queue {
				data.Rules = qi.Keys
			}
		}
	}
	d.render(w, r, http.StatusOK, "key", "Key "+key, "keys", data)
}

// keysBack reads a form's back field: a keys page to return to after a
// replay or a discard, or ok false for anything else, so that a forged
// form cannot send the browser off the dashboard (or anywhere but a keys
// page). It returns the escaped path and the query.
func keysBack(v string) (path string, q url.Values, ok bool) {
	if v == "" || strings.HasPrefix(v, "//") || strings.ContainsAny(v, "\\\r\n\t") {
		return "", nil, false
	}
	u, err := url.Parse(v)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" || u.Fragment != "" {
		return "", nil, false
	}
	path = u.EscapedPath()
	segs := strings.Split(path, "/")
	// "/keys", or "/queues/{queue}/keys/{key}" (a key's '/' is escaped).
	if path != "/keys" && (len(segs) != 5 || segs[1] != "queues" || segs[3] != "keys" || segs[2] == "" || segs[4] == "") {
		return "", nil, false
	}
	return path, u.Query(), true
}

// backTo redirects to the form's back page with flash when the form
// names one, and reports whether it did.
func (d *dashboard) backTo(w http.ResponseWriter, r *http.Request, flash string) bool {
	path, q, ok := keysBack(r.PostForm.Get("back"))
	if !ok {
		return false
	}
	d.redirect(w, r, path, q, flash)
	return true
}

// keyRulesText shows a queue's key rules in a few words, as 'jobq queue
// list' does; "" for none.
func keyRulesText(r jobq.KeyRules) string {
	switch {
	case r.Ordered:
		return "ordered, on failure " + string(r.Policy())
	case r.Limit > 0:
		return strconv.Itoa(r.Limit) + " per key"
	}
	return ""
}
