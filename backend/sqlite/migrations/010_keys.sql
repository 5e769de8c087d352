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

-- The per-key lookups, each a probe of an index holding keyed jobs only
-- (a job without a key costs them nothing): the head of a key (its
-- lowest live ID) and whether a lower ID is live ...
CREATE INDEX jobs_key ON jobs (queue, key, id) WHERE key IS NOT NULL;
-- ... the highest turn of a key (a new job's turn) ...
CREATE INDEX jobs_key_turn ON jobs (queue, key, turn) WHERE key IS NOT NULL;
-- ... the lowest turn among a queue's pending keyed jobs (the round being
-- worked, which the first job of an idle key joins) ...
CREATE INDEX jobs_turn ON jobs (queue, turn) WHERE status = 'pending' AND key IS NOT NULL;
-- ... the reserved jobs of a key (its limit), few by construction ...
CREATE INDEX jobs_key_reserved ON jobs (queue, key) WHERE status = 'reserved' AND key IS NOT NULL;
-- ... a key's pending jobs in claim order (a claim that takes each key's
-- next jobs rather than walk past a blocked key's backlog) ...
CREATE INDEX jobs_key_claim ON jobs (queue, key, priority DESC, turn, available_at, id)
    WHERE status = 'pending' AND key IS NOT NULL;
-- ... and the failed jobs of a key (a held key, its head, FailedFilter.Key).
CREATE INDEX failed_jobs_key ON failed_jobs (queue, key, job_id) WHERE key IS NOT NULL;
