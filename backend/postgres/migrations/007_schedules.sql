-- 007_schedules: periodic schedules and the last tick each enqueued.
--
-- One row per schedule name. last_tick is the compare-and-set that makes a
-- tick enqueue once across every worker process: the statement that
-- inserts a tick's job advances it, only forward, in the same statement
-- (see schedule.go), and a concurrent advance of the same row waits for
-- the row lock and then re-checks the condition against the committed
-- value. A small, rarely written table: no storage tuning.

CREATE TABLE schedules (
    name             text        PRIMARY KEY,
    spec             text        NOT NULL,
    queue            text        NOT NULL,
    type             text        NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    registered_at    timestamptz NOT NULL DEFAULT now(),
    last_tick        timestamptz,
    last_enqueued_at timestamptz,
    last_job_id      bigint
);
