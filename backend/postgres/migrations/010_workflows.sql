-- 010_workflows: workflows of tasks with dependencies (issue 28, see
-- backend.Workflower and workflow_*.go).
--
-- Only new tables, indexes on them, and nullable columns without a default
-- on jobs and failed_jobs: the ALTERs change only the catalog, so this
-- runs at once however many jobs are queued, and neither the claim
-- statement nor its index changes.

-- One row per workflow. unfinished counts its tasks waiting or active, and
-- failed_tasks those that ended failed or cancelled: the transaction that
-- takes unfinished to 0 ends the workflow, succeeded when failed_tasks is
-- 0. Both change only by row-locked UPDATEs of this row, each the last
-- lock its transaction takes (see workflow_end.go). tasks bounds the rows a
-- prune chunk deletes.
CREATE TABLE workflows (
    id           bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name         text        NOT NULL DEFAULT '',
    state        text        NOT NULL,
    tasks        integer     NOT NULL,
    unfinished   integer     NOT NULL,
    failed_tasks integer     NOT NULL DEFAULT 0,
    created_at   timestamptz NOT NULL DEFAULT now(),
    finished_at  timestamptz
);

-- Listing by state newest first; stats and checks read the running ones.
CREATE INDEX workflows_state_idx ON workflows (state, id);
-- WorkflowPrune: ended workflows by age.
CREATE INDEX workflows_finished_idx ON workflows (state, finished_at);

-- One row per task; idx is its place in the topological order
-- ValidateWorkflow returned, so a task's dependants all have a higher idx
-- and locking tasks in idx order is locking them in one global order. The
-- job's parameters are kept until the release inserts the job (delay_us
-- counts from then; run_at is absolute). waiting counts the dependencies
-- not yet resolved while the task waits, changed only by a row-locked
-- UPDATE ... SET waiting = waiting - n. job_id is set at the release and
-- kept (a replay brings the same ID back). qname is the name as Go's %q
-- quotes it, so a statement can write backend.DepCancelReason. cancel_cause
-- says why a cancelled task was cancelled: 'dep' (a dependency failed or
-- was cancelled; a replay may bring it back), 'user' (WorkflowCancel) or
-- 'job' (its own job was cancelled). result is json, not jsonb: the bytes
-- come back as the handler gave them.
CREATE TABLE workflow_tasks (
    workflow_id  bigint      NOT NULL,
    idx          integer     NOT NULL,
    name         text        NOT NULL,
    qname        text        NOT NULL,
    state        text        NOT NULL,
    waiting      integer     NOT NULL DEFAULT 0,
    job_id       bigint,
    queue        text        NOT NULL,
    type         text        NOT NULL,
    payload      json        NOT NULL,
    priority     integer     NOT NULL,
    max_attempts integer     NOT NULL,
    delay_us     bigint      NOT NULL DEFAULT 0,
    run_at       timestamptz,
    metadata     jsonb,
    result       json,
    reason       text,
    cancel_cause text,
    finished_at  timestamptz,
    PRIMARY KEY (workflow_id, idx)
) WITH (
    -- A join's row is updated once per dependency (a fan-in of 1,000 is
    -- 1,000 updates of one row): room on the page keeps them HOT.
    fillfactor = 80
);

-- Ending a task when its job ends, and WorkflowDeps: the task of a job. A
-- job is at most one task's.
CREATE UNIQUE INDEX workflow_tasks_job_idx ON workflow_tasks (job_id) WHERE job_id IS NOT NULL;

-- One row per dependency: to_idx waits for from_idx. pos is the
-- dependency's place in the dependant's Deps; policy 0 is DepCancel, 1
-- DepContinue. The key resolves a task's outgoing edges in one range scan.
CREATE TABLE workflow_edges (
    workflow_id bigint   NOT NULL,
    from_idx    integer  NOT NULL,
    to_idx      integer  NOT NULL,
    pos         integer  NOT NULL,
    policy      smallint NOT NULL,
    PRIMARY KEY (workflow_id, from_idx, to_idx)
);

-- A task's dependencies in Deps order.
CREATE INDEX workflow_edges_to_idx ON workflow_edges (workflow_id, to_idx, pos);

-- The workflow of a task's job, NULL for every other job: the statements
-- that end a job check it on the row they already touch, so a job that is
-- no task's costs the workflows nothing. Kept in failed_jobs, so a replay
-- knows the job is a task's.
ALTER TABLE jobs ADD COLUMN workflow_id bigint;
ALTER TABLE failed_jobs ADD COLUMN workflow_id bigint;
