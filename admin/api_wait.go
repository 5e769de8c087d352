package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/jobview"
)

// Bounds of GET /api/v1/jobs/{id}/wait's timeout: the default, and the
// most a request may ask, well inside the server's 2-minute bound on an
// answer (internal/httpserve) and the 60 s idle timeouts of common proxies.
const (
	defaultWaitTimeout = 30 * time.Second
	maxWaitTimeout     = 60 * time.Second
)

// errWaitTimeout is the cause of the context a wait's timeout ends.
var errWaitTimeout = errors.New("wait timeout passed")

// waitJob long-polls one job: 200 with its final state (completed,
// failed or cancelled: the body's state says which) once it is finished;
// 202 with finished false when the timeout ends first, for the client to
// ask again; 404 when the store has it nowhere (completed and not kept,
// pruned, or never enqueued).
func (s *server) waitJob(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	timeout := defaultWaitTimeout
	if v := r.URL.Query().Get("timeout"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 || d > maxWaitTimeout {
			s.fail(w, r, badField("timeout", "%q: use a Go duration above 0 and at most %s, e.g. 30s", v, maxWaitTimeout))
			return
		}
		timeout = d
	}
	ctx, cancel := context.WithTimeoutCause(r.Context(), timeout, errWaitTimeout)
	defer cancel()
	res, err := s.opts.Inspector.Wait(ctx, id)
	switch {
	case err == nil, errors.Is(err, jobq.ErrJobFailed), errors.Is(err, jobq.ErrJobCancelled):
		writeJSON(w, http.StatusOK, jobview.Waited(s.mask, res))
	case errors.Is(err, errWaitTimeout):
		writeJSON(w, http.StatusAccepted, jobview.Wait{ID: id})
	case errors.Is(err, jobq.ErrJobGone):
		s.fail(w, r, fmt.Errorf("%w: %w", err, jobq.ErrNotFound))
	default:
		s.fail(w, r, err)
	}
}
