package backendtest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// testInsert: JobInsertMany stores every field, respects Delay and RunAt, and
// writes nothing when one item of a batch is invalid.
func testInsert(t *testing.T, h Harness) {
	parallel(t, h, "IncreasingIDs", func(t *testing.T, b backend.Backend) {
		first := insertIDs(t, b, job("q", "t"), job("q", "t"), job("other", "t"))
		second := insertIDs(t, b, job("q", "t"), job("q", "t"))
		all := append(first, second...)
		for i, id := range all {
			if id <= 0 {
				t.Fatalf("ID %d = %d, want > 0", i, id)
			}
			if i > 0 && id <= all[i-1] {
				t.Fatalf("IDs %v are not strictly increasing", all)
			}
		}
	})

	parallel(t, h, "StoresEveryField", func(t *testing.T, b backend.Backend) {
		p := backend.InsertParams{
			Queue:       "mail.out",
			Type:        "email.send",
			Payload:     []byte(`{"to":"a@example.com","tags":["x","y"],"n":3.5,"nested":{"ok":true}}`),
			Priority:    7,
			MaxAttempts: 5,
			UniqueKey:   "welcome:42",
		}
		before := time.Now()
		id := insertOne(t, b, p)
		row := get(t, b, id)
		if row.Queue != p.Queue || row.Type != p.Type {
			t.Errorf("queue/type = %q/%q, want %q/%q", row.Queue, row.Type, p.Queue, p.Type)
		}
		if !jsonEqual(row.Payload, p.Payload) {
			t.Errorf("payload = %s, want %s", row.Payload, p.Payload)
		}
		if row.Priority != 7 || row.MaxAttempts != 5 {
			t.Errorf("priority/max attempts = %d/%d, want 7/5", row.Priority, row.MaxAttempts)
		}
		if row.Status != backend.StatePending || row.Attempts != 0 {
			t.Errorf("status/attempts = %q/%d, want pending/0", row.Status, row.Attempts)
		}
		if row.UniqueKey != p.UniqueKey {
			t.Errorf("unique key = %q, want %q", row.UniqueKey, p.UniqueKey)
		}
		if row.LastError != "" {
			t.Errorf("last error = %q, want empty", row.LastError)
		}
		if !row.ReservedAt.IsZero() || !row.LeaseUntil.IsZero() {
			t.Errorf("ReservedAt %v LeaseUntil %v, want zero on a pending job", row.ReservedAt, row.LeaseUntil)
		}
		near(t, "CreatedAt", row.CreatedAt, before, skew)
		near(t, "AvailableAt", row.AvailableAt, row.CreatedAt, time.Second)
		wantStats(t, b, backend.QueueStats{Queue: "mail.out", Pending: 1})
	})

	parallel(t, h, "Delay", func(t *testing.T, b backend.Backend) {
		p := job("q", "t")
		p.Delay = time.Hour
		before := time.Now()
		id := insertOne(t, b, p)
		row := get(t, b, id)
		near(t, "AvailableAt", row.AvailableAt, before.Add(time.Hour), skew)
		claimNone(t, b, "q")
		wantStats(t, b, backend.QueueStats{Queue: "q", Scheduled: 1})
	})

	parallel(t, h, "RunAtWinsOverDelay", func(t *testing.T, b backend.Backend) {
		p := job("q", "t")
		p.RunAt = time.Now().Add(2 * time.Hour)
		p.Delay = time.Minute
		id := insertOne(t, b, p)
		near(t, "AvailableAt", get(t, b, id).AvailableAt, p.RunAt, time.Second)
		claimNone(t, b, "q")
		wantStats(t, b, backend.QueueStats{Queue: "q", Scheduled: 1})
	})

	parallel(t, h, "RunAtInPast", func(t *testing.T, b backend.Backend) {
		p := job("q", "t")
		p.RunAt = time.Now().Add(-time.Hour)
		id := insertOne(t, b, p)
		near(t, "AvailableAt", get(t, b, id).AvailableAt, p.RunAt, time.Second)
		wantStats(t, b, backend.QueueStats{Queue: "q", Pending: 1})
		if got := claimOne(t, b, "q"); got.ID != id {
			t.Fatalf("claimed job %d, want %d", got.ID, id)
		}
	})

	parallel(t, h, "UnknownID", func(t *testing.T, b backend.Backend) {
		gone(t, b, 987654321)
		id := insertOne(t, b, job("q", "t"))
		gone(t, b, id+1000)
	})

	invalid := []struct {
		name  string
		field string
		edit  func(*backend.InsertParams)
	}{
		{"BadQueue", "queue", func(p *backend.InsertParams) { p.Queue = "bad queue!" }},
		{"EmptyQueue", "queue", func(p *backend.InsertParams) { p.Queue = "" }},
		{"EmptyType", "type", func(p *backend.InsertParams) { p.Type = "" }},
		{"PayloadNotJSON", "payload", func(p *backend.InsertParams) { p.Payload = []byte(`{"n":`) }},
		{"PayloadEmpty", "payload", func(p *backend.InsertParams) { p.Payload = nil }},
		// json.Valid takes any byte in a string; PostgreSQL's json does
		// not, so every store refuses it alike.
		{"PayloadNotUTF8", "payload", func(p *backend.InsertParams) { p.Payload = []byte("{\"n\":\"a\xffb\"}") }},
		{"TypeNotUTF8", "type", func(p *backend.InsertParams) { p.Type = "t\xff" }},
		{"PriorityTooHigh", "priority", func(p *backend.InsertParams) { p.Priority = backend.MaxPriority + 1 }},
		{"PriorityTooLow", "priority", func(p *backend.InsertParams) { p.Priority = backend.MinPriority - 1 }},
		{"MaxAttemptsZero", "max attempts", func(p *backend.InsertParams) { p.MaxAttempts = 0 }},
		{"NegativeDelay", "delay", func(p *backend.InsertParams) { p.Delay = -time.Second }},
		{"UniqueKeyNUL", "unique key", func(p *backend.InsertParams) { p.UniqueKey = "a\x00b" }},
		{"UniqueKeyNotUTF8", "unique key", func(p *backend.InsertParams) { p.UniqueKey = "a\xffb" }},
		{"UniqueKeyNewline", "unique key", func(p *backend.InsertParams) { p.UniqueKey = "a\nb" }},
		{"UniqueKeyTooLong", "unique key", func(p *backend.InsertParams) { p.UniqueKey = strings.Repeat("k", backend.MaxUniqueKeyLen+1) }},
	}
	group(t, "InvalidBatchWritesNothing", func(t *testing.T) {
		for _, tc := range invalid {
			parallel(t, h, tc.name, func(t *testing.T, b backend.Backend) {
				wantBatchRefused(t, b, tc.field, tc.edit)
			})
		}
	})

	parallel(t, h, "InvalidErrorIsNotOtherSentinel", func(t *testing.T, b backend.Backend) {
		bad := job("q", "")
		_, err := b.JobInsertMany(t.Context(), []backend.InsertParams{bad})
		wantInvalid(t, err, "type")
		if errors.Is(err, backend.ErrClosed) || errors.Is(err, backend.ErrNotFound) {
			t.Fatalf("error %v also matches another sentinel", err)
		}
	})
}

// wantBatchRefused inserts a batch of a valid job, one made invalid by edit
// and another valid job, and asserts that the whole batch is refused as
// invalid input on field with nothing written.
func wantBatchRefused(t *testing.T, b backend.Backend, field string, edit func(*backend.InsertParams)) {
	t.Helper()
	good1 := job("q", "t")
	good1.UniqueKey = "held-if-half-written"
	good1.Metadata = map[string]string{"ok": "yes"}
	bad := job("q", "t")
	edit(&bad)
	good2 := job("q2", "t")
	_, err := b.JobInsertMany(t.Context(), []backend.InsertParams{good1, bad, good2})
	wantInvalid(t, err, field)
	wantNoStats(t, b)
	claimNone(t, b, "q", "q2")
	// The valid item's unique key must not have been taken either.
	res := insert(t, b, good1)
	if res[0].Duplicate {
		t.Fatalf("unique key of the refused batch is held by job %d", res[0].ID)
	}
	wantStats(t, b, backend.QueueStats{Queue: "q", Pending: 1})
}
