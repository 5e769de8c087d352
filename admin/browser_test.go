package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/storetest"
)

// The dashboard in a real browser: headless Chromium (Debian's chromium
// package) driven over the DevTools protocol, against the real handler on
// a real SQLite store. Screenshots go to $JOBQ_SCREENSHOTS when set (kept),
// otherwise to the test's temporary folder.

// browser starts headless Chromium for t, with extra options after the
// usual ones, and returns a context for a new tab, and the folder for
// screenshots. Without Chromium the test is skipped, except under CI=true
// where .ci/run installs it.
func browser(t *testing.T, extra ...chromedp.ExecAllocatorOption) (context.Context, string) {
	t.Helper()
	var bin string
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("chromium not found on PATH: .ci/run installs Debian's chromium package")
		}
		t.Skip("chromium not found on PATH: install Debian's chromium package to run the browser tests")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin),
		chromedp.NoSandbox, // we run as root in CI
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1280, 900),
	)
	opts = append(opts, extra...)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancelBrowser()
		cancelAlloc()
	})
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start chromium %s: %v", bin, err)
	}
	dir := os.Getenv("JOBQ_SCREENSHOTS")
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("screenshot folder: %v", err)
	}
	return bctx, dir
}

// tab opens a new tab in the browser, bounded by a minute.
func tab(t *testing.T, bctx context.Context) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(bctx)
	ctx, cancelTime := context.WithTimeout(ctx, time.Minute)
	t.Cleanup(func() {
		cancelTime()
		cancel()
	})
	return ctx
}

// run runs browser steps, failing t with what was being done.
func run(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("browser: %s: %v", what, err)
	}
}

// value runs one browser action and returns its value.
func value[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("browser: %s: %v", what, err)
	}
	return v
}

// text is the text content of the first element matching the CSS
// selector sel.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	return value(t, ctx, "read "+sel, chromedp.TextContent(chromedp.CSS(sel)))
}

// screenshot saves the whole page as dir/name.png.
func screenshot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	png := value(t, ctx, "screenshot "+name, chromedp.FullScreenshot(100))
	p := filepath.Join(dir, name+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatalf("save screenshot: %v", err)
	}
	t.Logf("screenshot: %s", p)
}

// waitFor evaluates a JavaScript condition until it is true. Errors
// while the page navigates (the context it ran in is gone) are retried.
func waitFor(t *testing.T, ctx context.Context, what, cond string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](cond))
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("browser: waited %s for %s (last error: %v)", within, what, err)
		}
		run(t, ctx, "pause", chromedp.Sleep(100*time.Millisecond))
	}
}

func TestBrowser(t *testing.T) {
	bctx, shots := browser(t)
	b := openSQLite(t)
	srv, insp := dashServer(t, b)

	// Known numbers: 17 pending and 4 scheduled in mail, 2 pending in
	// reports, 3 failed in billing.
	insertJobs(t, b, "mail", 17, `{"to":"ann@example.com"}`, 0)
	insertJobs(t, b, "mail", 4, `{}`, time.Hour)
	insertJobs(t, b, "reports", 2, `{}`, 0)
	failJobs(t, b, "billing", 3, `{"invoice":42,"customer":{"id":7,"plan":"pro"},"lines":[{"sku":"A-1","qty":2}]}`,
		"charge invoice 42: card declined (stripe: insufficient_funds)")

	t.Run("overview counts, live refresh", func(t *testing.T) {
		ctx := tab(t, bctx)
		run(t, ctx, "open overview", chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#chart svg")))
		want := map[string]string{`[data-total="pending"]`: "19", `[data-total="scheduled"]`: "4", `[data-total="failed"]`: "3",
			`tr[data-queue="mail"] [data-k="pending"]`: "17", `tr[data-queue="billing"] [data-k="failed"]`: "3"}
		for sel, n := range want {
			if got := text(t, ctx, sel); strings.TrimSpace(got) != n {
				t.Errorf("%s shows %q, want %s", sel, got, n)
			}
		}
		screenshot(t, ctx, shots, "overview")
		run(t, ctx, "phone width", chromedp.EmulateViewport(390, 844), chromedp.Sleep(300*time.Millisecond))
		screenshot(t, ctx, shots, "overview-phone")

		// New jobs show up without a reload: the page polls overview.json.
		insertJobs(t, b, "mail", 5, `{}`, 0)
		waitFor(t, ctx, "the live count", `document.querySelector('[data-total="pending"]').textContent === "24"`, 20*time.Second)
		if got := text(t, ctx, `tr[data-queue="mail"] [data-k="pending"]`); got != "22" {
			t.Errorf("live pending count of mail %q, want 22", got)
		}
		// After the refresh, a queue with due jobs says how long they waited.
		if lag := text(t, ctx, `tr[data-queue="mail"] [data-k="lag"]`); lag != "now" && !strings.HasSuffix(lag, " ago") {
			t.Errorf("mail's waiting time reads %q, want now or … ago", lag)
		}
	})

	t.Run("failed list screenshot", func(t *testing.T) {
		ctx := tab(t, bctx)
		run(t, ctx, "open failed list", chromedp.Navigate(srv.URL+"/failed"), chromedp.WaitVisible(chromedp.ID("failed")))
		rows := value(t, ctx, "count rows", chromedp.Evaluate[int](`document.querySelectorAll("#failed tbody tr").length`))
		if rows != 3 {
			t.Errorf("failed list shows %d rows, want 3", rows)
		}
		screenshot(t, ctx, shots, "failed-list")
	})

	t.Run("replay a failed job", func(t *testing.T) {
		fj, err := insp.FailedPage(t.Context(), jobq.FailedFilter{Queue: "billing"}, 1, 0)
		if err != nil || len(fj) != 1 {
			t.Fatalf("failed page: %v %d", err, len(fj))
		}
		ctx := tab(t, bctx)
		run(t, ctx, "open failed job", chromedp.Navigate(fmt.Sprintf("%s/failed/%d", srv.URL, fj[0].JobID)), chromedp.WaitVisible(chromedp.ID("replay")))
		screenshot(t, ctx, shots, "failed-job")
		run(t, ctx, "click replay", chromedp.Click(chromedp.ID("replay")))
		waitFor(t, ctx, "the job's page", `location.pathname === "/jobs/`+strconv.FormatInt(fj[0].JobID, 10)+`" && document.readyState === "complete"`, 15*time.Second)
		screenshot(t, ctx, shots, "job-after-replay")
		if h1 := text(t, ctx, "h1"); !strings.Contains(h1, "pending") {
			t.Errorf("after replay the page shows %q, want the job pending", h1)
		}
		if _, err := insp.Failed(t.Context(), fj[0].JobID); err == nil {
			t.Errorf("failed job %d still in the failed jobs after replay", fj[0].JobID)
		}
		rows, err := insp.JobsPage(t.Context(), jobq.StatePending, jobq.JobFilter{Queue: "billing"}, 10, 0)
		if err != nil || len(rows) != 1 || rows[0].ID != fj[0].JobID || rows[0].Attempts != 0 {
			t.Fatalf("billing's pending jobs after replay: %v (err %v), want job %d with no attempts", rows, err, fj[0].JobID)
		}
	})

	t.Run("XSS payload renders as text", func(t *testing.T) { browserXSS(t, bctx, b, srv, insp) })
	t.Run("cross-site form POST refused", func(t *testing.T) { browserCrossSite(t, bctx, srv, insp) })
}

// xssType is a job type full of markup and a javascript: URL; types are
// free text, and the type shows in links and form fields.
const xssType = `javascript:window.__xss=20//"><img src=x onerror="window.__xss=21">`

// xssPayload is JSON whose strings try every way out of the text they are
// shown in: tags, event handlers, javascript: URLs, template syntax, and
// closing the <pre> or a <script>. Each would set window.__xss.
const xssPayload = `{"script":"<script>window.__xss=1</script>",` +
	`"img":"<img src=x onerror=window.__xss=2>",` +
	`"attr":"\"><svg onload=window.__xss=3>",` +
	`"url":"javascript:window.__xss=4",` +
	`"template":"{{.}}{{template \"layout.html\"}}",` +
	`"close":"</script><script>window.__xss=5</script>",` +
	`"pre":"</pre><script>window.__xss=6</script>",` +
	`"frame":"<iframe srcdoc='<script>parent.__xss=7</script>'></iframe>",` +
	`"polyglot":"jaVasCript:/*-/*\u0060/*\\\u0060/*'/*\"/**/(/* */oNcliCk=window.__xss=8 )//%0D%0A%0d%0a//</stYle/</titLe/</teXtarEa/</scRipt/--!>\\x3csVg/<sVg/oNloAd=window.__xss=9//>\\x3e"}`

func browserXSS(t *testing.T, bctx context.Context, b backend.Backend, srv *httptest.Server, insp *jobq.Inspector) {
	md := map[string]string{"trace": `<script>window.__xss=10</script>`, "link": "javascript:window.__xss=11"}
	if _, err := b.JobInsertMany(t.Context(), []backend.InsertParams{{Queue: "xss", Type: xssType, Payload: []byte(xssPayload), MaxAttempts: 1, Metadata: md}}); err != nil {
		t.Fatalf("insert: %v", err)
	}
	failAll(t, b, "xss", 1, `</pre><img src=x onerror=window.__xss=12><script>window.__xss=13</script>`)
	fj, err := insp.FailedPage(t.Context(), jobq.FailedFilter{Queue: "xss"}, 1, 0)
	if err != nil || len(fj) != 1 {
		t.Fatalf("failed page: %v", err)
	}
	var wantPayload bytes.Buffer
	if err := json.Indent(&wantPayload, []byte(xssPayload), "", "  "); err != nil {
		t.Fatalf("test payload is not JSON: %v", err)
	}
	// A kept completed job whose result is the same markup.
	kept := storetest.KeptWithResult(t, b, "xss-done", []byte(xssPayload))
	// A running job whose progress message is markup.
	running := storetest.RunningWithProgress(t, b, "xss-run", 37, storetest.ProgressMessage)

	ctx := tab(t, bctx)
	pages := []string{
		fmt.Sprintf("/failed/%d", fj[0].JobID),
		fmt.Sprintf("/jobs/%d", kept),
		fmt.Sprintf("/jobs/%d", running),
		"/queues/xss-run?state=reserved",
		"/failed",
		"/failed?queue=xss&type=" + strings.NewReplacer("%", "%25", "&", "%26", "#", "%23", "+", "%2B", " ", "%20").Replace(xssType),
		"/",
	}
	for _, p := range pages {
		run(t, ctx, "open "+p, chromedp.Navigate(srv.URL+p), chromedp.WaitReady(chromedp.CSS("body")),
			// Let anything injected run: onload and onerror fire after load.
			chromedp.Sleep(300*time.Millisecond))
		if xss := value(t, ctx, "read window.__xss", chromedp.Evaluate[string](`String(window.__xss)`)); xss != "undefined" {
			t.Errorf("%s: injected script ran: window.__xss = %v", p, xss)
		}
		// The chart's svg is the dashboard's own; nothing else may be markup.
		injected := value(t, ctx, "count injected elements", chromedp.Evaluate[int](`document.querySelectorAll("main script, main img, main iframe, main svg:not(#chart svg)").length`))
		if injected != 0 {
			t.Errorf("%s: %d elements from the payload became markup", p, injected)
		}
	}
	run(t, ctx, "open the failed job", chromedp.Navigate(srv.URL+fmt.Sprintf("/failed/%d", fj[0].JobID)))
	payload, errText, typ := text(t, ctx, "#payload"), text(t, ctx, "#error"), text(t, ctx, "dl.facts dd.mono")
	if payload != wantPayload.String() {
		t.Errorf("payload shown as\n%s\nwant verbatim\n%s", payload, wantPayload.String())
	}
	if errText != fj[0].Error || typ != xssType {
		t.Errorf("error shown as %q, type as %q: want them verbatim", errText, typ)
	}
	run(t, ctx, "open the kept job", chromedp.Navigate(srv.URL+fmt.Sprintf("/jobs/%d", kept)))
	if result := text(t, ctx, "#result"); result != wantPayload.String() {
		t.Errorf("result shown as\n%s\nwant verbatim\n%s", result, wantPayload.String())
	}
	run(t, ctx, "open the running job", chromedp.Navigate(srv.URL+fmt.Sprintf("/jobs/%d", running)))
	if msg := text(t, ctx, "#progress .msg"); msg != storetest.ProgressMessage {
		t.Errorf("progress message shown as %q, want it verbatim", msg)
	}
	if bar := value(t, ctx, "read the progress bar", chromedp.Evaluate[int](`document.querySelector("#progress progress").value`)); bar != 37 {
		t.Errorf("progress bar at %d, want 37", bar)
	}
}

// browserCrossSite loads a page from another site (localhost, while the
// dashboard is on 127.0.0.1) that auto-submits forms to the purge and
// replay routes; both must be refused and change nothing.
func browserCrossSite(t *testing.T, bctx context.Context, srv *httptest.Server, insp *jobq.Inspector) {
	before := statsOfQueue(t, insp, "billing").Failed
	if before == 0 {
		t.Fatal("no failed jobs to protect")
	}
	fj, err := insp.FailedPage(t.Context(), jobq.FailedFilter{Queue: "billing"}, 1, 0)
	if err != nil || len(fj) != 1 {
		t.Fatalf("failed page: %v", err)
	}
	targets := map[string]string{
		"purge all": `<form id="f" method="post" action="` + srv.URL + `/failed/purge"><input name="all" value="1"></form>`,
		"replay":    `<form id="f" method="post" action="` + srv.URL + `/failed/` + strconv.FormatInt(fj[0].JobID, 10) + `/replay"></form>`,
	}
	for name, form := range targets {
		evil := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, `<!doctype html><title>cute cats</title>`+form+`<script>document.getElementById("f").submit()</script>`)
		}))
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		evil.Listener = l
		evil.Start()
		t.Cleanup(evil.Close)
		evilURL := "http://localhost:" + strconv.Itoa(l.Addr().(*net.TCPAddr).Port) + "/"

		ctx := tab(t, bctx)
		run(t, ctx, name+": open the other site's page", chromedp.Navigate(evilURL))
		waitFor(t, ctx, "the form's answer", `location.href.startsWith(`+strconv.Quote(srv.URL)+`) && document.readyState === "complete"`, 15*time.Second)
		if h1 := text(t, ctx, "h1"); h1 != "Cross-origin request refused" {
			t.Errorf("%s: the form's answer reads %q, want the refusal", name, h1)
		}
		if got := statsOfQueue(t, insp, "billing").Failed; got != before {
			t.Fatalf("%s from another site: billing has %d failed jobs, want %d unchanged", name, got, before)
		}
		if _, err := insp.Failed(t.Context(), fj[0].JobID); err != nil {
			t.Fatalf("%s from another site: failed job %d: %v", name, fj[0].JobID, err)
		}
	}
}
