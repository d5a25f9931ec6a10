-- The credential lookups join accounts and projects by their `id` (see 0012), so a change of
-- an id is announced to the validation caches like a change of the status it guards; no path
-- of Gatehouse changes an id, so this costs nothing in use. Found by the test that reads every
-- cached lookup's SQL against these triggers (src/store/trigger_coverage.rs).
DROP TRIGGER auth_gen_accounts ON accounts;
CREATE TRIGGER auth_gen_accounts AFTER UPDATE OF id, status, calls_per_hour OR DELETE ON accounts
    FOR EACH STATEMENT EXECUTE FUNCTION gatehouse_auth_changed();
DROP TRIGGER auth_gen_projects ON projects;
CREATE TRIGGER auth_gen_projects AFTER UPDATE OF id, status OR DELETE ON projects
    FOR EACH STATEMENT EXECUTE FUNCTION gatehouse_auth_changed();
