package backendtest

import (
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/jobq/jobq/backend"
)

// wantMetadata asserts that got holds exactly want; a want of nil (or an
// empty map) means the job has none, which reads back as nil.
func wantMetadata(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	if len(want) == 0 {
		if got != nil {
			t.Errorf("%s: metadata %v (non-nil: %t), want nil", what, got, got != nil)
		}
		return
	}
	if !maps.Equal(got, want) {
		t.Errorf("%s: metadata %v, want %v", what, got, want)
	}
}

// traced is metadata as a tracer and a user would set it: non-ASCII text and
// an empty value included.
func traced() map[string]string {
	return map[string]string{
		"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"tenant":      "acme",
		"note":        "ünïcødé ✓ 日本",
		"empty":       "",
	}
}

// withMetadata returns job(queue, typ) carrying md.
func withMetadata(queue, typ string, md map[string]string) backend.InsertParams {
	p := job(queue, typ)
	p.Metadata = md
	return p
}

// fullMetadata is metadata at both limits: MaxMetadataKeys keys whose keys
// and values add up to exactly MaxMetadataBytes, one key of
// MaxMetadataKeyBytes among them.
func fullMetadata() map[string]string {
	m := map[string]string{strings.Repeat("k", backend.MaxMetadataKeyBytes): ""}
	size := backend.MaxMetadataKeyBytes
	for i := 1; i < backend.MaxMetadataKeys; i++ {
		k := fmt.Sprintf("key%02d", i)
		m[k] = ""
		size += len(k)
	}
	m["key01"] = strings.Repeat("v", backend.MaxMetadataBytes-size)
	return m
}

// testMetadata: a job's metadata is stored at insert and travels with it
// through claims, retries, failed_jobs and replay; bad metadata refuses the
// whole batch.
func testMetadata(t *testing.T, h Harness) {
	parallel(t, h, "InsertGetClaim", func(t *testing.T, b backend.Backend) {
		md, full := traced(), fullMetadata()
		ids := insertIDs(t, b,
			withMetadata("q", "t", md),
			withMetadata("q", "t", nil),
			withMetadata("q", "t", map[string]string{}),
			withMetadata("q", "t", full))
		want := []map[string]string{md, nil, nil, full}
		for i, id := range ids {
			wantMetadata(t, fmt.Sprintf("JobGet(%d) of item %d", id, i), get(t, b, id).Metadata, want[i])
		}
		rows := claim(t, b, 10, longLease, "q")
		if len(rows) != len(ids) {
			t.Fatalf("claimed %d jobs, want %d", len(rows), len(ids))
		}
		for _, r := range rows {
			for i, id := range ids {
				if r.ID == id {
					wantMetadata(t, fmt.Sprintf("claimed job %d (item %d)", id, i), r.Metadata, want[i])
				}
			}
		}
	})

	parallel(t, h, "CallerCannotChangeStored", func(t *testing.T, b backend.Backend) {
		md := traced()
		id := insertOne(t, b, withMetadata("q", "t", md))
		// scribble changes a map the backend handed out (if it did).
		scribble := func(m map[string]string, by string) {
			if m != nil {
				m["tenant"] = "changed after " + by
				m["added"] = by
				delete(m, "traceparent")
			}
		}
		scribble(md, "insert")
		got := get(t, b, id)
		wantMetadata(t, "JobGet after the caller changed its map", got.Metadata, traced())
		scribble(got.Metadata, "get")
		r := claimOne(t, b, "q")
		wantMetadata(t, "claim after the caller changed JobGet's map", r.Metadata, traced())
		scribble(r.Metadata, "claim")
		wantMetadata(t, "JobGet after the caller changed the claimed map", get(t, b, id).Metadata, traced())
		completeFresh(t, b, fail(r.Ref(), "boom"))
		f := failedByJob(t, b, id)
		scribble(f.Metadata, "list")
		g, err := b.FailedGet(t.Context(), f.JobID)
		if err != nil {
			t.Fatalf("FailedGet(%d): %v", f.JobID, err)
		}
		wantMetadata(t, "FailedGet after the caller changed FailedList's map", g.Metadata, traced())
	})

	parallel(t, h, "RetryKeeps", func(t *testing.T, b backend.Backend) {
		id := insertOne(t, b, withMetadata("q", "t", traced()))
		completeFresh(t, b, retry(claimOne(t, b, "q").Ref(), 0, "again"))
		wantMetadata(t, "JobGet after retry", wantPendingNow(t, b, id, 1).Metadata, traced())
		r := claimOne(t, b, "q")
		if r.ID != id || r.Attempts != 2 {
			t.Fatalf("second claim: job %d attempts %d, want job %d attempts 2", r.ID, r.Attempts, id)
		}
		wantMetadata(t, "second claim", r.Metadata, traced())
	})

	parallel(t, h, "FailedKeeps", func(t *testing.T, b backend.Backend) {
		ids := insertIDs(t, b, withMetadata("q", "t", traced()), withMetadata("q", "t", nil))
		rows := claim(t, b, 2, longLease, "q")
		if len(rows) != 2 {
			t.Fatalf("claimed %d jobs, want 2", len(rows))
		}
		completeFresh(t, b, fail(rows[0].Ref(), "boom"), fail(rows[1].Ref(), "boom"))
		want := map[int64]map[string]string{ids[0]: traced(), ids[1]: nil}
		for id, md := range want {
			f := failedByJob(t, b, id)
			wantMetadata(t, fmt.Sprintf("FailedList row of job %d", id), f.Metadata, md)
			g, err := b.FailedGet(t.Context(), f.JobID)
			if err != nil {
				t.Fatalf("FailedGet(%d): %v", f.JobID, err)
			}
			wantMetadata(t, fmt.Sprintf("FailedGet row of job %d", id), g.Metadata, md)
		}
	})

	parallel(t, h, "SweptToFailedKeeps", func(t *testing.T, b backend.Backend) {
		p := withMetadata("q", "t", traced())
		p.MaxAttempts = 1
		id := insertOne(t, b, p)
		if rows := claim(t, b, 1, shortLease, "q"); len(rows) != 1 {
			t.Fatalf("claim got %d jobs, want 1", len(rows))
		}
		sweepUntil(t, b, 0, 1)
		wantMetadata(t, "failed row of a swept job", failedByJob(t, b, id).Metadata, traced())
	})

	parallel(t, h, "ReplayKeeps", func(t *testing.T, b backend.Backend) {
		other := map[string]string{"tenant": "other"}
		made := makeFailed(t, b, withMetadata("a", "t", traced()), withMetadata("b", "t", other), withMetadata("b", "t", nil))
		res, err := b.FailedReplay(t.Context(), backend.FailedReplayParams{IDs: []int64{made[0].JobID}})
		if err != nil || !sameReplay(res, backend.ReplayResult{Replayed: 1}) {
			t.Fatalf("FailedReplay(ids) = %+v, %v; want 1 replayed", res, err)
		}
		res, err = b.FailedReplay(t.Context(), backend.FailedReplayParams{Filter: backend.FailedFilter{Queue: "b"}})
		if err != nil || !sameReplay(res, backend.ReplayResult{Replayed: 2}) {
			t.Fatalf("FailedReplay(queue b) = %+v, %v; want 2 replayed", res, err)
		}
		want := []map[string]string{traced(), other, nil}
		for i, m := range made {
			wantMetadata(t, fmt.Sprintf("replayed job %d", m.JobID), wantPendingNow(t, b, m.JobID, 0).Metadata, want[i])
		}
		rows := claim(t, b, 10, longLease, "a", "b")
		if len(rows) != 3 {
			t.Fatalf("claimed %d replayed jobs, want 3", len(rows))
		}
		for _, r := range rows {
			for i, m := range made {
				if r.ID == m.JobID {
					wantMetadata(t, fmt.Sprintf("claimed replayed job %d", r.ID), r.Metadata, want[i])
				}
			}
		}
	})

	parallel(t, h, "UniqueDuplicateKeepsHolders", func(t *testing.T, b backend.Backend) {
		first := withMetadata("q", "t", traced())
		first.UniqueKey = "k"
		id := insertOne(t, b, first)
		second := withMetadata("q", "t", map[string]string{"tenant": "second"})
		second.UniqueKey = "k"
		res := insert(t, b, second, withMetadata("q", "t", map[string]string{"n": "3"}))
		if !res[0].Duplicate || res[0].ID != id || res[1].Duplicate {
			t.Fatalf("insert = %+v, want a duplicate of %d and a new job", res, id)
		}
		wantMetadata(t, "holder of the unique key", get(t, b, id).Metadata, traced())
		wantMetadata(t, "new job beside the duplicate", get(t, b, res[1].ID).Metadata, map[string]string{"n": "3"})
		wantStats(t, b, backend.QueueStats{Queue: "q", Pending: 2})
	})

	tooMany := map[string]string{}
	for i := range backend.MaxMetadataKeys + 1 {
		tooMany[fmt.Sprintf("k%d", i)] = "v"
	}
	overBytes := fullMetadata()
	overBytes["key01"] += "v"
	invalid := []struct {
		name string
		md   map[string]string
	}{
		{"TooManyKeys", tooMany},
		{"TooManyBytes", overBytes},
		{"KeyTooLong", map[string]string{strings.Repeat("k", backend.MaxMetadataKeyBytes+1): "v"}},
		{"EmptyKey", map[string]string{"": "v", "ok": "v"}},
		{"NULInValue", map[string]string{"k": "a\x00b"}},
		{"NULInKey", map[string]string{"k\x00": "v"}},
		{"InvalidUTF8Value", map[string]string{"k": "caf\xc3"}},
		{"InvalidUTF8Key", map[string]string{"\xff": "v"}},
	}
	group(t, "InvalidBatchWritesNothing", func(t *testing.T) {
		for _, tc := range invalid {
			parallel(t, h, tc.name, func(t *testing.T, b backend.Backend) {
				wantBatchRefused(t, b, "metadata", func(p *backend.InsertParams) { p.Metadata = tc.md })
			})
		}
	})
}
