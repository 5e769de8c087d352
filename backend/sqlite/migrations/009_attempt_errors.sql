-- 009_attempt_errors: every failed attempt's error, time, duration and
-- worker (backend.AttemptError), not only the last error (issue 35).
--
-- errors is a JSON array of entries, oldest first, at most
-- backend.MaxAttemptErrors (internal/attemptlog reads them); NULL for a job
-- that never failed, and for the jobs of files migrated from before, whose
-- earlier attempts were never recorded. The statements that record an
-- attempt's error append to it with json_insert (appendErrorSQL); a move to
-- failed_jobs copies it, a replay copies it back. ADD COLUMN without a
-- default rewrites no rows, so this runs at once on a file of any size.
ALTER TABLE jobs ADD COLUMN errors TEXT;
ALTER TABLE failed_jobs ADD COLUMN errors TEXT;
