package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migration is one embedded schema step, named NNN_description.sql.
type migration struct {
	version int
	name    string
	sql     string
}

// migrations are the embedded steps in version order; a malformed name is
// a build mistake caught by the tests.
var migrations = mustLoadMigrations()

func mustLoadMigrations() []migration {
	ms, err := loadMigrations(migrationFiles)
	if err != nil {
		panic(err)
	}
	return ms
}

func loadMigrations(fsys fs.FS) ([]migration, error) {
	names, err := fs.Glob(fsys, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var ms []migration
	for _, name := range names {
		base := strings.TrimPrefix(name, "migrations/")
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v < 1 {
			return nil, fmt.Errorf("migration %s: name must start with a positive version and '_'", base)
		}
		text, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: base, sql: string(text)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	for i, m := range ms {
		if m.version != i+1 {
			return nil, fmt.Errorf("migration %s: versions must run 1, 2, 3... without gaps", m.name)
		}
	}
	return ms, nil
}

// SchemaVersion is the schema version this build creates and understands.
func SchemaVersion() int { return len(migrations) }

// Migrate implements backend.Migrator: it applies every pending migration in
// one write transaction and returns the version now in force. Running it on
// an up-to-date file takes no write lock. It returns an error wrapping
// backend.ErrSchemaTooNew, changing nothing, when the file was migrated by a
// newer jobq.
func (b *Backend) Migrate(ctx context.Context) (int, error) {
	const op = "migrate schema"
	if err := b.checkOpen(op); err != nil {
		return 0, err
	}
	latest := SchemaVersion()
	v, err := b.schemaState(ctx, b.r)
	if err != nil || v == latest {
		return v, err
	}
	tx, err := b.w.BeginTx(ctx, nil)
	if err != nil {
		return 0, b.mapErr(ctx, op, err)
	}
	defer func() { _ = tx.Rollback() }()
	// Read again under the write lock: another process may have migrated
	// meanwhile.
	if _, err := tx.ExecContext(ctx, qSchemaCreate); err != nil {
		return 0, b.mapErr(ctx, op, err)
	}
	if err := tx.QueryRowContext(ctx, qSchemaVersion).Scan(&v); err != nil {
		return 0, b.mapErr(ctx, op, err)
	}
	if v > latest {
		return v, b.tooNew(op, v)
	}
	for _, m := range migrations[v:] {
		if _, err := tx.ExecContext(ctx, m.sql); err != nil {
			return v, b.mapErr(ctx, op+" "+m.name, err)
		}
		if _, err := tx.ExecContext(ctx, qSchemaRecord, m.version, micros(b.now())); err != nil {
			return v, b.mapErr(ctx, op, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return v, b.mapErr(ctx, op, err)
	}
	return latest, nil
}

// schemaState reads the schema version (0 when the file has none yet) and
// refuses one newer than this build. Reading it is also how Open proves the
// file is a readable database.
func (b *Backend) schemaState(ctx context.Context, db *sql.DB) (int, error) {
	const op = "read schema version"
	var n, version int
	if err := db.QueryRowContext(ctx, qSchemaTableExists).Scan(&n); err != nil {
		return 0, b.mapErr(ctx, op, err)
	}
	if n == 0 {
		return 0, nil
	}
	if err := db.QueryRowContext(ctx, qSchemaVersion).Scan(&version); err != nil {
		return 0, b.mapErr(ctx, op, err)
	}
	if version > SchemaVersion() {
		return version, b.tooNew(op, version)
	}
	return version, nil
}

func (b *Backend) tooNew(op string, v int) error {
	return fmt.Errorf("%s: %w", op, b.schemaError(v, ""))
}
