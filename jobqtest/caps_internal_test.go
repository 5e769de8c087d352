package jobqtest

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/inline"
	"github.com/jobq/jobq/backend/memory"
	"github.com/jobq/jobq/backend/sqlite"
)

// fakeOthers implements every optional capability the recorder leaves to
// backend.As, noting its calls.
type fakeOthers struct {
	ch    chan struct{}
	calls map[string]int
}

func (f *fakeOthers) Subscribe([]string) (<-chan struct{}, func()) {
	f.calls["Subscribe"]++
	return f.ch, func() {}
}
func (f *fakeOthers) Migrate(context.Context) (int, error) { f.calls["Migrate"]++; return 42, nil }
func (f *fakeOthers) JobCompleteTx(context.Context, any, backend.JobRef) error {
	f.calls["JobCompleteTx"]++
	return nil
}
func (f *fakeOthers) QueuePause(context.Context, string, bool) error {
	f.calls["QueuePause"]++
	return nil
}
func (f *fakeOthers) QueueSetLimits(context.Context, string, backend.QueueLimits) error {
	f.calls["QueueSetLimits"]++
	return nil
}
func (f *fakeOthers) QueueSettingsList(context.Context) ([]backend.QueueSettings, error) {
	f.calls["QueueSettingsList"]++
	return nil, nil
}
func (f *fakeOthers) JobCancel(_ context.Context, ids []int64) ([]backend.CancelResult, error) {
	f.calls["JobCancel"]++
	return nil, nil
}
func (f *fakeOthers) JobCancelling(context.Context) ([]backend.JobRef, error) {
	f.calls["JobCancelling"]++
	return nil, nil
}
func (f *fakeOthers) FinishedList(context.Context, backend.FinishedListParams) ([]*backend.FinishedJob, error) {
	f.calls["FinishedList"]++
	return nil, nil
}
func (f *fakeOthers) FinishedPrune(context.Context, backend.FinishedPruneParams) (int, error) {
	f.calls["FinishedPrune"]++
	return 0, nil
}
func (f *fakeOthers) JobList(context.Context, backend.JobListParams) ([]*backend.JobRow, error) {
	f.calls["JobList"]++
	return nil, nil
}
func (f *fakeOthers) PruneTurn(context.Context, string, time.Duration) (bool, error) {
	f.calls["PruneTurn"]++
	return false, nil
}
func (f *fakeOthers) ScheduleUpsert(context.Context, []backend.ScheduleDef) ([]backend.ScheduleRow, error) {
	f.calls["ScheduleUpsert"]++
	return nil, nil
}
func (f *fakeOthers) ScheduleTick(context.Context, backend.ScheduleTickParams) (backend.ScheduleTickResult, error) {
	f.calls["ScheduleTick"]++
	return backend.ScheduleTickResult{JobID: 77}, nil
}
func (f *fakeOthers) ScheduleList(context.Context) ([]backend.ScheduleRow, error) {
	f.calls["ScheduleList"]++
	return nil, nil
}

// fakeInline is a backend.Inline keeping the runner it is given.
type fakeInline struct {
	runner func(ctx context.Context, job *backend.JobRow) error
}

func (f *fakeInline) SetRunner(run func(ctx context.Context, job *backend.JobRow) error) {
	f.runner = run
}

// fakeTx is a backend.TxInserter counting its calls.
type fakeTx struct{ inserts int }

func (f *fakeTx) JobInsertManyTx(_ context.Context, _ any, p []backend.InsertParams) ([]backend.InsertResult, error) {
	f.inserts++
	out := make([]backend.InsertResult, len(p))
	for i := range out {
		out[i].ID = int64(100 + i)
	}
	return out, nil
}

// fakeBackend returns a backend on base with Inline and TxInserter as
// asked, and, when others is not nil, every other capability from it.
func fakeBackend(base backend.Backend, others *fakeOthers, in *fakeInline, tx *fakeTx, inline, txi bool) backend.Backend {
	type o = *fakeOthers
	switch {
	case others == nil && inline && txi:
		return struct {
			backend.Backend
			*fakeInline
			*fakeTx
		}{base, in, tx}
	case others == nil && inline:
		return struct {
			backend.Backend
			*fakeInline
		}{base, in}
	case others == nil && txi:
		return struct {
			backend.Backend
			*fakeTx
		}{base, tx}
	case others == nil:
		return struct{ backend.Backend }{base}
	case inline && txi:
		return struct {
			backend.Backend
			o
			*fakeInline
			*fakeTx
		}{base, others, in, tx}
	case inline:
		return struct {
			backend.Backend
			o
			*fakeInline
		}{base, others, in}
	case txi:
		return struct {
			backend.Backend
			o
			*fakeTx
		}{base, others, tx}
	}
	return struct {
		backend.Backend
		o
	}{base, others}
}

// asCaps lists which capabilities backend.As finds on b, as the runtime
// finds each.
func asCaps(b backend.Backend) []string {
	var out []string
	has := func(name string, ok bool) {
		if ok {
			out = append(out, name)
		}
	}
	_, ok := backend.As[backend.Inline](b)
	has("Inline", ok)
	_, ok = backend.As[backend.TxInserter](b)
	has("TxInserter", ok)
	_, ok = backend.As[backend.Notifier](b)
	has("Notifier", ok)
	_, ok = backend.As[backend.Migrator](b)
	has("Migrator", ok)
	_, ok = backend.As[backend.TxCompleter](b)
	has("TxCompleter", ok)
	_, ok = backend.As[backend.QueueController](b)
	has("QueueController", ok)
	_, ok = backend.As[backend.Canceller](b)
	has("Canceller", ok)
	_, ok = backend.As[backend.Retainer](b)
	has("Retainer", ok)
	_, ok = backend.As[backend.ScheduleStore](b)
	has("ScheduleStore", ok)
	_, ok = backend.As[backend.Workflower](b)
	has("Workflower", ok)
	_, ok = backend.As[backend.WorkflowTxInserter](b)
	has("WorkflowTxInserter", ok)
	return out
}

// TestCapabilitiesPassThrough: for each combination of Inline and
// TxInserter, with and without the other capabilities, backend.As finds
// through the recorder's backend exactly the wrapped backend's
// capabilities, and their calls reach it untouched: the recorder records
// EnqueueTx and inline runs through its client hooks, not here.
func TestCapabilitiesPassThrough(t *testing.T) {
	ctx := context.Background()
	mem := memory.New(memory.Options{})
	defer mem.Close()
	// The fake's base is a backend without capabilities, so only the
	// fake's own are found.
	base := struct{ backend.Backend }{mem}
	for _, withOthers := range []bool{false, true} {
		for _, inline := range []bool{false, true} {
			for _, txi := range []bool{false, true} {
				name := fmt.Sprintf("others=%v/inline=%v/tx=%v", withOthers, inline, txi)
				var others *fakeOthers
				if withOthers {
					others = &fakeOthers{ch: make(chan struct{}), calls: map[string]int{}}
				}
				in, tx := &fakeInline{}, &fakeTx{}
				inner := fakeBackend(base, others, in, tx, inline, txi)
				want := fmt.Sprint(asCaps(inner))
				if n := len(asCaps(inner)); n != count(withOthers, 7)+count(inline, 1)+count(txi, 1) {
					t.Fatalf("%s: the fake has %s", name, want)
				}
				rec := NewRecorder(inner)
				b := rec.Backend()
				if got := fmt.Sprint(asCaps(b)); got != want {
					t.Fatalf("%s: the recorder has %s, the wrapped backend %s", name, got, want)
				}
				if withOthers {
					checkOthersReached(t, name, b, others)
				}
				if ti, ok := backend.As[backend.TxInserter](b); ok {
					res, err := ti.JobInsertManyTx(ctx, nil, []backend.InsertParams{{Queue: "q", Type: "tx", Payload: []byte(`{}`), MaxAttempts: 1}})
					if err != nil {
						t.Fatal(err)
					}
					if tx.inserts != 1 || len(res) != 1 || res[0].ID != 100 {
						t.Fatalf("%s: tx insert reached %d times, returned %+v", name, tx.inserts, res)
					}
				}
				if bi, ok := backend.As[backend.Inline](b); ok {
					var ran bool
					bi.SetRunner(func(ctx context.Context, job *backend.JobRow) error { ran = true; return nil })
					if in.runner == nil {
						t.Fatalf("%s: SetRunner did not reach the wrapped backend", name)
					}
					if err := in.runner(ctx, &backend.JobRow{ID: 5, Type: "inline", Queue: "q", Attempts: 1}); err != nil || !ran {
						t.Fatalf("%s: the wrapped backend's runner is not the one given (ran %v, %v)", name, ran, err)
					}
				}
				if es, runs := rec.Enqueues(), rec.Runs(); len(es) != 0 || len(runs) != 0 {
					t.Fatalf("%s: calls made without a client recorded %+v, %+v", name, es, runs)
				}
			}
		}
	}
}

// count is n if b, else 0.
func count(b bool, n int) int {
	if b {
		return n
	}
	return 0
}

// checkOthersReached calls each capability As finds on b once and checks
// the call reached others, unrecorded.
func checkOthersReached(t *testing.T, name string, b backend.Backend, others *fakeOthers) {
	t.Helper()
	ctx := context.Background()
	must := func(ok bool, c string) {
		if !ok {
			t.Fatalf("%s: %s not found", name, c)
		}
	}
	n, ok := backend.As[backend.Notifier](b)
	must(ok, "Notifier")
	if ch, _ := n.Subscribe([]string{"default"}); ch != others.ch {
		t.Fatalf("%s: Subscribe did not return the wrapped backend's channel", name)
	}
	m, ok := backend.As[backend.Migrator](b)
	must(ok, "Migrator")
	if v, _ := m.Migrate(ctx); v != 42 {
		t.Fatalf("%s: Migrate returned %d", name, v)
	}
	tc, ok := backend.As[backend.TxCompleter](b)
	must(ok, "TxCompleter")
	tc.JobCompleteTx(ctx, nil, backend.JobRef{ID: 1, Attempt: 1})
	qc, ok := backend.As[backend.QueueController](b)
	must(ok, "QueueController")
	qc.QueuePause(ctx, "q", true)
	qc.QueueSetLimits(ctx, "q", backend.QueueLimits{Concurrency: 1})
	qc.QueueSettingsList(ctx)
	c, ok := backend.As[backend.Canceller](b)
	must(ok, "Canceller")
	c.JobCancel(ctx, []int64{1})
	c.JobCancelling(ctx)
	r, ok := backend.As[backend.Retainer](b)
	must(ok, "Retainer")
	r.FinishedList(ctx, backend.FinishedListParams{})
	r.FinishedPrune(ctx, backend.FinishedPruneParams{})
	r.JobList(ctx, backend.JobListParams{})
	r.PruneTurn(ctx, "h", time.Second)
	s, ok := backend.As[backend.ScheduleStore](b)
	must(ok, "ScheduleStore")
	s.ScheduleUpsert(ctx, nil)
	s.ScheduleList(ctx)
	if res, _ := s.ScheduleTick(ctx, backend.ScheduleTickParams{}); res.JobID != 77 {
		t.Fatalf("%s: ScheduleTick did not reach the wrapped backend", name)
	}
	for _, call := range []string{"Subscribe", "Migrate", "JobCompleteTx", "QueuePause", "QueueSetLimits", "QueueSettingsList",
		"JobCancel", "JobCancelling", "FinishedList", "FinishedPrune", "JobList", "PruneTurn",
		"ScheduleUpsert", "ScheduleTick", "ScheduleList"} {
		if others.calls[call] != 1 {
			t.Errorf("%s: %s reached the wrapped backend %d times, want 1", name, call, others.calls[call])
		}
	}
}

// TestRealBackendsCapabilities: wrapping a real backend keeps every
// capability the runtime can find on it.
func TestRealBackendsCapabilities(t *testing.T) {
	sq, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "jobq.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sq.Close()
	mem := memory.New(memory.Options{})
	defer mem.Close()
	for _, c := range []struct {
		name string
		b    backend.Backend
		want string
	}{
		{"memory", mem, "[Notifier QueueController Canceller Retainer ScheduleStore Workflower]"},
		{"sync", inline.New(), "[Inline QueueController]"},
		{"sqlite", sq, "[TxInserter Notifier Migrator TxCompleter QueueController Canceller Retainer ScheduleStore Workflower WorkflowTxInserter]"},
	} {
		if got := fmt.Sprint(asCaps(c.b)); got != c.want {
			t.Errorf("%s has %s, want %s", c.name, got, c.want)
		}
		if got := fmt.Sprint(asCaps(NewRecorder(c.b).Backend())); got != c.want {
			t.Errorf("%s through the recorder: %s, want %s", c.name, got, c.want)
		}
		// A recorder over a recorder: As walks two Unwraps.
		if got := fmt.Sprint(asCaps(NewRecorder(NewRecorder(c.b).Backend()).Backend())); got != c.want {
			t.Errorf("%s through two recorders: %s, want %s", c.name, got, c.want)
		}
	}
}
