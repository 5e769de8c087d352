package admin

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
)

// keyView is one key of one queue as GET /api/v1/keys lists it: the
// names 'jobq keys list --json' prints, so a script reads one shape.
type keyView struct {
	Queue    string `json:"queue"`
	Key      string `json:"key"`
	Pending  int64  `json:"pending"`
	Reserved int64  `json:"reserved"`
	Failed   int64  `json:"failed"`
	Held     bool   `json:"held"`
	HeadID   int64  `json:"head_id,omitempty"`
	// HeldSince is when the head that holds the key failed: how long the
	// key has waited for an operator.
	HeldSince *time.Time `json:"held_since,omitempty"`
}

// toKeyView shows k; a key that is not held has no held_since.
func toKeyView(k jobq.KeyInfo) keyView {
	v := keyView{Queue: k.Queue, Key: k.Key, Pending: k.Pending, Reserved: k.Reserved, Failed: k.Failed, Held: k.Held, HeadID: k.HeadID}
	if k.Held {
		v.HeldSince = timePtr(k.HeldSince)
	}
	return v
}

// keyRulesView is a queue's key rules: the body of PUT
// /api/v1/queues/{queue}/keys and its answer. Its zero value clears them.
type keyRulesView struct {
	Limit   int  `json:"limit"`
	Ordered bool `json:"ordered"`
	// OnFailure is hold, continue or halt; empty is hold for ordered
	// keys. An answer shows the policy in force, so a client that left it
	// out sees what a failed head will do.
	OnFailure string `json:"on_failure,omitempty"`
}

// maxKeysPage bounds GET /api/v1/keys as every list route is bounded.
const maxKeysPage = maxPage

// parseKeysQuery reads GET /api/v1/keys's query: queue, held (a boolean)
// and limit (1..1000, default 100). Unknown parameters are refused, as on
// every list route, so a misspelt "hold=true" does not list every key.
func parseKeysQuery(q url.Values) (jobq.KeyListParams, error) {
	p := jobq.KeyListParams{Limit: backend.DefaultListLimit}
	if err := onlyParams(q, "queue", "held", "limit"); err != nil {
		return p, err
	}
	if p.Queue = q.Get("queue"); p.Queue != "" {
		if err := backend.ValidateQueue(p.Queue); err != nil {
			return p, badField("queue", "not a queue name: use letters, digits, '_', '-', '.' or ':'")
		}
	}
	if v := q.Get("held"); v != "" {
		var err error
		if p.Held, err = strconv.ParseBool(v); err != nil {
			return p, badField("held", "%q: use true or false", v)
		}
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxKeysPage {
			return p, badField("limit", "%q: use 1..%d", v, maxKeysPage)
		}
		p.Limit = n
	}
	return p, nil
}

// listKeys lists the keys with live or failed jobs, busiest first.
func (s *server) listKeys(w http.ResponseWriter, r *http.Request) {
	p, err := parseKeysQuery(r.URL.Query())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	keys, err := s.opts.Inspector.Keys(r.Context(), p)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := struct {
		Keys []keyView `json:"keys"`
	}{Keys: make([]keyView, len(keys))}
	for i, k := range keys {
		out.Keys[i] = toKeyView(k)
	}
	writeJSON(w, http.StatusOK, out)
}

// keyJobView is one job of a key, live or failed, as GET
// /api/v1/queues/{queue}/keys/{key} lists it ('jobq keys show --json').
type keyJobView struct {
	ID       int64  `json:"id"`
	State    string `json:"state"`
	Type     string `json:"type"`
	Attempts int    `json:"attempts"`
	Turn     int64  `json:"turn,omitempty"`
	Error    string `json:"error,omitempty"`
}

// maxKeyJobs bounds how many jobs of one state a key's view reads. A
// job list pages newest first, so a key is read to its end (its oldest
// jobs, the head among them, are what an operator looks for) unless it
// holds more than this; then the view says it is truncated.
const maxKeyJobs = 10 * maxPage

// keyJobs is a key's live and failed jobs in ID order (the order an
// ordered key runs them in), and whether some were left out.
func (s *server) keyJobs(ctx context.Context, queue, key string) (jobs []keyJobView, truncated bool, err error) {
	f := jobq.JobFilter{Queue: queue, Key: key}
	for _, st := range []jobq.JobState{jobq.StatePending, jobq.StateScheduled, jobq.StateReserved} {
		var before int64
		for n := 0; ; {
			rows, err := s.opts.Inspector.JobsPage(ctx, st, f, maxPage, before)
			if err != nil {
				return nil, false, err
			}
			for _, j := range rows {
				state := st
				if j.Status == jobq.StateCancelling {
					state = jobq.StateCancelling
				}
				jobs = append(jobs, keyJobView{ID: j.ID, State: string(state), Type: j.Type, Attempts: j.Attempts, Turn: j.Turn, Error: s.maskedText(j.LastError)})
			}
			n += len(rows)
			if len(rows) < maxPage {
				break
			}
			if n >= maxKeyJobs {
				truncated = true
				break
			}
			before = rows[len(rows)-1].ID
		}
	}
	var before int64
	for n := 0; ; {
		rows, err := s.opts.Inspector.FailedPage(ctx, jobq.FailedFilter{Queue: queue, Key: key}, maxPage, before)
		if err != nil {
			return nil, false, err
		}
		for _, fj := range rows {
			jobs = append(jobs, keyJobView{ID: fj.JobID, State: string(jobq.StateFailed), Type: fj.Type, Attempts: fj.Attempts, Turn: fj.Turn, Error: s.maskedText(fj.Error)})
		}
		n += len(rows)
		if len(rows) < maxPage {
			break
		}
		if n >= maxKeyJobs {
			truncated = true
			break
		}
		before = rows[len(rows)-1].ID // the failed row's own ID: the list's cursor
	}
	slices.SortFunc(jobs, func(x, y keyJobView) int { return cmp.Compare(x.ID, y.ID) })
	return jobs, truncated, nil
}

// keyHead returns the key as the backend's KeyList sees it when a failed
// head holds it (Held, HeadID, HeldSince), or a KeyInfo that is not held.
// Held keys are few, so the list of them is read, not every key.
func (s *server) keyHead(ctx context.Context, queue, key string) (jobq.KeyInfo, error) {
	keys, err := s.opts.Inspector.Keys(ctx, jobq.KeyListParams{Queue: queue, Held: true, Limit: maxKeyJobs})
	if err != nil {
		return jobq.KeyInfo{}, err
	}
	for _, k := range keys {
		if k.Key == key {
			return k, nil
		}
	}
	return jobq.KeyInfo{Queue: queue, Key: key}, nil
}

// pathKey reads the {queue} and {key} path values. A key may hold '/'
// (sent as %2F) or spaces; it may not be empty, since "" is no key.
func pathKey(r *http.Request) (queue, key string, err error) {
	if queue, err = pathQueue(r); err != nil {
		return "", "", err
	}
	key = r.PathValue("key")
	if err := backend.ValidateKey(key); err != nil || key == "" {
		return "", "", badField("key", "not a key: use 1 to %d bytes of UTF-8 without control characters (escape '/' as %%2F)", backend.MaxKeyLen)
	}
	return queue, key, nil
}

// getKey shows one key of one queue: its jobs in ID order, and whether a
// failed head holds it. A key without jobs shows none, as a queue
// without jobs shows zeros.
func (s *server) getKey(w http.ResponseWriter, r *http.Request) {
	queue, key, err := pathKey(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	// The head first: on a backend without keys it is the 501, before
	// any job listing is read.
	head, err := s.keyHead(r.Context(), queue, key)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	jobs, truncated, err := s.keyJobs(r.Context(), queue, key)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if jobs == nil {
		jobs = []keyJobView{}
	}
	v := toKeyView(head)
	writeJSON(w, http.StatusOK, struct {
		Queue     string       `json:"queue"`
		Key       string       `json:"key"`
		Held      bool         `json:"held"`
		HeadID    int64        `json:"head_id,omitempty"`
		HeldSince *time.Time   `json:"held_since,omitempty"`
		Jobs      []keyJobView `json:"jobs"`
		Truncated bool         `json:"truncated,omitempty"`
	}{queue, key, v.Held, v.HeadID, v.HeldSince, jobs, truncated})
}

// keyRulesOf shows rules as the API does, with the policy in force.
func keyRulesOf(r jobq.KeyRules) keyRulesView {
	return keyRulesView{Limit: r.Limit, Ordered: r.Ordered, OnFailure: string(r.Policy())}
}

// keyRulesField names, as the API's JSON does, the field a
// backend.InputError about key rules names in its own words.
func keyRulesField(err error) error {
	var ie *backend.InputError
	if !errors.As(err, &ie) {
		return err
	}
	switch ie.Field {
	case "key limit":
		return badField("limit", "%s", ie.Reason)
	case "key policy":
		return badField("on_failure", "%s", ie.Reason)
	}
	return err
}

// setKeys replaces a queue's key rules; {} clears them (turns between
// keys stay: they need no rule). Everything the backend would refuse is
// refused first, naming the field, so nothing is written.
func (s *server) setKeys(w http.ResponseWriter, r *http.Request) {
	name, err := pathQueue(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var req keyRulesView
	if err := decodeBody(r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	rules := jobq.KeyRules{Limit: req.Limit, Ordered: req.Ordered}
	if req.OnFailure != "" {
		if rules.OnFailure, err = backend.ParseKeyPolicy(req.OnFailure); err != nil {
			s.fail(w, r, keyRulesField(err))
			return
		}
	}
	if err := backend.ValidateKeyRules(rules); err != nil {
		s.fail(w, r, keyRulesField(err))
		return
	}
	if err := s.opts.Inspector.SetQueueKeys(r.Context(), name, rules); err != nil {
		s.fail(w, r, keyRulesField(err))
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Queue string       `json:"queue"`
		Keys  keyRulesView `json:"keys"`
	}{name, keyRulesOf(rules)})
}
