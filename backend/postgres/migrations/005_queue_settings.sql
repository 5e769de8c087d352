-- 005_queue_settings: per-queue pause and limits (backend.QueueController).
--
-- One row per queue that is paused or limited; a queue with neither has no
-- row. The claim skips every queue with a row in its one statement (an
-- index lookup per queue name in a table of a few rows) and claims the
-- limited ones in a transaction of their own that locks the queue's row,
-- so claimers of a limited queue take turns and none can overshoot.
-- rate_window numbers the current window (epoch microseconds divided by
-- rate_period_us) and rate_count counts the claims made in it.

CREATE TABLE queue_settings (
    queue          text        PRIMARY KEY,
    paused         boolean     NOT NULL DEFAULT false,
    concurrency    integer     NOT NULL DEFAULT 0,
    rate_limit     integer     NOT NULL DEFAULT 0,
    rate_period_us bigint      NOT NULL DEFAULT 0,
    rate_window    bigint      NOT NULL DEFAULT 0,
    rate_count     integer     NOT NULL DEFAULT 0,
    updated_at     timestamptz NOT NULL DEFAULT now()
);
