package jobqtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	syncbackend "github.com/jobq/jobq/backend/sync"
	"github.com/jobq/jobq/jobqtest"
)

// thumbnailRegistry registers the thumbnail handler, making thumbnails in
// thumbs.
func thumbnailRegistry(thumbs *Thumbs) *jobq.Registry {
	reg := jobq.NewRegistry()
	jobq.Handle(reg, "thumbnail", func(ctx context.Context, t Thumbnail) error {
		thumbs.Make(t.Image)
		return nil
	})
	return reg
}

// TestLessonSync: with the sync backend the thumbnail exists when the
// request returns.
func TestLessonSync(t *testing.T) {
	thumbs := &Thumbs{made: map[string]bool{}}
	reg := thumbnailRegistry(thumbs)
	rec := jobqtest.NewRecorder(syncbackend.New())
	if err := Upload(t.Context(), rec.NewClient(t, jobq.ClientConfig{Registry: reg}), "cat.png"); err != nil {
		t.Fatal(err)
	}
	if !thumbs.Exists("cat.png") {
		t.Fatal("no thumbnail when the request returned")
	}
	rec.AssertClass(t, "thumbnail", jobqtest.Ran)
	rec.AssertEnqueued(t, "thumbnail", jobqtest.EqualJSON(`{"image":"cat.png"}`))
}

// TestLessonDeferred: with a storing backend the thumbnail does not exist
// until the test runs the queue.
func TestLessonDeferred(t *testing.T) {
	eachStoring(t, func(t *testing.T, b backend.Backend) {
		thumbs := &Thumbs{made: map[string]bool{}}
		reg := thumbnailRegistry(thumbs)
		rec := jobqtest.NewRecorder(b)
		if err := Upload(t.Context(), rec.NewClient(t, jobq.ClientConfig{Registry: reg}), "cat.png"); err != nil {
			t.Fatal(err)
		}
		if thumbs.Exists("cat.png") {
			t.Fatal("thumbnail made inside the request")
		}
		rec.AssertClass(t, "thumbnail", jobqtest.Deferred)
		as := rec.RunQueue(t, reg, jobq.WorkerConfig{})
		if len(as) != 1 || as[0].State != jobqtest.StateDone || !thumbs.Exists("cat.png") {
			t.Fatalf("after RunQueue: thumbnail %v, attempts\n%s", thumbs.Exists("cat.png"), as)
		}
		rec.AssertClass(t, "thumbnail", jobqtest.Ran)
	})
}

// TestRealWorkerHooks: a real Worker given the recorder's WorkerHooks
// makes the type ran, like RunQueue does.
func TestRealWorkerHooks(t *testing.T) {
	eachStoring(t, func(t *testing.T, b backend.Backend) {
		thumbs := &Thumbs{made: map[string]bool{}}
		reg := thumbnailRegistry(thumbs)
		rec := jobqtest.NewRecorder(b)
		if err := Upload(t.Context(), rec.NewClient(t, jobq.ClientConfig{}), "cat.png"); err != nil {
			t.Fatal(err)
		}
		w, err := jobq.NewWorker(rec.Backend(), reg, jobq.WorkerConfig{
			PollInterval: 10 * time.Millisecond, Hooks: []jobq.WorkerHooks{rec.WorkerHooks()},
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		deadline := time.Now().Add(10 * time.Second)
		for rec.Classify("thumbnail") != jobqtest.Ran && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond) // a real worker runs on its own time
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		rec.AssertClass(t, "thumbnail", jobqtest.Ran)
		if !thumbs.Exists("cat.png") {
			t.Fatal("worker ran the type but no thumbnail exists")
		}
	})
}
