package jobq_test

import (
	"context"
	"fmt"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend/memory"
)

// Resize is the payload of a fan-out task: one image to shrink.
type Resize struct {
	Image string `json:"image"`
}

// Kind names the job type, so Add needs no type string.
func (Resize) Kind() string { return "image.resize" }

// Fan out three resizes, then fan in: the zip task waits for all three and
// reads what each recorded.
func ExampleWorkflow() {
	ctx := context.Background()
	b := memory.New(memory.Options{})
	defer b.Close()

	reg := jobq.NewRegistry()
	jobq.HandleArgs(reg, func(ctx context.Context, r Resize) error {
		return jobq.SetResult(ctx, "small-"+r.Image) // what the dependants read
	})
	zipped := make(chan string)
	reg.HandleFunc("album.zip", func(ctx context.Context, j *jobq.Job) error {
		var files []string
		for _, name := range []string{"a", "b", "c"} {
			var file string
			if err := jobq.DependencyResult(ctx, "resize-"+name, &file); err != nil {
				return err
			}
			files = append(files, file)
		}
		zipped <- fmt.Sprint(files)
		return nil
	})

	wf := jobq.NewWorkflow("album")
	wf.Add("resize-a", Resize{Image: "a.jpg"})
	wf.Add("resize-b", Resize{Image: "b.jpg"})
	wf.Add("resize-c", Resize{Image: "c.jpg"})
	wf.AddJob("zip", "album.zip", nil, jobq.After("resize-a", "resize-b", "resize-c"))

	client, _ := jobq.NewClient(b, jobq.ClientConfig{})
	id, err := client.EnqueueWorkflow(ctx, wf)
	if err != nil {
		panic(err)
	}

	worker, _ := jobq.NewWorker(b, reg, jobq.WorkerConfig{Logger: quietLog})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- worker.Run(runCtx) }()
	fmt.Println("zipped", <-zipped)
	stop()
	<-done

	info, _ := jobq.NewInspector(b).Workflow(ctx, id)
	fmt.Printf("workflow %s: %s, %d tasks succeeded\n", info.Name, info.State, info.Counts.Succeeded)
	// Output:
	// zipped [small-a.jpg small-b.jpg small-c.jpg]
	// workflow album: succeeded, 4 tasks succeeded
}
