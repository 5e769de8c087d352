package sqlite_test

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/sqlite"
)

func TestParseURL(t *testing.T) {
	t.Parallel()
	cases := []struct {
		url  string
		path string
		opts sqlite.Options
	}{
		{"sqlite:jobq.db", "jobq.db", sqlite.Options{}},
		{"SQLite:jobq.db", "jobq.db", sqlite.Options{}},
		{"sqlite:/var/lib/jobq.db", "/var/lib/jobq.db", sqlite.Options{}},
		{"sqlite:///var/lib/jobq.db", "/var/lib/jobq.db", sqlite.Options{}},
		{"sqlite://data/jobq.db", "data/jobq.db", sqlite.Options{}},
		{"sqlite:file.db?busy_timeout=5s", "file.db", sqlite.Options{BusyTimeout: 5 * time.Second}},
		{"sqlite:file.db?busy_timeout=250", "file.db", sqlite.Options{BusyTimeout: 250 * time.Millisecond}},
		{"sqlite:file.db?migrate=false&busy_timeout=1m", "file.db", sqlite.Options{NoMigrate: true, BusyTimeout: time.Minute}},
		{"sqlite:file.db?migrate=true", "file.db", sqlite.Options{}},
		{"sqlite:file.db?wake_interval=20ms", "file.db", sqlite.Options{WakeInterval: 20 * time.Millisecond}},
		{"sqlite:file.db?wake_interval=off", "file.db", sqlite.Options{WakeInterval: -1}},
	}
	for _, c := range cases {
		path, opts, err := sqlite.ParseURL(c.url)
		if err != nil || path != c.path || opts.BusyTimeout != c.opts.BusyTimeout || opts.NoMigrate != c.opts.NoMigrate || opts.WakeInterval != c.opts.WakeInterval {
			t.Errorf("ParseURL(%q) = %q, %+v, %v; want %q, %+v", c.url, path, opts, err, c.path, c.opts)
		}
	}
	for _, bad := range []string{
		"sqlite:", "sqlite://", "sqlite:?busy_timeout=1s", "postgres://x",
		"sqlite:a.db?busy_timeout=soon", "sqlite:a.db?busy_timeout=-1s",
		"sqlite:a.db?migrate=maybe", "sqlite:a.db?journal_mode=delete",
		"sqlite:a.db?wake_interval=-5ms", "sqlite:a.db?wake_interval=never",
	} {
		if _, _, err := sqlite.ParseURL(bad); !errors.Is(err, backend.ErrInvalidInput) {
			t.Errorf("ParseURL(%q) error = %v, want ErrInvalidInput", bad, err)
		}
	}
}

func TestRegisteredScheme(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "jobq.db")
	b, err := backend.Open(t.Context(), "sqlite://"+path+"?busy_timeout=2s")
	if err != nil {
		t.Fatalf("backend.Open: %v", err)
	}
	defer b.Close()
	if _, ok := b.(*sqlite.Backend); !ok {
		t.Fatalf("backend.Open returned %T", b)
	}
	if _, err := b.JobInsertMany(t.Context(), oneJob("q")); err != nil {
		t.Fatal(err)
	}

	b2, err := backend.Open(t.Context(), "sqlite:"+filepath.Join(t.TempDir(), "missing", "x.db"))
	if b2 != nil || !errors.Is(err, backend.ErrUnavailable) {
		t.Fatalf("backend.Open(missing dir) = %v, %v; want nil, ErrUnavailable", b2, err)
	}
}
