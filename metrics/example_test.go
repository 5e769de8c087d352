package metrics_test

import (
	"context"
	"log"
	"net"
	"os/signal"
	"syscall"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend/sqlite"
	"github.com/jobq/jobq/metrics"
)

// A worker process that exports its metrics, the queue depths and health
// probes on :9090 until SIGTERM.
func Example() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	b, err := sqlite.Open(ctx, "jobq.db", sqlite.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	m, err := metrics.New(metrics.Options{})
	if err != nil {
		log.Fatal(err)
	}
	reg := jobq.NewRegistry()
	reg.HandleFunc("email.welcome", func(ctx context.Context, j *jobq.Job) error { return nil })
	w, err := jobq.NewWorker(b, reg, jobq.WorkerConfig{
		Queues: []string{"mail"},
		Hooks:  []jobq.WorkerHooks{m.WorkerHooks()}, // counters and histograms of every attempt
	})
	if err != nil {
		log.Fatal(err)
	}
	m.AddWorker(w, reg) // capacity, and every series of "mail" × "email.welcome" at zero
	// Producers count what they enqueue: jobq.ClientConfig{Hooks: []jobq.ClientHooks{m.ClientHooks()}}.
	if err := m.ObserveQueues(jobq.NewInspector(b, m.InspectorHooks())); err != nil { // depth gauges
		log.Fatal(err)
	}

	l, err := net.Listen("tcp", ":9090")
	if err != nil {
		log.Fatal(err)
	}
	go metrics.Serve(ctx, l, metrics.NewServeMux(m, metrics.BackendReady(b)), 5*time.Second)
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
