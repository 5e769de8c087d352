-- 015_results: a kept completed job keeps its handler's result (issue 37).
--
-- result is the JSON the handler recorded (Outcome.Result), written by
-- the statement that moves the completed job here (sqlCompleteKeep, or
-- sqlTaskSettle for a task's job), so it shares the completion's fence;
-- NULL for none and for cancelled jobs.
-- json, not jsonb, as workflow_tasks.result: the bytes read back are the
-- bytes written. ADD COLUMN with a NULL default rewrites no rows.
ALTER TABLE finished_jobs ADD COLUMN result json;
