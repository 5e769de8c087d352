package admin

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
)

// Names and texts full of markup: task and workflow names are free text,
// and a reason is a job's error.
const (
	xssWorkflow = `<script>window.__xss=31</script>`
	xssTask     = `t"><img src=x onerror="window.__xss=32">`
	xssReason   = `</td></tr><img src=x onerror=window.__xss=33><script>window.__xss=34</script>`
)

// TestWorkflowBrowser: the workflow pages in a real browser render names
// and reasons as text; Replay runs the failed task again and Cancel (after
// its confirmation) cancels the workflow, each landing back on its page.
func TestWorkflowBrowser(t *testing.T) {
	bctx, shots := browser(t)
	b := openSQLite(t)
	srv, insp := dashServer(t, b)
	wf, _ := backend.As[backend.Workflower](b)
	task := func(name, queue string, deps ...backend.Dep) backend.TaskParams {
		return backend.TaskParams{Name: name, Deps: deps, Job: backend.InsertParams{Queue: queue, Type: "report.build", Payload: []byte(`{}`), MaxAttempts: 1}}
	}
	ins, err := wf.WorkflowInsert(t.Context(), backend.WorkflowParams{Name: xssWorkflow, Tasks: []backend.TaskParams{
		task("fetch", "wf-fetch"),
		task(xssTask, "wf-xss", backend.Dep{Task: "fetch"}),
		task("summarise", "wf-sum", backend.Dep{Task: "fetch"}),
		task("publish", "wf-pub", backend.Dep{Task: xssTask}, backend.Dep{Task: "summarise", Policy: backend.DepContinue}),
		task("notify", "wf-notify", backend.Dep{Task: "summarise"}),
	}})
	if err != nil {
		t.Fatal(err)
	}
	endTask(t, b, "wf-fetch", backend.Outcome{Kind: backend.OutcomeDone})
	endTask(t, b, "wf-xss", backend.Outcome{Kind: backend.OutcomeFail, Error: xssReason})
	page := fmt.Sprintf("/workflows/%d", ins.ID)

	ctx := tab(t, bctx)
	for _, p := range []string{"/workflows", page} {
		run(t, ctx, "open "+p, chromedp.Navigate(srv.URL+p), chromedp.WaitReady(chromedp.CSS("body")), chromedp.Sleep(300*time.Millisecond))
		if xss := value(t, ctx, "read window.__xss", chromedp.Evaluate[string](`String(window.__xss)`)); xss != "undefined" {
			t.Errorf("%s: injected script ran: window.__xss = %v", p, xss)
		}
		if n := value(t, ctx, "count injected elements", chromedp.Evaluate[int](`document.querySelectorAll("main script, main img").length`)); n != 0 {
			t.Errorf("%s: %d elements from names or reasons became markup", p, n)
		}
	}
	run(t, ctx, "open the list", chromedp.Navigate(srv.URL+"/workflows"), chromedp.WaitVisible(chromedp.ID("workflows")))
	screenshot(t, ctx, shots, "workflows")
	run(t, ctx, "open the workflow", chromedp.Navigate(srv.URL+page), chromedp.WaitVisible(chromedp.ID("tasks")))
	if rows := value(t, ctx, "count task rows", chromedp.Evaluate[int](`document.querySelectorAll("#tasks tbody tr").length`)); rows != 5 {
		t.Errorf("%d task rows, want 5", rows)
	}
	if h1 := text(t, ctx, "h1"); !strings.Contains(h1, xssWorkflow) || !strings.Contains(h1, "running") {
		t.Errorf("heading %q", h1)
	}
	if reason := text(t, ctx, "#tasks tr:has(.s-failed) td.err"); !strings.Contains(reason, xssReason) {
		t.Errorf("the failed task's reason reads %q, want it verbatim", reason)
	}
	screenshot(t, ctx, shots, "workflow")

	run(t, ctx, "click replay", chromedp.Click(chromedp.CSS(`#tasks form[action$="/replay"] button`)))
	waitFor(t, ctx, "the workflow's page with the flash", `location.pathname === "`+page+`" && document.readyState === "complete" && !!document.querySelector(".flash")`, 15*time.Second)
	if flash := text(t, ctx, ".flash"); !strings.Contains(flash, "Replayed task "+xssTask) {
		t.Errorf("flash after replay: %q", flash)
	}
	if n := value(t, ctx, "count replay buttons", chromedp.Evaluate[int](`document.querySelectorAll('#tasks form[action$="/replay"]').length`)); n != 0 {
		t.Errorf("%d replay buttons after the replay", n)
	}
	if st := taskOf(t, insp, ins.ID, xssTask).State; st != jobq.TaskActive {
		t.Errorf("the replayed task is %s", st)
	}
	screenshot(t, ctx, shots, "workflow-after-replay")

	// Cancel asks first (data-confirm); the test's answer is yes.
	run(t, ctx, "accept confirmations", chromedp.Evaluate[chromedp.Void](`window.confirm = () => true`))
	run(t, ctx, "click cancel", chromedp.Click(chromedp.ID("cancel")))
	waitFor(t, ctx, "the cancelled workflow's page", `document.readyState === "complete" && document.querySelector("#state") && document.querySelector("#state").textContent === "cancelled"`, 15*time.Second)
	if wf, err := insp.Workflow(t.Context(), ins.ID); err != nil || wf.State != jobq.WorkflowCancelled {
		t.Errorf("after cancel: %v", err)
	}
	screenshot(t, ctx, shots, "workflow-cancelled")
}
