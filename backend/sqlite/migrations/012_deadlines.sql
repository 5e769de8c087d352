-- 012_deadlines: a job's latest start time (issue 37).
--
-- deadline is unix microseconds, NULL for none (nearly every job): the
-- claim filters on it after walking jobs_claim as before, and the lease
-- sweep finds the expired pending jobs through jobs_deadline, a partial
-- index that holds only pending jobs with a deadline, so the inserts and
-- claims of the others never touch it. ADD COLUMN with a NULL default
-- rewrites no rows.
ALTER TABLE jobs ADD COLUMN deadline INTEGER;
CREATE INDEX jobs_deadline ON jobs (deadline) WHERE status = 'pending' AND deadline IS NOT NULL;
