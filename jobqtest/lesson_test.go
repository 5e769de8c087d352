package jobqtest_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/inline"
	"github.com/jobq/jobq/backend/memory"
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
	rec := jobqtest.NewRecorder(inline.New())
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
		runUntil(t, w, func() bool { return rec.Classify("thumbnail") == jobqtest.Ran })
		rec.AssertClass(t, "thumbnail", jobqtest.Ran)
		if !thumbs.Exists("cat.png") {
			t.Fatal("worker ran the type but no thumbnail exists")
		}
	})
}

// Count returns how many thumbnails exist.
func (s *Thumbs) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.made)
}

// imageController is the lesson's controller: POST /images?image=NAME
// saves the image (its own step, not a job), asks for the thumbnail
// through the queue (Upload) and answers 201 Created; an enqueue error
// would answer 500.
type imageController struct {
	client *jobq.Client
	save   func(image string) // the controller's own "save" step
}

func (c *imageController) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	image := r.URL.Query().Get("image")
	c.save(image)
	if err := Upload(r.Context(), c.client, image); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusCreated)
}

// lessonRequest is one request of the lesson: it places "save" and
// "thumbnail" on the request's path, serves POST /images?image=cat.png
// with the controller on a client of rec (registry reg, allowance
// maxAttempts), recording the save step as ran, and returns the status.
func lessonRequest(rec *jobqtest.Recorder, reg *jobq.Registry, maxAttempts int) int {
	client, err := jobq.NewClient(rec.Backend(), jobq.ClientConfig{
		Registry: reg, MaxAttempts: maxAttempts, Hooks: []jobq.ClientHooks{rec.ClientHooks()},
	})
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(&imageController{client: client, save: func(image string) {
		rec.Ran("save") // the saving itself is not shown
	}})
	defer srv.Close()
	rec.OnPath("save", "thumbnail")
	resp, err := srv.Client().Post(srv.URL+"/images?image="+url.QueryEscape("cat.png"), "", nil)
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// lessonDrivers: measurement (a). The same controller with the memory
// driver (the thumbnail is deferred) and the sync driver (it runs inside
// the request): only the driver changed.
func lessonDrivers() {
	ctx := context.Background()
	thumbs := &Thumbs{made: map[string]bool{}}
	reg := thumbnailRegistry(thumbs)

	m := memory.New(memory.Options{})
	defer m.Close()
	rec := jobqtest.NewRecorder(m)
	status := lessonRequest(rec, reg, 0)
	stats, err := jobq.NewInspector(rec.Backend()).Stats(ctx)
	if err != nil {
		panic(err)
	}
	thumb := rec.Observe("thumbnail")
	fmt.Printf("memory: response %d; save %s; thumbnail %s, on the path %v; thumbnails %d; jobs pending %d\n",
		status, rec.Classify("save"), thumb.Class, thumb.Reached > 0, thumbs.Count(), jobq.Totals(stats).Pending)
	as, err := rec.Drain(ctx, reg, jobq.WorkerConfig{})
	if err != nil {
		panic(err)
	}
	for _, a := range as {
		fmt.Printf("memory: the worker ran %s attempt %d: %s; thumbnails %d\n", a.Type, a.Attempt, a.State, thumbs.Count())
	}

	thumbs = &Thumbs{made: map[string]bool{}}
	reg = thumbnailRegistry(thumbs)
	rec = jobqtest.NewRecorder(inline.New())
	status = lessonRequest(rec, reg, 0)
	fmt.Printf("sync: response %d; save %s; thumbnail %s; thumbnails %d\n",
		status, rec.Classify("save"), rec.Classify("thumbnail"), thumbs.Count())
}

// lessonAllowance: measurement (b). On the memory driver, with an
// allowance of 3 attempts, a thumbnail job whose handler fails its first
// failFirst attempts; each job on its own backend, so nothing depends on
// the order jobs are claimed in.
func lessonAllowance(failFirst int) {
	ctx := context.Background()
	m := memory.New(memory.Options{})
	defer m.Close()
	var calls atomic.Int32
	reg := jobq.NewRegistry()
	jobq.Handle(reg, "thumbnail", func(ctx context.Context, t Thumbnail) error {
		if int(calls.Add(1)) <= failFirst {
			return errors.New("upstream timeout")
		}
		return nil
	})
	rec := jobqtest.NewRecorder(m)
	status := lessonRequest(rec, reg, 3)
	fmt.Printf("allowance 3, failing the first %d attempts: response %d; thumbnail %s\n", failFirst, status, rec.Classify("thumbnail"))
	as, err := rec.Drain(ctx, reg, jobq.WorkerConfig{}) // backoff treated as elapsed
	if err != nil {
		panic(err)
	}
	for _, a := range as {
		fmt.Printf("  attempt %d: %s\n", a.Attempt, a.State)
	}
	failed, err := jobq.NewInspector(rec.Backend()).FailedPage(ctx, jobq.FailedFilter{}, 0, 0)
	if err != nil {
		panic(err)
	}
	fmt.Printf("  handler called %d times", calls.Load())
	if n := int(calls.Load()); n < failFirst {
		fmt.Printf(" (attempts %d to %d never made)", n+1, failFirst)
	}
	fmt.Printf("; failed list entries: %d", len(failed))
	for _, f := range failed {
		fmt.Printf(" (%s after %d attempts)", f.Type, f.Attempts)
	}
	fmt.Println()
}

// The course's lesson, replayed with its numbers: one web request (save
// the image, then ask for its thumbnail) on the memory and the sync
// drivers, then the attempt allowance on the memory driver.
func Example_lesson() {
	lessonDrivers()
	lessonAllowance(1)
	lessonAllowance(5)
	// Output:
	// memory: response 201; save ran; thumbnail deferred, on the path true; thumbnails 0; jobs pending 1
	// memory: the worker ran thumbnail attempt 1: done; thumbnails 1
	// sync: response 201; save ran; thumbnail ran; thumbnails 1
	// allowance 3, failing the first 1 attempts: response 201; thumbnail deferred
	//   attempt 1: retried
	//   attempt 2: done
	//   handler called 2 times; failed list entries: 0
	// allowance 3, failing the first 5 attempts: response 201; thumbnail deferred
	//   attempt 1: retried
	//   attempt 2: retried
	//   attempt 3: failed
	//   handler called 3 times (attempts 4 to 5 never made); failed list entries: 1 (thumbnail after 3 attempts)
}
