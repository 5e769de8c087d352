package backend_test

import (
	"context"
	"testing"

	"github.com/jobq/jobq/backend"
)

// base is a backend with no optional capability. Its Backend methods are
// never called: As only asserts types.
type base struct{ backend.Backend }

// migrating has one capability, Migrator, reporting version v.
type migrating struct {
	backend.Backend
	v int
}

func (m *migrating) Migrate(context.Context) (int, error) { return m.v, nil }

// wrapper wraps inner and implements no capability itself.
type wrapper struct {
	backend.Backend
	inner backend.Backend
}

func (w *wrapper) Unwrap() backend.Backend { return w.inner }

// migratingWrapper wraps inner and intercepts Migrate.
type migratingWrapper struct {
	wrapper
	v int
}

func (m *migratingWrapper) Migrate(context.Context) (int, error) { return m.v, nil }

// loop unwraps to itself.
type loop struct{ backend.Backend }

func (l *loop) Unwrap() backend.Backend { return l }

func migrateVersion(t *testing.T, b backend.Backend) (int, bool) {
	t.Helper()
	m, ok := backend.As[backend.Migrator](b)
	if !ok {
		return 0, false
	}
	if m == nil {
		t.Fatal("As reported found with a nil capability")
	}
	v, err := m.Migrate(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return v, true
}

func TestAs(t *testing.T) {
	t.Parallel()
	inner := &migrating{v: 7}
	for _, c := range []struct {
		name  string
		b     backend.Backend
		found bool
		v     int
	}{
		{"direct", inner, true, 7},
		{"through one wrapper", &wrapper{inner: inner}, true, 7},
		{"through two wrappers", &wrapper{inner: &wrapper{inner: inner}}, true, 7},
		{"wrapper's own first", &migratingWrapper{wrapper: wrapper{inner: inner}, v: 9}, true, 9},
		{"wrapper's own, wrapped once more", &wrapper{inner: &migratingWrapper{wrapper: wrapper{inner: inner}, v: 9}}, true, 9},
		{"not found", &base{}, false, 0},
		{"not found through two wrappers", &wrapper{inner: &wrapper{inner: &base{}}}, false, 0},
		{"wrapper of nil", &wrapper{}, false, 0},
		{"nil", nil, false, 0},
		{"cycle ends", &loop{}, false, 0},
	} {
		v, found := migrateVersion(t, c.b)
		if found != c.found || v != c.v {
			t.Errorf("%s: As found %v (version %d), want %v (version %d)", c.name, found, v, c.found, c.v)
		}
	}
}

// TestAsBackendInterface: As of an interface every backend has is the
// backend itself, wrapper or not.
func TestAsBackendInterface(t *testing.T) {
	t.Parallel()
	w := &wrapper{inner: &base{}}
	got, ok := backend.As[backend.Backend](w)
	if !ok || got != backend.Backend(w) {
		t.Fatalf("As[Backend] = %v, %v; want the wrapper itself", got, ok)
	}
}

// running has the two capabilities whose presence alone changes what the
// runtime does: Inline and TxInserter.
type running struct{ backend.Backend }

func (running) SetRunner(func(context.Context, *backend.JobRow) error) {}

func (running) JobInsertManyTx(context.Context, any, []backend.InsertParams) ([]backend.InsertResult, error) {
	return nil, nil
}

// TestAsFindsInlineAndTxInserter: Inline and TxInserter are found through
// a wrapper like every other capability, so a wrapper that intercepts
// neither keeps both, and one without the wrapped backend's has neither.
func TestAsFindsInlineAndTxInserter(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		b     backend.Backend
		found bool
	}{
		{"direct", running{}, true},
		{"through a wrapper", &wrapper{inner: running{}}, true},
		{"not on the wrapped backend", &wrapper{inner: &base{}}, false},
	} {
		_, inline := backend.As[backend.Inline](c.b)
		_, tx := backend.As[backend.TxInserter](c.b)
		if inline != c.found || tx != c.found {
			t.Errorf("%s: As found Inline %v, TxInserter %v; want %v", c.name, inline, tx, c.found)
		}
	}
}
