-- 017_progress: a running job's progress (issue 37).
--
-- progress_token is the claim_token of the claim that reported it: a read
-- shows progress only while the job is held (reserved or cancelling) under
-- that very claim, so a job given back (released, retried, rescued) or
-- claimed again shows none without any other statement clearing these
-- columns, and the claim path neither reads nor writes them. None of them
-- is indexed, so a report is a HOT update. ADD COLUMN with a NULL default
-- rewrites no rows.
ALTER TABLE jobs
    ADD COLUMN progress_token bigint,
    ADD COLUMN progress_percent smallint,
    ADD COLUMN progress_message text,
    ADD COLUMN progress_at timestamptz;
