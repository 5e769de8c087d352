package admin

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
)

// apiRoute is one route of the JSON API.
type apiRoute struct {
	method, path string
	scope        Scope
	h            http.HandlerFunc
}

// apiRoutes is the API in one table: registerAPI registers it and the
// OpenAPI test holds it against openapi.json.
func (s *server) apiRoutes() []apiRoute {
	return []apiRoute{
		{"GET", "/api/v1/openapi.json", ScopeRead, s.openAPI},

		{"POST", "/api/v1/jobs", ScopeEnqueue, s.enqueueOne},
		{"POST", "/api/v1/jobs/batch", ScopeEnqueue, s.enqueueBatch},
		{"GET", "/api/v1/jobs", ScopeRead, s.listJobs},
		{"GET", "/api/v1/jobs/{id}", ScopeRead, s.getJob},
		{"POST", "/api/v1/jobs/{id}/cancel", ScopeAdmin, s.cancelJob},
		{"GET", "/api/v1/jobs/{id}/wait", ScopeRead, s.waitJob},

		{"GET", "/api/v1/failed", ScopeRead, s.listFailed},
		{"GET", "/api/v1/failed/{id}", ScopeRead, s.getFailed},
		{"POST", "/api/v1/failed/{id}/replay", ScopeAdmin, s.replayOne},
		{"DELETE", "/api/v1/failed/{id}", ScopeAdmin, s.purgeOne},
		{"POST", "/api/v1/failed/replay", ScopeAdmin, s.replayMany},
		{"POST", "/api/v1/failed/purge", ScopeAdmin, s.purgeMany},

		{"GET", "/api/v1/queues", ScopeRead, s.listQueues},
		{"GET", "/api/v1/queues/{queue}", ScopeRead, s.getQueue},
		{"POST", "/api/v1/queues/{queue}/pause", ScopeAdmin, s.pauseQueue},
		{"POST", "/api/v1/queues/{queue}/resume", ScopeAdmin, s.resumeQueue},
		{"PUT", "/api/v1/queues/{queue}/limits", ScopeAdmin, s.setLimits},
		{"PUT", "/api/v1/queues/{queue}/keys", ScopeAdmin, s.setKeys},
		{"GET", "/api/v1/queues/{queue}/keys/{key}", ScopeRead, s.getKey},

		{"GET", "/api/v1/keys", ScopeRead, s.listKeys},

		{"GET", "/api/v1/workflows", ScopeRead, s.listWorkflows},
		{"GET", "/api/v1/workflows/{id}", ScopeRead, s.getWorkflow},
		{"POST", "/api/v1/workflows/{id}/cancel", ScopeAdmin, s.cancelWorkflow},

		{"GET", "/api/v1/schedules", ScopeRead, s.listSchedules},
		{"GET", "/api/v1/schedules/{name}", ScopeRead, s.getSchedule},
	}
}

// registerAPI registers the /api/v1 routes.
func (s *server) registerAPI() {
	for _, rt := range s.apiRoutes() {
		s.handle(rt.method+" "+rt.path, rt.scope, rt.h)
	}
}

//go:embed openapi.json
var openAPIDoc []byte

// openAPI serves the API's description.
func (s *server) openAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openAPIDoc)
}

// fieldError is bad input in a request, named by its JSON field (or query
// parameter, or header).
type fieldError struct {
	field, reason string
}

func (e *fieldError) Error() string { return "invalid " + e.field + ": " + e.reason }

// badField returns a fieldError.
func badField(field, format string, args ...any) error {
	return &fieldError{field: field, reason: fmt.Sprintf(format, args...)}
}

// fail answers err with its status and stable code: bad input 400 naming
// the field, 404, 413, 501 for what the backend cannot do, 503 when it
// cannot be reached, 500 (logged, not shown) for the rest.
func (s *server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var fe *fieldError
	var ie *backend.InputError
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		writeError(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("the request body is over the %d-byte limit", mbe.Limit), "")
	case errors.As(err, &fe):
		writeError(w, http.StatusBadRequest, "invalid_input", err.Error(), fe.field)
	case errors.As(err, &ie):
		writeError(w, http.StatusBadRequest, "invalid_input", err.Error(), strings.ReplaceAll(ie.Field, " ", "_"))
	case errors.Is(err, jobq.ErrInvalidInput):
		writeError(w, http.StatusBadRequest, "invalid_input", err.Error(), "")
	case errors.Is(err, jobq.ErrNotFound):
		writeError(w, http.StatusNotFound, "not_found", err.Error(), "")
	case errors.Is(err, jobq.ErrNotSupported):
		writeError(w, http.StatusNotImplemented, "not_supported", err.Error(), "")
	case errors.Is(err, jobq.ErrUnavailable), errors.Is(err, jobq.ErrClosed), errors.Is(err, context.DeadlineExceeded):
		s.log.Warn("admin request: backend unavailable", "method", r.Method, "path", r.URL.Path, "err", err)
		writeError(w, http.StatusServiceUnavailable, "unavailable", "the backend cannot be reached; try again", "")
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		// The client went away: nobody reads the answer.
	default:
		s.log.Error("admin request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		writeError(w, http.StatusInternalServerError, "internal", "internal error (logged by the server)", "")
	}
}

// decodeBody reads the request's JSON body into v, refusing unknown
// fields (a misspelt "max_attempt" must not be silently ignored) and
// trailing data, with the offending field named.
func decodeBody(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return bodyError(err)
	}
	if dec.More() {
		return badField("body", "holds more than one JSON value")
	}
	if _, err := dec.Token(); err != nil && !errors.Is(err, io.EOF) {
		return bodyError(err)
	}
	return nil
}

// bodyError turns a decoding error into a fieldError naming what it can.
func bodyError(err error) error {
	var mbe *http.MaxBytesError
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &mbe):
		return err
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			field = "body"
		}
		return badField(field, "want a JSON %s, got %s", jsonKind(te.Type.Kind().String()), te.Value)
	case errors.As(err, &se):
		return badField("body", "not valid JSON: %v", se)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return badField("body", "empty or cut short: send a JSON object")
	}
	var ie *backend.InputError
	if errors.As(err, &ie) { // a field's own decoder refused its value
		return badField(jsonField(ie.Field), "%s", ie.Reason)
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return badField(strings.Trim(name, `"`), "unknown field")
	}
	return badField("body", "%v", err)
}

// jsonKind names a Go kind as JSON does.
func jsonKind(k string) string {
	switch {
	case strings.HasPrefix(k, "int"), strings.HasPrefix(k, "uint"), strings.HasPrefix(k, "float"):
		return "number"
	case k == "map", k == "struct":
		return "object"
	case k == "slice", k == "array":
		return "array"
	case k == "bool":
		return "boolean"
	}
	return k
}
