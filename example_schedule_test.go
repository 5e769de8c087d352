package jobq_test

import (
	"context"
	"fmt"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend/memory"
)

// Enqueue a report every weekday at 09:00 Paris time and a cleanup every
// 30 seconds, from every worker process, each tick once.
func ExampleSchedule() {
	ctx := context.Background()
	b := memory.New(memory.Options{}) // every process opens the same sqlite:, postgres:// or redis:// store
	defer b.Close()
	reg := jobq.NewRegistry()
	reg.HandleFunc("report.build", func(ctx context.Context, j *jobq.Job) error { return nil })
	reg.HandleFunc("cleanup", func(ctx context.Context, j *jobq.Job) error { return nil })

	worker, err := jobq.NewWorker(b, reg, jobq.WorkerConfig{
		Logger: quietLog,
		Schedules: []jobq.Schedule{
			{Name: "daily-report", Spec: "0 9 * * 1-5", TimeZone: "Europe/Paris",
				Type: "report.build", Payload: map[string]string{"kind": "daily"},
				Options: []jobq.EnqueueOption{jobq.Queue("default"), jobq.MaxAttempts(5)}},
			{Name: "cleanup", Spec: "@every 30s", Type: "cleanup"},
		},
	})
	if err != nil {
		panic(err)
	}
	runCtx, stop := context.WithTimeout(ctx, 100*time.Millisecond)
	defer stop()
	_ = worker.Run(runCtx) // registers the schedules, then enqueues their ticks

	schedules, err := jobq.NewInspector(b).Schedules(ctx)
	if err != nil {
		panic(err)
	}
	for _, s := range schedules {
		fmt.Println(s.Name, s.Spec, s.Queue, s.Type)
	}
	// Output:
	// cleanup @every 30s default cleanup
	// daily-report CRON_TZ=Europe/Paris 0 9 * * 1-5 default report.build
}
