-- The credential lookups join accounts and projects by their `id` (see 0012), so a change of
-- an id raises the validation cache's generation like a change of the status it guards; no
-- path of Gatehouse changes an id, so this costs nothing in use. Found by the test that reads
-- every cached lookup's SQL against these triggers (src/store/trigger_coverage.rs).
DROP TRIGGER auth_gen_accounts_update;
CREATE TRIGGER auth_gen_accounts_update AFTER UPDATE OF id, status, calls_per_hour ON accounts
BEGIN UPDATE auth_generation SET generation = generation + 1 WHERE id = 1; END;
DROP TRIGGER auth_gen_projects_update;
CREATE TRIGGER auth_gen_projects_update AFTER UPDATE OF id, status ON projects
BEGIN UPDATE auth_generation SET generation = generation + 1 WHERE id = 1; END;
