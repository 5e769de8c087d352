-- 018_unique_states: the states in which a unique key's holder keeps new
-- jobs of the key out (backend.UniqueStates).
--
-- unique_states is the holder's set as its bits, NULL for every state
-- (nearly every job). A job whose state is out of its set loses its key
-- to the next insert of it: that insert's statement sets the old
-- holder's unique_key to NULL before inserting, so jobs_unique_key still
-- admits one holder. Not indexed, and ADD COLUMN with a NULL default
-- rewrites no rows.
ALTER TABLE jobs ADD COLUMN unique_states smallint;
