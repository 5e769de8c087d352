-- 008_workflows: workflows of tasks with dependencies (issue 28, see
-- backend.Workflower). Only new tables, new indexes on them and ADD COLUMN
-- with a NULL default: nothing rewrites jobs or failed_jobs, so this runs
-- at once on a file of any size.

-- One row per workflow. unfinished counts its tasks waiting or active: the
-- transaction that takes it to 0 ends the workflow. tasks is how many it
-- has, so a prune can bound the rows one transaction deletes.
CREATE TABLE workflows (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    name        TEXT    NOT NULL DEFAULT '',
    state       TEXT    NOT NULL CHECK (state IN ('running', 'succeeded', 'failed', 'cancelled')),
    tasks       INTEGER NOT NULL,
    unfinished  INTEGER NOT NULL,
    created_at  INTEGER NOT NULL,
    finished_at INTEGER
);

-- Listing by state newest first, and the running ones for stats and checks.
CREATE INDEX workflows_state ON workflows (state, id);
-- WorkflowPrune: ended workflows by age.
CREATE INDEX workflows_finished ON workflows (state, finished_at);

-- One row per task, idx being its place in the topological order
-- ValidateWorkflow returned (edges name tasks by it). The job's parameters
-- are kept so the task's job can be inserted when its last dependency ends
-- (delay counts from then; run_at is absolute). waiting counts the
-- dependencies not yet resolved while the task is waiting. job_id is set
-- once the job is inserted and kept after (a replay brings the same ID
-- back). cancel_cause says why a cancelled task was cancelled: 'dep' (a
-- dependency failed or was cancelled; a replay may bring it back), 'user'
-- (WorkflowCancel) or 'job' (its own job was cancelled).
CREATE TABLE workflow_tasks (
    workflow_id  INTEGER NOT NULL,
    idx          INTEGER NOT NULL,
    name         TEXT    NOT NULL,
    state        TEXT    NOT NULL CHECK (state IN ('waiting', 'active', 'succeeded', 'failed', 'cancelled')),
    waiting      INTEGER NOT NULL DEFAULT 0,
    job_id       INTEGER,
    queue        TEXT    NOT NULL,
    type         TEXT    NOT NULL,
    payload      BLOB    NOT NULL,
    priority     INTEGER NOT NULL,
    max_attempts INTEGER NOT NULL,
    delay_us     INTEGER NOT NULL DEFAULT 0,
    run_at       INTEGER,
    metadata     TEXT,
    result       BLOB,
    reason       TEXT    NOT NULL DEFAULT '',
    cancel_cause TEXT,
    finished_at  INTEGER,
    PRIMARY KEY (workflow_id, idx)
);

-- Ending a task when its job ends, and WorkflowDeps: the task of a job.
CREATE UNIQUE INDEX workflow_tasks_job ON workflow_tasks (job_id) WHERE job_id IS NOT NULL;
-- A workflow's tasks in one state (cancel, counts, the end check).
CREATE INDEX workflow_tasks_state ON workflow_tasks (workflow_id, state);

-- One row per dependency: to_idx waits for from_idx. pos is the
-- dependency's place in the dependant's Deps; policy 0 is DepCancel, 1
-- DepContinue. The key resolves a task's outgoing edges in one range.
CREATE TABLE workflow_edges (
    workflow_id INTEGER NOT NULL,
    from_idx    INTEGER NOT NULL,
    to_idx      INTEGER NOT NULL,
    pos         INTEGER NOT NULL,
    policy      INTEGER NOT NULL,
    PRIMARY KEY (workflow_id, from_idx, to_idx)
) WITHOUT ROWID;

-- A task's dependencies in Deps order.
CREATE INDEX workflow_edges_to ON workflow_edges (workflow_id, to_idx, pos);

-- The workflow of a task's job, NULL for every other job: the statements
-- that end a job skip a task's job (workflow_id IS NULL), and only then
-- does a second one end it with its task, so only a task's job costs the
-- workflow any work. Kept in failed_jobs, so a replay knows the job is a
-- task's. The claim path never reads it.
ALTER TABLE jobs ADD COLUMN workflow_id INTEGER;
ALTER TABLE failed_jobs ADD COLUMN workflow_id INTEGER;
