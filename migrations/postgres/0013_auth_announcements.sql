-- The credential lookups now also read the account's own tool-call budget (`calls_per_hour`,
-- for the quota check, so that it costs no statement of its own), so a change of it is
-- announced to the validation caches like a change of the account's status (see 0012).
DROP TRIGGER auth_gen_accounts ON accounts;
CREATE TRIGGER auth_gen_accounts AFTER UPDATE OF status, calls_per_hour OR DELETE ON accounts
    FOR EACH STATEMENT EXECUTE FUNCTION gatehouse_auth_changed();
