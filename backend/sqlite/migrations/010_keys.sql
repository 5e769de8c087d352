-- 010_keys: job keys, turns and per-queue key rules (issue 36, see
-- backend.KeyController).
--
-- key is the job's key, NULL for none; turn its place in the rotation
-- between its queue's keys, 0 for a job without a key. Both are kept when
-- a job moves to failed_jobs and copied back by a replay, so a replayed
-- job runs again in its place. finished_jobs keeps the key for listing.
-- A task's job parameters carry the key until the task is released.
-- ADD COLUMN with a NULL or constant default rewrites no rows.
ALTER TABLE jobs ADD COLUMN key TEXT;
ALTER TABLE jobs ADD COLUMN turn INTEGER NOT NULL DEFAULT 0;
ALTER TABLE failed_jobs ADD COLUMN key TEXT;
ALTER TABLE failed_jobs ADD COLUMN turn INTEGER NOT NULL DEFAULT 0;
ALTER TABLE finished_jobs ADD COLUMN key TEXT;
ALTER TABLE workflow_tasks ADD COLUMN key TEXT;

-- A queue's key rules (backend.KeyRules): key_policy '' is the default.
-- A queue with key rules keeps its row, so its claims read them.
ALTER TABLE queue_settings ADD COLUMN key_limit INTEGER NOT NULL DEFAULT 0;
ALTER TABLE queue_settings ADD COLUMN key_ordered INTEGER NOT NULL DEFAULT 0;
ALTER TABLE queue_settings ADD COLUMN key_policy TEXT NOT NULL DEFAULT '';

-- Claim order is now priority, turn, due time, id. jobs_claim is rebuilt
-- with turn after priority, so the claim still walks it in its ORDER BY
-- and stops at its LIMIT; a job without a key has turn 0, so a queue
-- without keys is walked as before. key is carried last, so a claim of a
-- queue with key rules reads each entry's key without reading its row.
-- It keeps its name and its queue and available_at, which QueueStats
-- reads alone. Building it reads every pending job once, as 007 did.
DROP INDEX jobs_claim;
CREATE INDEX jobs_claim ON jobs (queue, priority DESC, turn, available_at, id, key)
    WHERE status = 'pending';

-- The per-key lookups go through one index of keyed jobs (a job without
-- a key costs it nothing), by queue, key, priority and ID. It holds no
-- column a claim changes, so a claim never moves its entries; a job's
-- insert and end do. Being ordered by key, it has a key's jobs together,
-- so a batch over many keys dirties a page of it per key, each written to
-- the WAL: one more such index that claims moved (a key's pending jobs in
-- claim order) made a drain over 1,000 keys with a limit of 1 cost half
-- as much again. Each lookup is a loose
-- scan over the key's priorities (one, most often), never its backlog:
-- the head of a key (its lowest live ID) and whether a lower ID is live;
-- a new job's turn (one past the turn of its key's newest live job); the
-- keys of a queue; and a key's due jobs, priority by priority, by ID,
-- which is their turn order (turns grow with IDs within a key, but for a
-- job replayed from the failed jobs, which keeps its turn). The lowest
-- turn of a queue's pending keyed jobs (the round being worked, which the
-- first job of an idle key joins) is read from jobs_claim, which orders
-- each priority's jobs by turn ...
CREATE INDEX jobs_key ON jobs (queue, key, priority DESC, id) WHERE key IS NOT NULL;
-- ... the reserved jobs of a key (its limit), few by construction ...
CREATE INDEX jobs_key_reserved ON jobs (queue, key) WHERE status = 'reserved' AND key IS NOT NULL;
-- ... and the failed jobs of a key (a held key, its head, FailedFilter.Key).
CREATE INDEX failed_jobs_key ON failed_jobs (queue, key, job_id) WHERE key IS NOT NULL;
