-- 004_metadata_releases: job metadata and counted releases.
--
-- metadata: the job's string map (trace context, users' tags) as a JSON
-- object, NULL when it has none, kept in failed_jobs and brought back on
-- replay. jsonb, so operators can query a key (metadata->>'tenant'); only
-- jobs that carry metadata pay for parsing it.
--
-- releases: how many times JobRelease gave the job back (shutdown); after
-- the free ones a release counts the attempt (see Backend.JobRelease).
-- Replay resets it, so failed_jobs does not keep it.
--
-- Both columns are added without a volatile default, so the ALTERs change
-- only the catalog: no table rewrite, however many jobs are queued.

ALTER TABLE jobs ADD COLUMN metadata jsonb;
ALTER TABLE jobs ADD COLUMN releases integer NOT NULL DEFAULT 0;
ALTER TABLE failed_jobs ADD COLUMN metadata jsonb;
