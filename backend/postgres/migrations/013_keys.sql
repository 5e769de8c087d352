-- 013_keys: job keys, turns and per-queue key rules (issue 36, see
-- backend.KeyController and keys*.go).
--
-- key is the job's key (NULL: none) and turn its place in the rotation
-- between its queue's keys (0 for a job without a key). Both are kept in
-- failed_jobs, so a replay puts the job back in its place, and the key in
-- finished_jobs and in workflow_tasks (a task's job carries it). Columns
-- without a default, or with a constant one, change only the catalog: no
-- table rewrite, however many jobs are queued.

ALTER TABLE jobs ADD COLUMN key text;
ALTER TABLE jobs ADD COLUMN turn bigint NOT NULL DEFAULT 0;
ALTER TABLE failed_jobs ADD COLUMN key text;
ALTER TABLE failed_jobs ADD COLUMN turn bigint NOT NULL DEFAULT 0;
ALTER TABLE finished_jobs ADD COLUMN key text;
ALTER TABLE workflow_tasks ADD COLUMN key text;

-- The queue's key rules (backend.KeyRules): key_policy is OnFailure as
-- set ('' is hold for an ordered queue). scan_* is where the last claim
-- of a keyed queue stopped reading blocked jobs (see sqlClaimKeyed): the
-- next claim reads on from there, so jobs behind a long run of blocked
-- ones are reached without any one claim reading them all.
ALTER TABLE queue_settings
    ADD COLUMN key_limit     integer     NOT NULL DEFAULT 0,
    ADD COLUMN key_ordered   boolean     NOT NULL DEFAULT false,
    ADD COLUMN key_policy    text        NOT NULL DEFAULT '',
    ADD COLUMN scan_priority integer,
    ADD COLUMN scan_turn     bigint,
    ADD COLUMN scan_at       timestamptz,
    ADD COLUMN scan_id       bigint;

-- The claim order is now priority, turn, due time, id: jobs_claim_idx
-- gets turn before available_at, so each queue's arm of the claim is
-- still one ordered index scan that stops after its LIMIT. Every job of a
-- queue without keys has turn 0, so its scan reads what it read before.
-- The build blocks writes to jobs while it reads the pending rows, as
-- 009's did. A build older than this one refuses the migrated schema;
-- one already running claims in its old order, which this index no
-- longer serves as one ordered scan (each of its claims sorts the queue's
-- due jobs), and moves keyed jobs to failed_jobs without their key: stop
-- old workers before (or as) new ones start.
DROP INDEX jobs_claim_idx;
CREATE INDEX jobs_claim_idx ON jobs (queue, priority DESC, turn, available_at, id)
    WHERE status = 'pending';

-- Per-key probes, each on keyed jobs only (a queue without keys pays
-- nothing for them): the lowest live id of a key (ordered keys) and the
-- keys' listing; the highest turn of a key (a new job's turn); the lowest
-- pending turn of a queue (a new key's first turn); a key's held jobs
-- (its count against the limit); a key's failed jobs (a held key).
CREATE INDEX jobs_key_idx ON jobs (queue, key, id) WHERE key IS NOT NULL;
CREATE INDEX jobs_key_turn_idx ON jobs (queue, key, turn) WHERE key IS NOT NULL;
CREATE INDEX jobs_key_pending_idx ON jobs (queue, turn) WHERE key IS NOT NULL AND status = 'pending';
CREATE INDEX jobs_key_held_idx ON jobs (queue, key) WHERE key IS NOT NULL AND status <> 'pending';
CREATE INDEX failed_jobs_key_idx ON failed_jobs (queue, key, job_id) WHERE key IS NOT NULL;

-- Halt (backend.KeyHalt): when the head of an ordered key (no live job of
-- the key with a lower id) moves to failed_jobs or ends cancelled in
-- finished_jobs, under a queue whose policy is halt, the key's pending
-- jobs above it end cancelled in the same transaction. A trigger, so that
-- every path that fails or cancels a job (outcomes, releases, sweeps,
-- cancels, workflow tasks) does it without each statement repeating it;
-- its WHEN keeps it off rows without a key, so the hot paths never call
-- it. The halted rows it inserts into finished_jobs fire it again, one
-- level down, where it stops at once. The error text quotes the key as
-- Go's %q does for printable text (backend.HaltedError); the backend
-- rewrites it from halt_head on read, exactly. Jobs of workflow tasks
-- are left: they end with their tasks.
ALTER TABLE finished_jobs ADD COLUMN halt_head bigint;

CREATE FUNCTION key_halt() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    head bigint;
BEGIN
    IF pg_trigger_depth() > 1 THEN
        RETURN NULL;
    END IF;
    IF TG_TABLE_NAME = 'failed_jobs' THEN
        head := NEW.job_id;
    ELSE
        head := NEW.id;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM queue_settings s
                   WHERE s.queue = NEW.queue AND s.key_ordered AND s.key_policy = 'halt') THEN
        RETURN NULL;
    END IF;
    IF EXISTS (SELECT 1 FROM jobs j WHERE j.queue = NEW.queue AND j.key = NEW.key AND j.id < head) THEN
        RETURN NULL;
    END IF;
    WITH gone AS (
        DELETE FROM jobs j
        WHERE j.queue = NEW.queue AND j.key = NEW.key AND j.id > head
          AND j.status = 'pending' AND j.workflow_id IS NULL
        RETURNING j.*
    )
    INSERT INTO finished_jobs
           (id, state, queue, type, payload, attempts, max_attempts, priority, last_error,
            unique_key, metadata, created_at, finished_at, key, halt_head)
    SELECT id, 'cancelled', queue, type, payload, attempts, max_attempts, priority,
           'halted: job ' || head || ', the head of key "'
               || replace(replace(key, '\', '\\'), '"', '\"') || '", failed or was cancelled',
           unique_key, metadata, created_at, now(), key, head
    FROM gone;
    RETURN NULL;
END
$$;

CREATE TRIGGER failed_jobs_key_halt AFTER INSERT ON failed_jobs
    FOR EACH ROW WHEN (NEW.key IS NOT NULL) EXECUTE PROCEDURE key_halt();
CREATE TRIGGER finished_jobs_key_halt AFTER INSERT ON finished_jobs
    FOR EACH ROW WHEN (NEW.key IS NOT NULL AND NEW.state = 'cancelled') EXECUTE PROCEDURE key_halt();
