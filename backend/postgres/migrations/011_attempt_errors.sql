-- 011_attempt_errors: every failed attempt's error, time, duration and
-- worker (backend.AttemptError), not only the last error (issue 35).
--
-- errors is a jsonb array of entries, oldest first, at most
-- backend.MaxAttemptErrors (internal/attemptlog reads them); NULL for a job
-- that never failed, and for jobs queued before this migration, whose
-- earlier attempts were never recorded. The statements that record an
-- attempt's error append to it (appendErrors in queries_errors.go), a move
-- to failed_jobs copies it and a replay copies it back; a done job never
-- touches it. A build older than this one leaves it as it is: the attempts
-- its workers end are missing from the history, nothing else.
--
-- ADD COLUMN without a default changes only the catalog: no table rewrite,
-- however many jobs are queued.

ALTER TABLE jobs ADD COLUMN errors jsonb;
ALTER TABLE failed_jobs ADD COLUMN errors jsonb;
