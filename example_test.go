package jobq_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend/memory"
)

// WelcomeEmail is the payload of an "email.welcome" job.
type WelcomeEmail struct {
	To string `json:"to"`
}

// Kind names the job type: HandleArgs and EnqueueArgs read it, so the
// type string is written once.
func (WelcomeEmail) Kind() string { return "email.welcome" }

// Define a handler for a payload type, enqueue a job of it, run a worker
// until the job is done.
func Example() {
	ctx := context.Background()
	b := memory.New(memory.Options{}) // or sqlite.Open(ctx, "jobq.db", sqlite.Options{})
	defer b.Close()

	reg := jobq.NewRegistry()
	sent := make(chan string)
	jobq.HandleArgs(reg, func(ctx context.Context, e WelcomeEmail) error {
		sent <- e.To // a real handler would call the mail service here
		return nil
	})

	client, err := jobq.NewClient(b, jobq.ClientConfig{})
	if err != nil {
		panic(err)
	}
	if _, err := client.EnqueueArgs(ctx, WelcomeEmail{To: "ada@example.com"}); err != nil {
		panic(err)
	}

	worker, err := jobq.NewWorker(b, reg, jobq.WorkerConfig{Concurrency: 4, Logger: quietLog})
	if err != nil {
		panic(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- worker.Run(runCtx) }() // in a program: run until SIGTERM

	fmt.Println("sent welcome email to", <-sent)
	stop()
	fmt.Println("worker stopped:", <-done)
	// Output:
	// sent welcome email to ada@example.com
	// worker stopped: <nil>
}

// Retries, permanent failures and the failed-jobs table.
func ExampleInspector() {
	ctx := context.Background()
	b := memory.New(memory.Options{})
	defer b.Close()

	reg := jobq.NewRegistry()
	reg.HandleFunc("charge", func(ctx context.Context, j *jobq.Job) error {
		return jobq.Permanent(errors.New("card declined")) // no retry can fix this
	})
	client, _ := jobq.NewClient(b, jobq.ClientConfig{})
	client.Enqueue(ctx, "charge", map[string]int{"cents": 500})

	failed := make(chan jobq.Event, 1)
	worker, _ := jobq.NewWorker(b, reg, jobq.WorkerConfig{
		Logger: quietLog,
		Hooks:  []jobq.WorkerHooks{{Finished: func(e jobq.Event) { failed <- e }}},
	})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- worker.Run(runCtx) }()
	<-failed
	stop()
	<-done

	insp := jobq.NewInspector(b)
	page, _ := insp.FailedPage(ctx, jobq.FailedFilter{}, 10, 0)
	fmt.Printf("%s failed after %d attempt: %s\n", page[0].Type, page[0].Attempts, page[0].Error)
	replayed, _, _ := insp.ReplayAll(ctx, jobq.FailedFilter{Type: "charge"})
	fmt.Println("replayed:", replayed)
	stats, _ := insp.Stats(ctx)
	fmt.Printf("queue %s: pending %d, failed %d\n", stats[0].Queue, stats[0].Pending, stats[0].Failed)
	// Output:
	// charge failed after 1 attempt: permanent: card declined
	// replayed: 1
	// queue default: pending 1, failed 0
}
