package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/httpserve"
)

// Handler serves the registry's metrics in the Prometheus text format (or
// OpenMetrics, when the scraper asks for it).
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.opts.Registry, promhttp.HandlerOpts{})
}

// ReadyTimeout bounds one readiness check.
const ReadyTimeout = 2 * time.Second

// NewServeMux returns the routes of a metrics address: /metrics (see
// Handler), /healthz (200 while the process serves HTTP: a liveness
// probe) and /readyz (200 when ready returns nil within ReadyTimeout,
// 503 with its error otherwise: a readiness probe). ready may be nil:
// always ready.
func NewServeMux(m *Metrics, ready func(context.Context) error) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if ready != nil {
			ctx, cancel := context.WithTimeout(r.Context(), ReadyTimeout)
			defer cancel()
			if err := ready(ctx); err != nil {
				http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		fmt.Fprintln(w, "ok")
	})
	return mux
}

// BackendReady returns a readiness check that asks b for a job that does
// not exist: one indexed lookup, which answers "not found" when the
// backend is reachable and its schema in place, whatever the size of the
// queue (unlike counting it).
func BackendReady(b backend.Backend) func(context.Context) error {
	return func(ctx context.Context) error {
		if _, err := b.JobGet(ctx, 0); err != nil && !errors.Is(err, backend.ErrNotFound) {
			return err
		}
		return nil
	}
}

// Serve serves h on l until ctx ends, then shuts down gracefully: it
// stops accepting, lets requests in progress finish for up to grace, and
// closes l. It returns nil after a shutdown ctx asked for, or the error
// that stopped serving.
func Serve(ctx context.Context, l net.Listener, h http.Handler, grace time.Duration) error {
	return httpserve.Until(ctx, httpserve.New(h, 0, nil), l, grace, "metrics")
}
