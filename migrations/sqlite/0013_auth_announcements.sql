-- The credential lookups now also read the account's own tool-call budget (`calls_per_hour`,
-- for the quota check, so that it costs no statement of its own), so a change of it raises the
-- validation cache's generation like a change of the account's status (see 0012).
DROP TRIGGER auth_gen_accounts_update;
CREATE TRIGGER auth_gen_accounts_update AFTER UPDATE OF status, calls_per_hour ON accounts
BEGIN UPDATE auth_generation SET generation = generation + 1 WHERE id = 1; END;
