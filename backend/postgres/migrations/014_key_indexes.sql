-- 014_key_indexes: a claim of a keyed job writes three index entries, not
-- five (issue 36: a keyed drain at least half as fast as a plain one).
--
-- A claim moves a job from pending to reserved, an update that is never
-- HOT (status is in partial indexes' predicates), so the reserved row
-- gets an entry in every index whose predicate it matches. jobs_key_idx
-- and jobs_key_turn_idx covered every keyed job whatever its status: with
-- jobs_pkey, jobs_lease_idx and jobs_key_held_idx, a keyed claim wrote
-- five entries a job against a plain claim's two, about a quarter of the
-- keyed claim statement's time. Both now cover pending jobs only, which
-- a claimed job leaves, and jobs_key_held_idx, which it enters, carries
-- id and turn for the held side: each probe of all of a key's live jobs
-- (its lowest id, its highest turn, whether a live job precedes a head)
-- becomes one probe of each side, of the held side (the key's running
-- jobs) an index-only read. A job going back to pending writes the
-- entries it wrote before.
--
-- The builds block writes to jobs while they read the keyed rows, as
-- 013's did. A build older than this one refuses the migrated schema; one
-- already running probes a key's live jobs without the status these
-- indexes need, reading the queue's rows for each keyed job it inserts:
-- stop old workers before (or as) new ones start.

DROP INDEX jobs_key_idx;
DROP INDEX jobs_key_turn_idx;
DROP INDEX jobs_key_held_idx;
CREATE INDEX jobs_key_idx ON jobs (queue, key, id) WHERE key IS NOT NULL AND status = 'pending';
CREATE INDEX jobs_key_turn_idx ON jobs (queue, key, turn) WHERE key IS NOT NULL AND status = 'pending';
CREATE INDEX jobs_key_held_idx ON jobs (queue, key, id) INCLUDE (turn) WHERE key IS NOT NULL AND status <> 'pending';

-- The halt trigger of 013, its "a live job of the key precedes the head"
-- asked of each side.
CREATE OR REPLACE FUNCTION key_halt() RETURNS trigger
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
    IF EXISTS (SELECT 1 FROM jobs j
               WHERE j.queue = NEW.queue AND j.key = NEW.key AND j.id < head AND j.status = 'pending')
       OR EXISTS (SELECT 1 FROM jobs j
                  WHERE j.queue = NEW.queue AND j.key = NEW.key AND j.id < head AND j.status <> 'pending') THEN
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
