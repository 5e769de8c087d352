package sqlite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/sqlite"
)

// Open a file-backed store, enqueue a job, claim it and mark it done: the
// cycle the worker runtime drives.
func ExampleOpen() {
	dir, err := os.MkdirTemp("", "jobq-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)

	ctx := context.Background()
	b, err := sqlite.Open(ctx, filepath.Join(dir, "jobq.db"), sqlite.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()

	res, err := b.JobInsertMany(ctx, []backend.InsertParams{{
		Queue: "emails", Type: "welcome", Payload: []byte(`{"to":"ada@example.com"}`), MaxAttempts: 3,
	}})
	if err != nil {
		fmt.Println(err)
		return
	}
	jobs, err := b.JobClaim(ctx, backend.ClaimParams{Queues: []string{"emails"}, Max: 10, Lease: time.Minute})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(jobs[0].ID == res[0].ID, jobs[0].Type, string(jobs[0].Payload), "attempt", jobs[0].Attempts)

	out, err := b.JobComplete(ctx, backend.CompleteParams{Outcomes: []backend.Outcome{
		{Ref: jobs[0].Ref(), Kind: backend.OutcomeDone},
	}})
	fmt.Println(len(out.Stale), err)
	// Output:
	// true welcome {"to":"ada@example.com"} attempt 1
	// 0 <nil>
}
