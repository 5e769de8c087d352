package backendtest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/jobq/jobq/backend"
)

// errorTexts are attempts' error texts that a store cannot hold as they are,
// beside clean ones that must be stored unchanged. Each is sent as a retry
// and as a fail.
func errorTexts() []struct{ name, raw string } {
	// The http job cuts a response body at 512 bytes, which can split a
	// multi-byte character: here "é" (0xC3 0xA9) loses its second byte.
	body := strings.Repeat("a", 511) + "é"
	// A panic message and a long stack: the head names the panic, the tail
	// holds the innermost frames; both must survive the cut.
	var stack strings.Builder
	stack.WriteString("panic: runtime error: index out of range [7] with length 3 [HEAD-MARK]\n\ngoroutine 42 [running]:\n")
	for i := 0; stack.Len() < 1<<20; i++ {
		fmt.Fprintf(&stack, "example.com/app/handlers.(*Mailer).send%d(...)\n\t/src/app/handlers/mailer.go:%d +0x%x\n", i, 100+i, i)
	}
	stack.WriteString("created by example.com/app.main in goroutine 1 [TAIL-MARK]")
	return []struct{ name, raw string }{
		{"cut UTF-8", "http 502: " + body[:len(body)-1]},
		{"invalid byte", "bad \xff\xfe byte"},
		{"NUL", "before\x00after\x00"},
		{"1 MiB", stack.String()},
		{"1 MiB with NUL and cut UTF-8", "\x00" + stack.String()[:1<<20] + "é"[:1]},
		{"clean multi-byte", "échec: 失败 ✓"},
		{"clean at the limit", strings.Repeat("x", backend.MaxErrorBytes-len("✓")) + "✓"},
		{"empty", ""},
	}
}

// testErrorText: any error text is accepted in a JobComplete batch, mixed
// with ordinary outcomes, and stored as backend.ErrorText of it: valid
// UTF-8, no NUL, at most MaxErrorBytes, head and tail kept.
func testErrorText(t *testing.T, h Harness) {
	// wantStored asserts that stored is the normalised form of raw.
	wantStored := func(t *testing.T, what, stored, raw string) {
		t.Helper()
		if !utf8.ValidString(stored) || strings.IndexByte(stored, 0) >= 0 || len(stored) > backend.MaxErrorBytes {
			t.Errorf("%s: stored text (%d bytes) is not valid UTF-8 without NUL of at most %d bytes", what, len(stored), backend.MaxErrorBytes)
		}
		if want := backend.ErrorText(raw); stored != want {
			t.Errorf("%s: stored text (%d bytes, %q…) differs from ErrorText of the raw text (%d bytes, %q…)",
				what, len(stored), shortText(stored), len(want), shortText(want))
		}
		if len(raw) > backend.MaxErrorBytes && cleanPrefix(raw) {
			head, tail := raw[:200], raw[len(raw)-200:]
			if !strings.HasPrefix(stored, head) || !strings.HasSuffix(stored, tail) {
				t.Errorf("%s: the long text lost its head or its tail (stored %d bytes: %q … %q)", what, len(stored), shortText(stored), stored[max(0, len(stored)-60):])
			}
		}
	}

	parallel(t, h, "MixedBatch", func(t *testing.T, b backend.Backend) {
		texts := errorTexts()
		// Per text: one job retried, one failed; then three ordinary jobs
		// and one job whose outcome will be stale.
		n := 2*len(texts) + 4
		ps := make([]backend.InsertParams, n)
		for i := range ps {
			ps[i] = job("q", "t")
		}
		ids := insertIDs(t, b, ps...)
		rows := claim(t, b, n, longLease, "q")
		if got := sortedIDs(rows); !slices.Equal(got, ids) {
			t.Fatalf("claimed %v, want %v", got, ids)
		}
		ref := map[int64]backend.JobRef{}
		for _, r := range rows {
			ref[r.ID] = r.Ref()
		}
		var outs []backend.Outcome
		for i, tx := range texts {
			outs = append(outs, retry(ref[ids[2*i]], 0, tx.raw), fail(ref[ids[2*i+1]], tx.raw))
		}
		k := 2 * len(texts)
		stale := ref[ids[k+3]]
		stale.Token++
		// Ordinary outcomes around the bad ones, and a stale one with a bad
		// text: the fence still skips it.
		outs = append([]backend.Outcome{done(ref[ids[k]])}, outs...)
		outs = append(outs, retry(ref[ids[k+1]], 0, "ordinary"), fail(stale, "stale\x00\xff"), fail(ref[ids[k+2]], "ordinary"))
		res, err := b.JobComplete(t.Context(), backend.CompleteParams{Outcomes: outs})
		if err != nil {
			t.Fatalf("JobComplete with unusual error texts: %v; want every outcome applied", err)
		}
		if !slices.Equal(res.Stale, []backend.JobRef{stale}) {
			t.Fatalf("Stale = %v, want [%v]", res.Stale, stale)
		}

		gone(t, b, ids[k])
		if row := wantPendingNow(t, b, ids[k+1], 1); row.LastError != "ordinary" {
			t.Errorf("ordinary retry: LastError %q", row.LastError)
		}
		if f := failedByJob(t, b, ids[k+2]); f.Error != "ordinary" {
			t.Errorf("ordinary fail: error %q", f.Error)
		}
		wantStatus(t, b, ids[k+3], backend.StateReserved, 1)
		for i, tx := range texts {
			row := wantPendingNow(t, b, ids[2*i], 1)
			wantStored(t, "retry "+tx.name+": JobGet LastError", row.LastError, tx.raw)
			gone(t, b, ids[2*i+1])
			f := failedByJob(t, b, ids[2*i+1])
			wantStored(t, "fail "+tx.name+": FailedList Error", f.Error, tx.raw)
			g, err := b.FailedGet(t.Context(), f.JobID)
			if err != nil {
				t.Fatalf("FailedGet(%d): %v", f.JobID, err)
			}
			wantStored(t, "fail "+tx.name+": FailedGet Error", g.Error, tx.raw)
		}
		wantStats(t, b, backend.QueueStats{Queue: "q", Pending: int64(len(texts) + 1), Reserved: 1, Failed: int64(len(texts) + 1)})

		// The next attempt of each retried job reads its normalised text.
		again := claim(t, b, n, longLease, "q")
		byID := map[int64]*backend.JobRow{}
		for _, r := range again {
			byID[r.ID] = r
		}
		if len(again) != len(texts)+1 {
			t.Fatalf("claimed %d retried jobs, want %d", len(again), len(texts)+1)
		}
		for i, tx := range texts {
			r := byID[ids[2*i]]
			if r == nil || r.Attempts != 2 {
				t.Fatalf("retried job %d not claimed again with attempts 2 (got %+v)", ids[2*i], r)
			}
			wantStored(t, "retry "+tx.name+": claimed LastError", r.LastError, tx.raw)
		}
	})
}

// cleanPrefix reports whether the first 200 bytes of s are text a store
// keeps as is (so the stored head must start with them).
func cleanPrefix(s string) bool {
	return utf8.ValidString(s[:200]) && strings.IndexByte(s[:200], 0) < 0
}

// shortText shows the start of a long text in a failure message.
func shortText(s string) string {
	if len(s) > 60 {
		return s[:60]
	}
	return s
}
