package jobqtest

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/memory"
	"github.com/jobq/jobq/backend/sqlite"
	syncbackend "github.com/jobq/jobq/backend/sync"
)

// fakeCaps implements every optional capability, noting its calls.
type fakeCaps struct {
	ch        chan struct{}
	runner    func(ctx context.Context, job *backend.JobRow) error
	txInserts int
	txCompl   int
	qctl      int
}

func (f *fakeCaps) Subscribe([]string) (<-chan struct{}, func()) { return f.ch, func() {} }
func (f *fakeCaps) SetRunner(run func(ctx context.Context, job *backend.JobRow) error) {
	f.runner = run
}
func (f *fakeCaps) Migrate(context.Context) (int, error) { return 42, nil }
func (f *fakeCaps) JobInsertManyTx(_ context.Context, _ any, p []backend.InsertParams) ([]backend.InsertResult, error) {
	f.txInserts++
	out := make([]backend.InsertResult, len(p))
	for i := range out {
		out[i].ID = int64(100 + i)
	}
	return out, nil
}
func (f *fakeCaps) JobCompleteTx(context.Context, any, backend.JobRef) error {
	f.txCompl++
	return nil
}
func (f *fakeCaps) QueuePause(context.Context, string, bool) error { f.qctl++; return nil }
func (f *fakeCaps) QueueSetLimits(context.Context, string, backend.QueueLimits) error {
	f.qctl++
	return nil
}
func (f *fakeCaps) QueueSettingsList(context.Context) ([]backend.QueueSettings, error) {
	return []backend.QueueSettings{{Queue: "fake"}}, nil
}
func (f *fakeCaps) ScheduleUpsert(context.Context, []backend.ScheduleDef) ([]backend.ScheduleRow, error) {
	return nil, nil
}
func (f *fakeCaps) ScheduleTick(context.Context, backend.ScheduleTickParams) (backend.ScheduleTickResult, error) {
	return backend.ScheduleTickResult{JobID: 77}, nil
}
func (f *fakeCaps) ScheduleList(context.Context) ([]backend.ScheduleRow, error) { return nil, nil }

// TestCapabilitiesPassThrough: for every combination of the optional
// capabilities, the recorder's backend has exactly the wrapped backend's,
// and each reaches the wrapped implementation (Inline and TxInserter
// through the recorder, which records what they do).
func TestCapabilitiesPassThrough(t *testing.T) {
	for m := capMask(0); m <= capAll; m++ {
		f := &fakeCaps{ch: make(chan struct{})}
		inner := compose(memory.New(memory.Options{}), m, caps{notifier: f, inline: f, migrator: f, txInserter: f, txCompleter: f, queueController: f, schedules: f})
		if got := maskOf(inner); got != m {
			t.Fatalf("fake for mask %06b has %06b", m, got)
		}
		rec := NewRecorder(inner)
		b := rec.Backend()
		if got := maskOf(b); got != m {
			t.Fatalf("recorder over mask %06b has %06b", m, got)
		}
		ctx := context.Background()
		if n, ok := b.(backend.Notifier); ok {
			if ch, _ := n.Subscribe([]string{"default"}); ch != f.ch {
				t.Fatalf("mask %06b: Subscribe did not reach the wrapped backend", m)
			}
		}
		if qc, ok := b.(backend.QueueController); ok {
			_ = qc.QueuePause(ctx, "q", true)
			_ = qc.QueueSetLimits(ctx, "q", backend.QueueLimits{Concurrency: 1})
			if s, _ := qc.QueueSettingsList(ctx); f.qctl != 2 || len(s) != 1 || s[0].Queue != "fake" {
				t.Fatalf("mask %06b: queue control did not reach the wrapped backend", m)
			}
		}
		if mg, ok := b.(backend.Migrator); ok {
			if v, _ := mg.Migrate(ctx); v != 42 {
				t.Fatalf("mask %06b: Migrate returned %d", m, v)
			}
		}
		if ss, ok := b.(backend.ScheduleStore); ok {
			if r, _ := ss.ScheduleTick(ctx, backend.ScheduleTickParams{}); r.JobID != 77 {
				t.Fatalf("mask %06b: ScheduleTick did not reach the wrapped backend", m)
			}
		}
		if tc, ok := b.(backend.TxCompleter); ok {
			tc.JobCompleteTx(ctx, nil, backend.JobRef{ID: 1, Attempt: 1})
			if f.txCompl != 1 {
				t.Fatalf("mask %06b: JobCompleteTx did not reach the wrapped backend", m)
			}
		}
		if ti, ok := b.(backend.TxInserter); ok {
			if _, err := ti.JobInsertManyTx(ctx, nil, []backend.InsertParams{{Queue: "q", Type: "tx", Payload: []byte(`{}`), MaxAttempts: 1}}); err != nil {
				t.Fatal(err)
			}
			if es := rec.Enqueues(); f.txInserts != 1 || len(es) != 1 || es[0].ID != 100 || !es[0].InTx || es[0].Type != "tx" {
				t.Fatalf("mask %06b: tx insert reached %d times, recorded %+v", m, f.txInserts, es)
			}
		}
		if in, ok := b.(backend.Inline); ok {
			var ran bool
			in.SetRunner(func(ctx context.Context, job *backend.JobRow) error { ran = true; return nil })
			if f.runner == nil {
				t.Fatalf("mask %06b: SetRunner did not reach the wrapped backend", m)
			}
			f.runner(ctx, &backend.JobRow{ID: 5, Type: "inline", Queue: "q", Attempts: 1})
			if runs := rec.Runs(); !ran || len(runs) != 1 || runs[0].JobID != 5 || !runs[0].Inline {
				t.Fatalf("mask %06b: inline run reached the runner %v, recorded %+v", m, ran, runs)
			}
		}
		inner.Close()
	}
}

// TestRealBackendsCapabilities: wrapping a real backend keeps its
// capabilities.
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
		want capMask
	}{
		{"memory", mem, capNotifier | capQueueController},
		{"sync", syncbackend.New(), capInline | capQueueController},
		{"sqlite", sq, capNotifier | capMigrator | capTxInserter | capTxCompleter | capQueueController},
		{"memory", mem, capNotifier | capScheduleStore},
		{"sync", syncbackend.New(), capInline},
		{"sqlite", sq, capNotifier | capMigrator | capTxInserter | capTxCompleter | capScheduleStore},
	} {
		if got := maskOf(NewRecorder(c.b).Backend()); got != c.want {
			t.Errorf("%s through the recorder: capabilities %06b, want %06b", c.name, got, c.want)
		}
	}
}
