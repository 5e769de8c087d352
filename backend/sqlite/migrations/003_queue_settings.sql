-- 003_queue_settings: per-queue pause and limits (backend.QueueController).
-- One row per queue that is paused or limited; a queue with neither has no
-- row, so a claim that finds the table empty takes the unlimited path.
-- rate_period is in microseconds; rate_window numbers the current window
-- (now / rate_period, aligned to the Unix epoch) and rate_count counts the
-- claims made in it.
CREATE TABLE queue_settings (
    queue       TEXT    PRIMARY KEY,
    paused      INTEGER NOT NULL DEFAULT 0,
    concurrency INTEGER NOT NULL DEFAULT 0,
    rate_limit  INTEGER NOT NULL DEFAULT 0,
    rate_period INTEGER NOT NULL DEFAULT 0,
    rate_window INTEGER NOT NULL DEFAULT 0,
    rate_count  INTEGER NOT NULL DEFAULT 0,
    updated_at  INTEGER NOT NULL
) WITHOUT ROWID;
