-- 014_unique_states: the states in which a unique key's holder keeps new
-- jobs of the key out (backend.UniqueStates).
--
-- unique_states is the holder's set as its bits, NULL for every state
-- (nearly every job, so the insert statements never write it). A job
-- whose state is out of its set loses its key to the next insert of it:
-- that insert sets the old holder's unique_key to NULL in its own write
-- transaction, so jobs_unique_key still admits one holder. ADD COLUMN
-- with a NULL default rewrites no rows.
ALTER TABLE jobs ADD COLUMN unique_states INTEGER;
