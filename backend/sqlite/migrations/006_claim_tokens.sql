-- 006_claim_tokens: a fencing token per claim (see backend.JobRow.Token).
-- ADD COLUMN with a constant default rewrites no rows, so this runs at once
-- on a file of any size.

-- Raised by every claim, in the UPDATE that counts the attempt, and compared
-- by every write of the job's holder instead of the attempt, which a free
-- release un-counts and a replay resets. 0 for a job never claimed. Kept in
-- failed_jobs and copied back on replay, so a job's tokens only grow and a
-- holder from before its failure stays stale. Jobs reserved when this runs
-- carry 0, which no claim made after it hands out.
ALTER TABLE jobs ADD COLUMN claim_token INTEGER NOT NULL DEFAULT 0;
ALTER TABLE failed_jobs ADD COLUMN claim_token INTEGER NOT NULL DEFAULT 0;
