-- 012_errors_lz4: compress the attempt history (011) with lz4 rather than
-- the server's default, pglz.
--
-- A job that has failed many times carries a few KiB of history, which a
-- row past about 2 KiB stores compressed, and every retry's UPDATE
-- decompresses it, appends one entry and compresses it again. lz4 does
-- that several times faster than pglz (BenchmarkClaimRetry100 at twenty
-- entries a job: issue 35's closing note). From this migration on the
-- statements also write entries as compact arrays (internal/attemptlog).
--
-- SET COMPRESSION changes only the catalog and applies to values written
-- from then on. A server older than PostgreSQL 14 has no SET COMPRESSION,
-- and one built without lz4 refuses it: either keeps pglz, which is
-- slower, not wrong, so the migration goes on without it. EXECUTE, so
-- that an older server parses the statements only where it runs them.

DO $$
BEGIN
    IF current_setting('server_version_num')::int >= 140000 THEN
        EXECUTE 'ALTER TABLE jobs ALTER COLUMN errors SET COMPRESSION lz4';
        EXECUTE 'ALTER TABLE failed_jobs ALTER COLUMN errors SET COMPRESSION lz4';
    END IF;
EXCEPTION WHEN feature_not_supported OR invalid_parameter_value THEN
    RAISE NOTICE 'jobq: this server has no lz4; the attempt history stays compressed with pglz';
END
$$;
