-- 013_progress: a running job's progress (issue 37).
--
-- progress_token is the claim_token of the claim that reported it: a read
-- shows progress only while the job is reserved under that very claim, so
-- a job given back (released, retried, rescued) or claimed again shows
-- none without any other statement clearing these columns, and the claim
-- path neither reads nor writes them. progress_at is unix microseconds
-- from the backend's clock. ADD COLUMN with a NULL default rewrites no
-- rows.
ALTER TABLE jobs ADD COLUMN progress_token INTEGER;
ALTER TABLE jobs ADD COLUMN progress_percent INTEGER;
ALTER TABLE jobs ADD COLUMN progress_message TEXT;
ALTER TABLE jobs ADD COLUMN progress_at INTEGER;
