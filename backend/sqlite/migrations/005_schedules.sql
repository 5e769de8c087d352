-- 005_schedules: periodic schedules and the last tick each enqueued.
--
-- One row per schedule name. last_tick is the compare-and-set that makes a
-- tick enqueue once across every worker process: a scheduler advances it
-- only forward, in the write transaction that inserts the tick's job (see
-- schedule.go). Times are unix microseconds, like the jobs table's.
CREATE TABLE schedules (
    name             TEXT    PRIMARY KEY,
    spec             TEXT    NOT NULL,
    queue            TEXT    NOT NULL,
    type             TEXT    NOT NULL,
    created_at       INTEGER NOT NULL,
    registered_at    INTEGER NOT NULL,
    last_tick        INTEGER,
    last_enqueued_at INTEGER,
    last_job_id      INTEGER
) WITHOUT ROWID;
