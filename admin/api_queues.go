package admin

import (
	"net/http"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
)

// queueView is one queue: counts, paused flag, limits, key rules.
type queueView struct {
	Queue     string     `json:"queue"`
	Pending   int64      `json:"pending"`
	Scheduled int64      `json:"scheduled"`
	Reserved  int64      `json:"reserved"`
	Failed    int64      `json:"failed"`
	OldestDue *time.Time `json:"oldest_due,omitempty"`
	Paused    bool       `json:"paused"`
	Limits    limitsView `json:"limits"`
	// The queue's key rules (see PUT /api/v1/queues/{queue}/keys), flat
	// under the names 'jobq queue list --json' prints: a per-key limit
	// (0: none), ordered keys, and an ordered key's policy for a failed
	// head (left out when keys are not ordered).
	KeyLimit     int    `json:"key_limit"`
	KeyOrdered   bool   `json:"key_ordered"`
	KeyOnFailure string `json:"key_on_failure,omitempty"`
}

// limitsView is a queue's limits; zero fields limit nothing.
type limitsView struct {
	Concurrency int    `json:"concurrency"`
	Rate        int    `json:"rate"`
	RatePeriod  string `json:"rate_period,omitempty"` // a Go duration
}

func toQueueView(q jobq.QueueInfo) queueView {
	v := queueView{
		Queue: q.Queue, Pending: q.Pending, Scheduled: q.Scheduled, Reserved: q.Reserved, Failed: q.Failed,
		OldestDue: timePtr(q.OldestDue), Paused: q.Paused,
		Limits:   limitsView{Concurrency: q.Limits.Concurrency, Rate: q.Limits.Rate},
		KeyLimit: q.Keys.Limit, KeyOrdered: q.Keys.Ordered, KeyOnFailure: string(q.Keys.Policy()),
	}
	if q.Limits.RatePeriod > 0 {
		v.Limits.RatePeriod = q.Limits.RatePeriod.String()
	}
	return v
}

// listQueues lists every queue with its counts and settings.
func (s *server) listQueues(w http.ResponseWriter, r *http.Request) {
	qs, err := s.opts.Inspector.Queues(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := struct {
		Queues []queueView `json:"queues"`
	}{Queues: make([]queueView, len(qs))}
	for i, q := range qs {
		out.Queues[i] = toQueueView(q)
	}
	writeJSON(w, http.StatusOK, out)
}

// pathQueue reads the {queue} path value.
func pathQueue(r *http.Request) (string, error) {
	q := r.PathValue("queue")
	if err := backend.ValidateQueue(q); err != nil {
		return "", badField("queue", "not a queue name: use 1 to %d letters, digits, '_', '-', '.' or ':'", backend.MaxQueueLen)
	}
	return q, nil
}

// getQueue shows one queue; one without jobs or settings shows zeros.
func (s *server) getQueue(w http.ResponseWriter, r *http.Request) {
	name, err := pathQueue(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	qs, err := s.opts.Inspector.Queues(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	info := jobq.QueueInfo{QueueStats: jobq.QueueStats{Queue: name}}
	for _, q := range qs {
		if q.Queue == name {
			info = q
		}
	}
	writeJSON(w, http.StatusOK, toQueueView(info))
}

// pauseQueue and resumeQueue set a queue's paused flag.
func (s *server) pauseQueue(w http.ResponseWriter, r *http.Request)  { s.setPaused(w, r, true) }
func (s *server) resumeQueue(w http.ResponseWriter, r *http.Request) { s.setPaused(w, r, false) }

func (s *server) setPaused(w http.ResponseWriter, r *http.Request, paused bool) {
	name, err := pathQueue(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if paused {
		err = s.opts.Inspector.PauseQueue(r.Context(), name)
	} else {
		err = s.opts.Inspector.ResumeQueue(r.Context(), name)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Queue  string `json:"queue"`
		Paused bool   `json:"paused"`
	}{name, paused})
}

// setLimits replaces a queue's limits; {} clears them.
func (s *server) setLimits(w http.ResponseWriter, r *http.Request) {
	name, err := pathQueue(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var req limitsView
	if err := decodeBody(r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	l := jobq.QueueLimits{Concurrency: req.Concurrency, Rate: req.Rate}
	if req.RatePeriod != "" {
		if l.RatePeriod, err = time.ParseDuration(req.RatePeriod); err != nil {
			s.fail(w, r, badField("rate_period", "%q: use a duration such as \"1s\"", req.RatePeriod))
			return
		}
	}
	if err := backend.ValidateQueueLimits(l); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.opts.Inspector.SetQueueLimits(r.Context(), name, l); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Queue  string     `json:"queue"`
		Limits limitsView `json:"limits"`
	}{name, req})
}

// scheduleView is a stored schedule.
type scheduleView struct {
	Name           string     `json:"name"`
	Spec           string     `json:"spec"`
	Queue          string     `json:"queue"`
	Type           string     `json:"type"`
	CreatedAt      time.Time  `json:"created_at"`
	RegisteredAt   time.Time  `json:"registered_at"`
	Next           *time.Time `json:"next,omitempty"`
	LastTick       *time.Time `json:"last_tick,omitempty"`
	LastEnqueuedAt *time.Time `json:"last_enqueued_at,omitempty"`
	LastJobID      int64      `json:"last_job_id,omitempty"`
}

func toScheduleView(s jobq.ScheduleInfo) scheduleView {
	return scheduleView{
		Name: s.Name, Spec: s.Spec, Queue: s.Queue, Type: s.Type, CreatedAt: s.CreatedAt, RegisteredAt: s.RegisteredAt,
		Next: timePtr(s.Next), LastTick: timePtr(s.LastTick), LastEnqueuedAt: timePtr(s.LastEnqueuedAt), LastJobID: s.LastJobID,
	}
}

// listSchedules lists the periodic schedules the workers registered.
func (s *server) listSchedules(w http.ResponseWriter, r *http.Request) {
	all, err := s.opts.Inspector.Schedules(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := struct {
		Schedules []scheduleView `json:"schedules"`
	}{Schedules: make([]scheduleView, len(all))}
	for i, sc := range all {
		out.Schedules[i] = toScheduleView(sc)
	}
	writeJSON(w, http.StatusOK, out)
}

// getSchedule shows one schedule by name.
func (s *server) getSchedule(w http.ResponseWriter, r *http.Request) {
	sc, err := s.opts.Inspector.Schedule(r.Context(), r.PathValue("name"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toScheduleView(sc))
}
