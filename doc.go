// Package jobq is a background-job queue: a producer enqueues a job (a type
// and a JSON payload) and returns at once; a durable backend keeps it;
// workers claim it without ever double-claiming, run the handler registered
// for its type, retry failures with exponential backoff and jitter, and move
// jobs whose attempts run out to a failed-jobs table where an operator can
// inspect and replay them.
//
// # Handlers
//
// A Registry maps job types to handlers. Handle registers a typed handler
// whose JSON payload is decoded into a struct first:
//
//	reg := jobq.NewRegistry()
//	jobq.Handle(reg, "email.welcome", func(ctx context.Context, a WelcomeArgs) error {
//		return mailer.Send(ctx, a.To, "Welcome!")
//	})
//
// A handler's error retries the job; Permanent(err) fails it at once;
// RetryAfter(d, err) asks for a specific delay. A panic is recovered and
// recorded as the attempt's error.
//
// # Enqueueing
//
// A Client enqueues into a backend chosen by URL (backend.Open) or built
// directly (sqlite.Open, memory.New, …):
//
//	client, _ := jobq.NewClient(b, jobq.ClientConfig{})
//	id, err := client.Enqueue(ctx, "email.welcome", WelcomeArgs{To: "a@example.com"},
//		jobq.Queue("mail"), jobq.Delay(time.Minute))
//
// # Workers
//
// A Worker claims jobs from its queues and runs them until its context is
// cancelled, then shuts down gracefully (see Worker.Run). Delivery is
// at-least-once: a job whose worker died is run again after its lease
// expires, so handlers should be idempotent (UniqueKey helps at enqueue,
// CompleteTx at completion on SQL backends).
//
// # Observing
//
// Registry.Use wraps every handler in middleware; WorkerConfig.Hooks and
// ClientConfig.Hooks observe claims (with the time a job waited), starts,
// outcomes, lease rescues, refused outcomes and enqueues. Metrics and
// tracing packages are written on these seams, and Metadata carries trace
// context and tags from the enqueuer to the handler.
//
// # Operating
//
// An Inspector counts jobs per queue and state and lists, shows, replays and
// purges failed jobs; the jobq command line is a thin layer over it.
package jobq
