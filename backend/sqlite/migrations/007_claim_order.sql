-- 007_claim_order: claims take due jobs by priority, then by the time each
-- became due (available_at), then by id (issue 27), so a retried or
-- released job waits behind the jobs that were due before it came back.
--
-- jobs_claim is rebuilt with available_at before id, so the claim still
-- walks the index in its ORDER BY and stops at its LIMIT; within a
-- priority the due jobs come first and the ones scheduled for later after
-- them. It keeps its name (queries name it with INDEXED BY) and its
-- columns, so QueueStats still reads it alone. Building it reads every
-- pending job once, under the migration's write lock: 1.8 s per million
-- pending jobs on a busy 2-CPU machine, what building the old one took. A
-- process of an older build already running goes on claiming in its old
-- order (priority, id), which this index no longer holds: each of its
-- claims sorts the queue's due jobs, slow on a deep backlog, so stop old
-- workers before (or as) new ones start.

DROP INDEX jobs_claim;

CREATE INDEX jobs_claim ON jobs (queue, priority DESC, available_at, id)
    WHERE status = 'pending';
