-- 015_unique_completed: a completed job kept among the finished jobs
-- holding its unique key (backend.UniqueCompleted).
--
-- unique_held is 1 on a kept completed job that held its key when it
-- completed and whose set of states has UniqueCompleted; NULL on every
-- other row (nearly all, and every row from before this migration: they
-- hold nothing). The key is the row's unique_key, so deleting the row (the
-- prune) frees the key with it, and no statement ever clears the column.
-- The insert looks a batch's keys up in finished_jobs_unique_held beside
-- jobs_unique_key, in its write transaction: a partial index holding only
-- the holders, so an insert of keys no completed job holds probes an index
-- that is nearly always empty, and UNIQUE lets the store itself refuse a
-- second completed holder of a key. ADD COLUMN with a NULL default
-- rewrites no rows; the index reads finished_jobs once and writes nothing
-- for the old rows.
ALTER TABLE finished_jobs ADD COLUMN unique_held INTEGER;
CREATE UNIQUE INDEX finished_jobs_unique_held ON finished_jobs (unique_key) WHERE unique_held IS NOT NULL;
