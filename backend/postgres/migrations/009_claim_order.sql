-- 009_claim_order: claims take due jobs by priority, then by the time each
-- became due (available_at), then by id (issue 27), so a retried or
-- released job waits behind the jobs that were due before it came back.
--
-- jobs_claim_idx is rebuilt with available_at a key column before id, so
-- each queue's arm of the claim is still one ordered index scan that stops
-- after its LIMIT (no sort): the due check (available_at <= now()) is an
-- index condition on the same entries, and within a priority the due jobs
-- come first, the ones scheduled for later after them. It keeps its name,
-- which sqlClaimPlan's comment and the plan tests rely on.
--
-- The build runs in the migration transaction and blocks writes to jobs
-- while it reads the pending rows (CREATE INDEX CONCURRENTLY cannot run in
-- a transaction): 4.6 s per million pending jobs on a busy 2-CPU machine,
-- what building the old index took. A build older than this one refuses
-- the migrated schema; one already running goes on claiming in its old
-- order (priority, id), which this index no longer holds: each of its
-- claims sorts the queue's due jobs, slow on a deep backlog, so stop old
-- workers before (or as) new ones start.

DROP INDEX jobs_claim_idx;

CREATE INDEX jobs_claim_idx ON jobs (queue, priority DESC, available_at, id)
    WHERE status = 'pending';
