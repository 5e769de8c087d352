package jobq_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
)

// TestOutcomeLogs: every attempt's outcome, and every job the sweep
// rescued, is one log line at its level with the job's id, type, queue,
// attempt (and duration, error, retry delay where they apply), and no
// payload or metadata, nor a URL's password in an error, ever reaches the
// log.
func TestOutcomeLogs(t *testing.T) {
	const secret = "hunter2-secret"
	b := newMemory(t, nil)
	reg := jobq.NewRegistry()
	reg.HandleFunc("ok", func(context.Context, *jobq.Job) error { return nil })
	reg.HandleFunc("flaky", func(_ context.Context, j *jobq.Job) error {
		if j.Attempt == 1 {
			return errors.New("upstream 503")
		}
		return nil
	})
	// The error quotes a URL with its password, as a client library's
	// error may: the log masks it.
	reg.HandleFunc("bad", func(context.Context, *jobq.Job) error {
		return jobq.Permanent(errors.New("card declined by https://pay:" + secret + "@psp.example/charge"))
	})
	c := mustClient(t, b, jobq.ClientConfig{})
	ctx := t.Context()
	payload := map[string]string{"password": secret}
	meta := jobq.Metadata(map[string]string{"token": secret})
	enqueue := func(typ string, opts ...jobq.EnqueueOption) int64 {
		t.Helper()
		id, err := c.Enqueue(ctx, typ, payload, append(opts, meta)...)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	ok, flaky, bad := enqueue("ok"), enqueue("flaky"), enqueue("bad", jobq.Queue("billing"))
	// Two jobs held by a worker that died, on a queue no worker serves:
	// the sweep puts one back to pending (attempts left) and moves the
	// other to failed jobs (none left).
	lost, spent := enqueue("ok", jobq.Queue("lost")), enqueue("ok", jobq.Queue("lost"), jobq.MaxAttempts(1))
	if rows, err := b.JobClaim(ctx, backend.ClaimParams{Queues: []string{"lost"}, Max: 2, Lease: 20 * time.Millisecond}); err != nil || len(rows) != 2 {
		t.Fatalf("claim for the dead worker: %d rows, %v", len(rows), err)
	}

	cfg := fastConfig()
	cfg.Queues = []string{"default", "billing"}
	buf := runLogged(t, b, reg, cfg, 4, func(log string) bool { return strings.Count(log, "lease expired") == 2 })

	type line struct {
		Level, Msg, Type, Queue, Error string
		JobID                          int64  `json:"job_id"`
		Attempt                        int    `json:"attempt"`
		MaxAttempts                    int    `json:"max_attempts"`
		Duration                       *int64 `json:"duration"`
		RetryIn                        *int64 `json:"retry_in"`
	}
	var lines []line
	for _, l := range jsonLines[line](t, buf.String()) {
		if l.JobID != 0 {
			lines = append(lines, l)
		}
	}
	if strings.Contains(buf.String(), secret) {
		t.Fatalf("a payload or metadata value reached the log:\n%s", buf.String())
	}
	want := []struct {
		id                int64
		typ, queue, level string
		attempt           int
		msg, err          string
		duration, retryIn bool
	}{
		{ok, "ok", "default", "DEBUG", 1, "job done", "", true, false},
		{flaky, "flaky", "default", "WARN", 1, "job failed; will retry", "upstream 503", true, true},
		{flaky, "flaky", "default", "DEBUG", 2, "job done", "", true, false},
		{bad, "bad", "billing", "ERROR", 1, "job failed; moved to failed jobs", "card declined by https://pay:***@psp.example/charge", true, false},
		{lost, "ok", "lost", "WARN", 1, "job's lease expired; back to pending", "", false, false},
		{spent, "ok", "lost", "ERROR", 1, "job's lease expired with its attempts spent; moved to failed jobs", "", false, false},
	}
	if len(lines) != len(want) {
		t.Fatalf("%d outcome lines, want %d:\n%s", len(lines), len(want), buf.String())
	}
	for _, w := range want {
		found := false
		for _, l := range lines {
			if l.JobID != w.id || l.Attempt != w.attempt || l.Msg != w.msg {
				continue
			}
			found = true
			if l.Level != w.level || l.Type != w.typ || l.Queue != w.queue || !strings.Contains(l.Error, w.err) ||
				(l.Duration != nil) != w.duration || (l.RetryIn != nil) != w.retryIn {
				t.Errorf("line for job %d attempt %d = %+v; want level %s type %s queue %s error %q", w.id, w.attempt, l, w.level, w.typ, w.queue, w.err)
			}
			if w.err != "" && l.MaxAttempts != 3 {
				t.Errorf("line for job %d: max_attempts %d, want 3", w.id, l.MaxAttempts)
			}
		}
		if !found {
			t.Errorf("no %q line for job %d attempt %d:\n%s", w.msg, w.id, w.attempt, buf.String())
		}
	}
}

// TestErrorTextCutMasked: an error longer than the stored limit, quoting a
// URL with a password where the cut falls (in the kept head, or where the
// kept tail starts), is stored and logged with no part of the password:
// it is masked before the cut, which would part it from its '@'.
func TestErrorTextCutMasked(t *testing.T) {
	const secret = "hunter2secretpass"
	url := "https://pay:" + secret + "@psp.example/charge"
	at := strings.Index(url, secret) + len(secret)/2 // the cut falls here
	cases := map[string]string{
		"head": strings.Repeat("h", backend.ErrorHeadBytes-at) + url + strings.Repeat("t", backend.MaxErrorBytes),
	}
	// The kept tail starts inside the password for one length of what
	// follows the URL: find it.
	for n := range backend.MaxErrorBytes {
		raw := strings.Repeat("h", backend.MaxErrorBytes) + url + strings.Repeat("t", n)
		if cut := backend.ErrorText(raw); strings.Contains(cut, secret[len(secret)-3:]) && !strings.Contains(cut, "pay:") {
			cases["tail"] = raw
			break
		}
	}
	for which, raw := range cases {
		// Cut unmasked, part of the password shows: the case is real.
		if cut := backend.ErrorText(raw); !strings.Contains(cut, secret[:3]) && !strings.Contains(cut, secret[len(secret)-3:]) {
			t.Fatalf("%s: the cut keeps no part of the password; the test misses its case", which)
		}
	}
	if len(cases) != 2 {
		t.Fatal("no length puts the tail's start inside the password")
	}
	b := newMemory(t, nil)
	reg := jobq.NewRegistry()
	reg.HandleFunc("bad", func(_ context.Context, j *jobq.Job) error {
		var which string
		if err := json.Unmarshal(j.Payload, &which); err != nil {
			return err
		}
		return errors.New(cases[which])
	})
	c := mustClient(t, b, jobq.ClientConfig{})
	for which := range cases {
		if _, err := c.Enqueue(t.Context(), "bad", which, jobq.MaxAttempts(1)); err != nil {
			t.Fatal(err)
		}
	}
	buf := runLogged(t, b, reg, fastConfig(), 2, nil)

	failed, err := jobq.NewInspector(b).FailedPage(t.Context(), jobq.FailedFilter{}, 10, 0)
	if err != nil || len(failed) != 2 {
		t.Fatalf("failed jobs: %d, %v; want 2", len(failed), err)
	}
	for _, f := range failed {
		if !strings.Contains(f.Error, "bytes cut") {
			t.Errorf("stored error of %d bytes was not cut", len(f.Error))
		}
		for _, part := range []string{secret[:len(secret)/2], secret[len(secret)/2:]} {
			if strings.Contains(f.Error, part) {
				t.Errorf("stored error holds %q of the password", part)
			}
		}
	}
	for _, part := range []string{secret[:len(secret)/2], secret[len(secret)/2:]} {
		if strings.Contains(buf.String(), part) {
			t.Errorf("the log holds %q of the password", part)
		}
	}
}
