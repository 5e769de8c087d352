-- 002_metadata_releases: job metadata and counted releases.
-- ADD COLUMN with a NULL or constant default rewrites no rows, so this runs
-- at once on a file of any size.

-- The string map given at insert, as a JSON object; NULL when none. Kept
-- when a job moves to failed_jobs and back on replay.
ALTER TABLE jobs ADD COLUMN metadata TEXT;
ALTER TABLE failed_jobs ADD COLUMN metadata TEXT;

-- How many times JobRelease gave the job back (see backend.MaxFreeReleases).
-- Not kept in failed_jobs: a replay starts the count again.
ALTER TABLE jobs ADD COLUMN releases INTEGER NOT NULL DEFAULT 0;
