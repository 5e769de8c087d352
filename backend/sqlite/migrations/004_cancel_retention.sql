-- 004_cancel_retention: cancelling jobs and keeping finished ones.
-- Only ADD COLUMN with a NULL default and new tables and indexes: nothing
-- rewrites the jobs table, so this runs at once on a file of any size.

-- Set (backend clock) on a reserved job whose cancel was requested: its
-- holder's writes are refused from then on and the job ends cancelled.
-- NULL for every other job, so the claim path never reads it.
ALTER TABLE jobs ADD COLUMN cancelled_at INTEGER;

-- What workers poll to stop cancelled handlers: only the few cancelling
-- rows are in it.
CREATE INDEX jobs_cancelling ON jobs (id) WHERE cancelled_at IS NOT NULL;

-- Finished jobs kept for a while: completed ones when the worker keeps them
-- (retention), cancelled ones always. Apart from jobs, so the claim path
-- and its indexes never see them. id is the job's id.
CREATE TABLE finished_jobs (
    id           INTEGER PRIMARY KEY,
    state        TEXT    NOT NULL,
    queue        TEXT    NOT NULL,
    type         TEXT    NOT NULL,
    payload      BLOB    NOT NULL,
    attempts     INTEGER NOT NULL,
    max_attempts INTEGER NOT NULL,
    priority     INTEGER NOT NULL,
    last_error   TEXT    NOT NULL DEFAULT '',
    unique_key   TEXT,
    metadata     TEXT,
    created_at   INTEGER NOT NULL,
    finished_at  INTEGER NOT NULL
);

-- Listing by state newest first, and pruning by state and age.
CREATE INDEX finished_jobs_state ON finished_jobs (state, id);
CREATE INDEX finished_jobs_finished_at ON finished_jobs (state, finished_at);

-- A cancel of a job that is no longer live says whether it failed.
CREATE INDEX failed_jobs_job_id ON failed_jobs (job_id);

-- Named turns with an expiry: one worker process at a time prunes.
CREATE TABLE jobq_turns (
    name   TEXT    PRIMARY KEY,
    holder TEXT    NOT NULL,
    until  INTEGER NOT NULL
);
