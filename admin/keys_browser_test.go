package admin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/jobq/jobq"
)

// TestKeysBrowser: the Keys page in a real browser, on SQLite. Two keys
// of an ordered queue (policy hold) wait for their failed heads: the page
// lists both with head and reason, a key's page shows its jobs in the
// order they were enqueued, Replay puts one head back first in its place,
// and Discard (after its confirmation) lets the other key go on.
func TestKeysBrowser(t *testing.T) {
	bctx, shots := browser(t)
	b := openSQLite(t)
	srv, insp, client := keysServer(t, b)
	if err := insp.SetQueueKeys(t.Context(), "ledger", jobq.KeyRules{Ordered: true, OnFailure: jobq.KeyHold}); err != nil {
		t.Fatal(err)
	}
	// Enqueued in turns, so that one key's IDs are not consecutive.
	var a, c []int64
	for range 3 {
		a = append(a, enqueueKeyed(t, client, "ledger", "acct:1", 1)...)
		c = append(c, enqueueKeyed(t, client, "ledger", "acct:2", 1)...)
	}
	heads := wantClaim(t, b, "ledger", a[0], c[0])
	endRows(t, b, true, heads...)

	ctx := tab(t, bctx)
	run(t, ctx, "open the keys page", chromedp.Navigate(srv.URL+"/keys"), chromedp.WaitVisible(chromedp.ID("held")))
	rows := value(t, ctx, "read held keys", chromedp.Evaluate[[][]string](`Array.from(document.querySelectorAll("#held tbody tr"),
		tr => [tr.cells[0].textContent, tr.cells[5].textContent, tr.cells[6].textContent])`))
	if len(rows) != 2 {
		t.Fatalf("held keys listed %q, want acct:1 and acct:2", rows)
	}
	for _, r := range rows {
		head := map[string]int64{"acct:1": a[0], "acct:2": c[0]}[r[0]]
		if head == 0 || r[1] != fmt.Sprintf("job %d", head) || !strings.HasPrefix(r[2], "charge failed: dial postgres://") || strings.Contains(r[2], "hunter2") {
			t.Errorf("held key shown as %q, want its head job %d and its masked error", r, head)
		}
	}
	screenshot(t, ctx, shots, "keys")

	// A key's page: its jobs in the order they were enqueued, head first.
	run(t, ctx, "open acct:1's page", chromedp.Navigate(srv.URL+"/queues/ledger/keys/acct:1"), chromedp.WaitVisible(chromedp.ID("keyjobs")))
	jobs := value(t, ctx, "read the key's jobs", chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("#keyjobs tbody tr"),
		tr => tr.cells[0].textContent + " " + tr.cells[1].textContent)`))
	if want := []string{idState(a[0], "failed"), idState(a[1], "pending"), idState(a[2], "pending")}; !slices.Equal(jobs, want) {
		t.Errorf("acct:1's page lists %q, want %q", jobs, want)
	}
	screenshot(t, ctx, shots, "key")

	// Replay acct:1's head from the keys page: pending again, first.
	run(t, ctx, "open the keys page", chromedp.Navigate(srv.URL+"/keys"), chromedp.WaitVisible(chromedp.ID("held")))
	clickHeld(t, ctx, "acct:1", "replay", fmt.Sprintf("Replayed job %d", a[0]))
	if info, err := insp.Job(t.Context(), a[0]); err != nil || info.State != jobq.StatePending || info.Live.Attempts != 0 || info.Live.Turn != heads[0].Turn {
		t.Fatalf("acct:1's head after the replay: %+v, %v; want pending, no attempts, turn %d", info, err, heads[0].Turn)
	}
	wantHeld(t, insp, "acct:2")
	// acct:2 is still held: the claim gives acct:1's head alone, not the
	// job behind it.
	wantClaim(t, b, "ledger", a[0])

	// Discard acct:2's head: gone from the failed jobs, the next one runs.
	run(t, ctx, "accept confirmations", chromedp.Evaluate[chromedp.Void](`window.confirm = () => true`))
	clickHeld(t, ctx, "acct:2", "purge", "Purged 1 failed job.")
	if _, err := insp.Failed(t.Context(), c[0]); !errors.Is(err, jobq.ErrNotFound) {
		t.Fatalf("acct:2's head after the discard: %v, want it gone from the failed jobs", err)
	}
	if f, err := insp.FailedPage(t.Context(), jobq.FailedFilter{Queue: "ledger"}, 10, 0); err != nil || len(f) != 0 {
		t.Fatalf("failed jobs of ledger after the discard: %d, %v; want none", len(f), err)
	}
	wantHeld(t, insp)
	wantClaim(t, b, "ledger", c[1])
	screenshot(t, ctx, shots, "keys-after-discard")
}

// idState is a key page's row as its first two cells read.
func idState(id int64, state string) string { return strconv.FormatInt(id, 10) + " " + state }

// clickHeld clicks the button of action (replay or purge) in the held
// keys' row of key and waits for the keys page to come back with flash.
func clickHeld(t *testing.T, ctx context.Context, key, action, flash string) {
	t.Helper()
	sel := fmt.Sprintf(`#held tr:has(a[href$="/keys/%s"]) form[action$="/%s"] button`, key, action)
	// The page being left is marked, so that only the new one counts
	// (the old one may be the keys page with a flash too).
	run(t, ctx, action+" "+key, chromedp.Evaluate[chromedp.Void](`window.__left = true`), chromedp.Click(chromedp.CSS(sel)))
	waitFor(t, ctx, "the keys page with the flash", `!window.__left && location.pathname === "/keys" && document.readyState === "complete" && !!document.querySelector(".flash")`, 15*time.Second)
	if got := text(t, ctx, ".flash"); !strings.Contains(got, flash) {
		t.Errorf("flash after %s of %s: %q, want %q", action, key, got, flash)
	}
}

// wantHeld fails t unless the store's held keys are exactly keys, of
// queue ledger.
func wantHeld(t *testing.T, insp *jobq.Inspector, keys ...string) {
	t.Helper()
	held, err := insp.Keys(t.Context(), jobq.KeyListParams{Held: true, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, k := range held {
		got = append(got, k.Key)
	}
	if !slices.Equal(got, keys) {
		t.Fatalf("held keys %q, want %q", got, keys)
	}
}
