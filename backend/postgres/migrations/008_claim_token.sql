-- 008_claim_token: the fencing token of a job's latest claim.
--
-- Every claim raises claim_token by one, and every write of a holder is
-- fenced on it (id, claim_token, status) instead of on attempts: a free
-- release un-counts the attempt and a replay resets it, so two claims of
-- one job could carry the same (id, attempts) and a late write of the
-- first holder would land on the second's claim. The token only grows:
-- failed_jobs keeps it when a job moves there and replay brings it back,
-- so a holder from before the failure stays stale after the replay.
-- finished_jobs does not keep it: nothing leaves that table but a prune.
--
-- Jobs queued before this migration start at 0, as a new job does. A
-- build older than this one neither raises nor checks the token (and
-- refuses to open the schema once it is migrated, but processes already
-- running go on): until every worker runs this build or a newer one, the
-- claims old workers make are fenced as before, by attempts, with the hole
-- this column closes.
--
-- A constant default changes only the catalog on PostgreSQL 11 and later:
-- no table rewrite, however many jobs are queued.

ALTER TABLE jobs ADD COLUMN claim_token bigint NOT NULL DEFAULT 0;
ALTER TABLE failed_jobs ADD COLUMN claim_token bigint NOT NULL DEFAULT 0;
