-- 001_init: the live queue and the dead-letter table.
-- Times are INTEGER unix microseconds from the backend's clock.

CREATE TABLE jobs (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    queue        TEXT    NOT NULL,
    type         TEXT    NOT NULL,
    payload      BLOB    NOT NULL,
    attempts     INTEGER NOT NULL DEFAULT 0,
    max_attempts INTEGER NOT NULL,
    priority     INTEGER NOT NULL DEFAULT 0,
    status       TEXT    NOT NULL CHECK (status IN ('pending', 'reserved')),
    available_at INTEGER NOT NULL,
    reserved_at  INTEGER,
    lease_until  INTEGER,
    created_at   INTEGER NOT NULL,
    last_error   TEXT    NOT NULL DEFAULT '',
    unique_key   TEXT
);

-- The claim path: due pending jobs of one queue in priority then id order.
-- available_at is carried in the index so the due check never reads the row.
CREATE INDEX jobs_claim ON jobs (queue, priority DESC, id, available_at)
    WHERE status = 'pending';

-- The lease sweep: reserved jobs by lease expiry.
CREATE INDEX jobs_lease ON jobs (lease_until)
    WHERE status = 'reserved';

-- Every row of jobs is live (pending or reserved), so a unique key is held by
-- at most one live job.
CREATE UNIQUE INDEX jobs_unique_key ON jobs (unique_key)
    WHERE unique_key IS NOT NULL;

CREATE TABLE failed_jobs (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id       INTEGER NOT NULL,
    queue        TEXT    NOT NULL,
    type         TEXT    NOT NULL,
    payload      BLOB    NOT NULL,
    attempts     INTEGER NOT NULL,
    max_attempts INTEGER NOT NULL,
    priority     INTEGER NOT NULL,
    error        TEXT    NOT NULL,
    unique_key   TEXT,
    created_at   INTEGER NOT NULL,
    failed_at    INTEGER NOT NULL
);

-- Filters of FailedList/Replay/Purge, each paging newest first by id.
CREATE INDEX failed_jobs_queue ON failed_jobs (queue, id);
CREATE INDEX failed_jobs_type ON failed_jobs (type, id);
CREATE INDEX failed_jobs_failed_at ON failed_jobs (failed_at);
