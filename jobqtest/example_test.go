package jobqtest_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/inline"
	"github.com/jobq/jobq/backend/memory"
	"github.com/jobq/jobq/jobqtest"
)

// Thumbnail is the payload of a "thumbnail" job.
type Thumbnail struct {
	Image string `json:"image"`
}

// Thumbs stands for the store where thumbnails end up.
type Thumbs struct {
	mu   sync.Mutex
	made map[string]bool
}

func (s *Thumbs) Make(image string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.made[image] = true
}

func (s *Thumbs) Exists(image string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.made[image]
}

// Upload is the handler-side function under test: it saves an image (not
// shown) and asks for its thumbnail through the queue.
func Upload(ctx context.Context, c *jobq.Client, image string) error {
	_, err := c.Enqueue(ctx, "thumbnail", Thumbnail{Image: image})
	return err
}

// uploadOn runs one Upload request against b and reports what became of
// the thumbnail: right after the request, and after the test ran the queue.
func uploadOn(name string, b backend.Backend) {
	ctx := context.Background()
	thumbs := &Thumbs{made: map[string]bool{}}
	reg := jobq.NewRegistry()
	jobq.Handle(reg, "thumbnail", func(ctx context.Context, t Thumbnail) error {
		thumbs.Make(t.Image)
		return nil
	})

	rec := jobqtest.NewRecorder(b)
	client, err := jobq.NewClient(rec.Backend(), jobq.ClientConfig{
		Registry: reg,
		Hooks:    []jobq.ClientHooks{rec.ClientHooks()},
	})
	if err != nil {
		panic(err)
	}
	if err := Upload(ctx, client, "cat.png"); err != nil {
		panic(err)
	}
	fmt.Printf("%s: thumbnail %s; exists when the request returns: %v\n",
		name, rec.Classify("thumbnail"), thumbs.Exists("cat.png"))

	attempts, err := rec.Drain(ctx, reg, jobq.WorkerConfig{})
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s: the test ran %d attempt(s); exists now: %v\n", name, len(attempts), thumbs.Exists("cat.png"))
}

// The course's lesson: the same handler-side function, run with the sync
// backend (the job runs inside the request) and with the memory backend
// (the job is deferred until the queue runs it).
func Example_ranOrDeferred() {
	uploadOn("sync", inline.New())
	m := memory.New(memory.Options{})
	defer m.Close()
	uploadOn("memory", m)
	// Output:
	// sync: thumbnail ran; exists when the request returns: true
	// sync: the test ran 0 attempt(s); exists now: true
	// memory: thumbnail deferred; exists when the request returns: false
	// memory: the test ran 1 attempt(s); exists now: true
}

// runFlaky enqueues one job allowed 3 attempts whose handler fails its
// first failFirst attempts, runs the queue, and reports the handler's runs
// and the failed jobs left.
func runFlaky(failFirst int) {
	ctx := context.Background()
	b := memory.New(memory.Options{})
	defer b.Close()
	var runs atomic.Int32
	reg := jobq.NewRegistry()
	reg.HandleFunc("flaky", func(ctx context.Context, j *jobq.Job) error {
		if int(runs.Add(1)) <= failFirst {
			return errors.New("upstream timeout")
		}
		return nil
	})
	rec := jobqtest.NewRecorder(b)
	client, _ := jobq.NewClient(rec.Backend(), jobq.ClientConfig{})
	if _, err := client.Enqueue(ctx, "flaky", nil, jobq.MaxAttempts(3)); err != nil {
		panic(err)
	}
	// The default retry policy waits 10s, then 20s: Drain treats the
	// backoff as elapsed, so the example takes no time.
	attempts, err := rec.Drain(ctx, reg, jobq.WorkerConfig{})
	if err != nil {
		panic(err)
	}
	failed, _ := b.FailedList(ctx, backend.FailedListParams{})
	fmt.Printf("fails %d of an allowance of 3: ran %d times, %d failed job(s)\n", failFirst, runs.Load(), len(failed))
	for _, a := range attempts {
		fmt.Printf("  attempt %d: %s\n", a.Attempt, a.State)
	}
}

// The bounding case: the attempt allowance bounds the runs, and only a job
// that used it all up is left in failed jobs.
func Example_bounded() {
	runFlaky(1)
	runFlaky(5)
	// Output:
	// fails 1 of an allowance of 3: ran 2 times, 0 failed job(s)
	//   attempt 1: retried
	//   attempt 2: done
	// fails 5 of an allowance of 3: ran 3 times, 1 failed job(s)
	//   attempt 1: retried
	//   attempt 2: retried
	//   attempt 3: failed
}
