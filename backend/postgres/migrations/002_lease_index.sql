-- 002_lease_index: index held jobs by lease_until IS NOT NULL instead of
-- status = 'reserved'. The two mark the same rows (a claim sets
-- lease_until; every way back to pending clears it), but a partial index on
-- status = 'reserved' matches the fence of every outcome write
-- (id = ... AND status = 'reserved'), and when the statistics were taken
-- while no job was held the planner expects one reserved row and scans this
-- index for each outcome instead of looking the ids up in the primary key:
-- a batch of 100 outcomes then compared every held job with every outcome.
-- The sweep's lease_until < now() implies the new predicate, so it still
-- uses the index; nothing that filters on status can.

DROP INDEX jobs_lease_idx;

CREATE INDEX jobs_lease_idx ON jobs (lease_until)
    WHERE lease_until IS NOT NULL;
