-- 011_results: a kept completed job keeps its handler's result (issue 37).
--
-- result is the JSON the handler recorded (Outcome.Result), written by the
-- statement that moves the completed job here, so it shares the
-- completion's fence and transaction; NULL for none and for cancelled
-- jobs. BLOB, like workflow_tasks.result: the bytes are stored as given.
-- ADD COLUMN with a NULL default rewrites no rows.
ALTER TABLE finished_jobs ADD COLUMN result BLOB;
