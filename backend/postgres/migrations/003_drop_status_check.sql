-- 003_drop_status_check: drop the CHECK on jobs.status. The server
-- compiles a table's CHECK expressions afresh for every statement that
-- writes it, and for a one-row insert that cost was measured here at 8 % of
-- the whole statement (pgbench, one connection: 5,400 against 5,860
-- inserts/s). Only jobq's own statements write status, always 'pending' or
-- 'reserved', and the backend refuses to read a row with any other value.

ALTER TABLE jobs DROP CONSTRAINT IF EXISTS jobs_status_check;
