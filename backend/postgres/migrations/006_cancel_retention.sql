-- 006_cancel_retention: cancelling jobs and keeping finished ones.
--
-- A reserved job whose cancel was requested gets status 'cancelling'
-- (migration 003 dropped the CHECK): every write of its holder is fenced on
-- status 'reserved', so the hot statements refuse it unchanged, and the
-- backend then ends it cancelled. This index finds the few cancelling jobs
-- for the workers' poll and the sweep. Building it reads the jobs table
-- once (it holds no row until a cancel).
CREATE INDEX jobs_cancelling_idx ON jobs (lease_until)
    WHERE status = 'cancelling';

-- Finished jobs kept for a while: completed ones when the worker keeps them
-- (retention), cancelled ones always. Apart from jobs, so the claim path,
-- its indexes and the vacuumer never see them. id is the job's id.
CREATE TABLE finished_jobs (
    id           bigint      PRIMARY KEY,
    state        text        NOT NULL,
    queue        text        NOT NULL,
    type         text        NOT NULL,
    payload      json        NOT NULL,
    attempts     integer     NOT NULL,
    max_attempts integer     NOT NULL,
    priority     integer     NOT NULL,
    last_error   text,
    unique_key   text,
    metadata     jsonb,
    created_at   timestamptz NOT NULL,
    finished_at  timestamptz NOT NULL DEFAULT now()
);

-- Listing by state newest first, and pruning by state and age.
CREATE INDEX finished_jobs_state_idx ON finished_jobs (state, id);
CREATE INDEX finished_jobs_finished_at_idx ON finished_jobs (state, finished_at);

-- A cancel of a job that is no longer live says whether it failed.
CREATE INDEX failed_jobs_job_id_idx ON failed_jobs (job_id);

-- Named turns with an expiry: one worker process at a time prunes, across
-- the chunked transactions of a prune (an advisory lock would last one).
CREATE TABLE jobq_turns (
    name   text        PRIMARY KEY,
    holder text        NOT NULL,
    until  timestamptz NOT NULL
);
