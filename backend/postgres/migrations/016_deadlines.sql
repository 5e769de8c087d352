-- 016_deadlines: a job's latest start time (issue 37).
--
-- deadline is NULL for none (nearly every job). The claim tests it as a
-- filter on the rows its walk of jobs_claim_idx finds, so its plan is
-- the one it was; the lease sweep finds the expired pending jobs through
-- jobs_deadline_idx, a partial index of only the pending jobs with a
-- deadline, which the inserts and claims of the others never touch.
-- ADD COLUMN with a NULL default rewrites no rows.
ALTER TABLE jobs ADD COLUMN deadline timestamptz;
CREATE INDEX jobs_deadline_idx ON jobs (deadline) WHERE status = 'pending' AND deadline IS NOT NULL;
