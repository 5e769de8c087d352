package postgres

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobq/jobq/backend"
)

// migrationFS holds the schema history: migrations/NNN_name.sql, applied in
// order, each once, in the schema's own search_path.
//
//go:embed migrations/*.sql
var migrationFS embed.FS

// migration is one embedded schema change.
type migration struct {
	version int
	name    string
	sql     string
}

// migrations is the parsed, ordered history; loadMigrations panics at
// init on a malformed file name, a programming error caught by any test.
var migrations = loadMigrations()

func loadMigrations() []migration {
	entries, err := fs.ReadDir(migrationFS, "migrations")
	if err != nil {
		panic(err)
	}
	var out []migration
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		version, err := strconv.Atoi(num)
		if !ok || err != nil || version < 1 {
			panic("postgres: migration file name must be NNN_name.sql: " + e.Name())
		}
		body, err := migrationFS.ReadFile(path.Join("migrations", e.Name()))
		if err != nil {
			panic(err)
		}
		out = append(out, migration{version: version, name: e.Name(), sql: string(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	for i, m := range out {
		if m.version != i+1 {
			panic(fmt.Sprintf("postgres: migration %s: want version %d (versions must be 1, 2, 3, …)", m.name, i+1))
		}
	}
	return out
}

// migrateTimeout is the least time the migration transaction gets (DDL, and
// waiting for another process's migration), however short QueryTimeout is.
const migrateTimeout = time.Minute

// LatestVersion is the schema version this build migrates to.
func LatestVersion() int { return len(migrations) }

// Migrate applies every pending migration in one transaction, under an
// advisory lock so that processes starting together migrate once, and
// returns the version now in force. It creates the schema when missing.
// It fails with backend.ErrSchemaTooNew, changing nothing, when the schema
// was migrated by a newer jobq.
func (b *Backend) Migrate(ctx context.Context) (int, error) {
	// Fast path without locks or DDL: most opens find the schema current,
	// and a user without CREATE rights can still open it.
	version, err := b.currentVersion(ctx)
	if err != nil {
		return 0, err
	}
	if version > LatestVersion() {
		return version, b.tooNew(version)
	}
	if version == LatestVersion() {
		return version, nil
	}
	err = b.run(ctx, "migrate postgres", maxTries, max(b.opts.QueryTimeout, migrateTimeout), func(ctx context.Context) error {
		return b.inTx(ctx, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, sqlMigrateLock, "jobq migrate "+b.opts.Schema); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, b.q.createSchema); err != nil {
				return err
			}
			if err := tx.QueryRow(ctx, b.q.schemaVersion).Scan(&version); err != nil {
				return err
			}
			if version > LatestVersion() {
				return b.tooNew(version)
			}
			for _, m := range migrations[version:] {
				if _, err := tx.Exec(ctx, b.q.setSearchPath); err != nil {
					return err
				}
				if _, err := tx.Exec(ctx, m.sql); err != nil {
					return fmt.Errorf("apply %s: %w", m.name, err)
				}
				if _, err := tx.Exec(ctx, b.q.recordVersion, m.version); err != nil {
					return err
				}
				version = m.version
			}
			return nil
		})
	})
	if err != nil {
		return 0, err
	}
	return version, nil
}

// checkVersion refuses a schema newer than this build (Open with
// NoMigrate); an older or missing one is left for Migrate.
func (b *Backend) checkVersion(ctx context.Context) error {
	version, err := b.currentVersion(ctx)
	if err != nil {
		return err
	}
	if version > LatestVersion() {
		return b.tooNew(version)
	}
	return nil
}

// checkExisting is Open's check with Options.Existing: the schema must hold
// jobq's tables at this build's version. It only reads (no lock, no DDL),
// and anything missing, older or newer is a *backend.SchemaError saying
// what was found.
func (b *Backend) checkExisting(ctx context.Context) error {
	const op = "open"
	s := quoteIdent(b.opts.Schema)
	var exists, hasVersion, hasTables bool
	err := b.do(ctx, op, func(ctx context.Context) error {
		return b.pool.QueryRow(ctx, sqlSchemaState, b.opts.Schema, s+".jobq_schema_version", s+".jobs", s+".failed_jobs").
			Scan(&exists, &hasVersion, &hasTables)
	})
	if err != nil {
		return err
	}
	switch {
	case !exists:
		return fmt.Errorf("%s: %w", op, b.schemaError(0, "the schema does not exist"))
	case !hasVersion || !hasTables:
		return fmt.Errorf("%s: %w", op, b.schemaError(0, "the schema holds no jobq tables"))
	}
	version, err := b.currentVersion(ctx)
	switch {
	case err != nil:
		return err
	case version > LatestVersion():
		return b.tooNew(version)
	case version < LatestVersion():
		return fmt.Errorf("%s: %w", op, b.schemaError(version, ""))
	}
	return nil
}

// currentVersion reads the schema version without writing: 0 when the
// schema or its version table does not exist yet.
func (b *Backend) currentVersion(ctx context.Context) (int, error) {
	var version int
	err := b.do(ctx, "read schema version", func(ctx context.Context) error {
		var exists bool
		table := quoteIdent(b.opts.Schema) + ".jobq_schema_version"
		if err := b.pool.QueryRow(ctx, sqlVersionTableExists, table).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			version = 0
			return nil
		}
		return b.pool.QueryRow(ctx, b.q.schemaVersion).Scan(&version)
	})
	return version, err
}

func (b *Backend) tooNew(version int) error {
	return b.schemaError(version, "")
}

// schemaError is the error of a schema at version have (0: none, missing
// saying what is not there) when this build needs LatestVersion. It names
// the schema and the server but never the URL, which may hold a password.
func (b *Backend) schemaError(have int, missing string) *backend.SchemaError {
	return &backend.SchemaError{
		Store:   fmt.Sprintf("postgres schema %q at %s", b.opts.Schema, b.host),
		Have:    have,
		Want:    LatestVersion(),
		Missing: missing,
	}
}

// Schema management. The migration statements run in one transaction:
// lock, create schema and version table, read the version, apply each
// missing migration file with search_path set to the schema, record it.

// sqlMigrateLock serialises migrations of one schema across processes.
//
//	$1 lock name text
//
// Returns one row (void); the lock is released at commit or rollback.
const sqlMigrateLock = `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`

// sqlCreateSchema creates the schema and the version table when missing.
// No parameters; returns nothing. Runs under sqlMigrateLock.
const sqlCreateSchema = `
CREATE SCHEMA IF NOT EXISTS {schema};
CREATE TABLE IF NOT EXISTS {schema}.jobq_schema_version (
	version    integer     PRIMARY KEY,
	applied_at timestamptz NOT NULL DEFAULT now()
)`

// sqlVersionTableExists tells whether the schema has a version table yet,
// without creating anything (a read-only user can open an up-to-date
// schema).
//
//	$1 qualified table name text
//
// Returns one row: (exists bool).
const sqlVersionTableExists = `SELECT to_regclass($1) IS NOT NULL`

// sqlSchemaState tells what an Existing open finds, without creating
// anything or taking a lock.
//
//	$1 schema name text, $2 its version table, $3 its jobs table,
//	$4 its failed_jobs table (qualified names, text)
//
// Returns one row: (schema_exists bool, has_version bool, has_tables bool).
const sqlSchemaState = `
SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1),
       to_regclass($2) IS NOT NULL,
       to_regclass($3) IS NOT NULL AND to_regclass($4) IS NOT NULL`

// sqlSchemaVersion reads the version in force.
// No parameters; returns one row: (version int), 0 when none was applied.
const sqlSchemaVersion = `SELECT coalesce(max(version), 0) FROM {schema}.jobq_schema_version`

// sqlSetSearchPath points unqualified names of a migration file at the
// schema for the rest of the migration transaction. No parameters.
const sqlSetSearchPath = `SET LOCAL search_path TO {schema}`

// sqlRecordVersion records an applied migration.
//
//	$1 version int
//
// Returns nothing.
const sqlRecordVersion = `INSERT INTO {schema}.jobq_schema_version (version) VALUES ($1)`
