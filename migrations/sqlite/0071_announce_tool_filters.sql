-- The credential lookups read a key's or personal URL's tool filter (0026), so a change of it
-- raises the validation cache's generation like every other column but `last_used_at` (0015).
-- Found by src/store/trigger_coverage.rs.
DROP TRIGGER auth_gen_api_keys_update;
CREATE TRIGGER auth_gen_api_keys_update
AFTER UPDATE OF id, key_hash, account_id, project_id, name, scope, allowed_ips, created_at,
    expires_at, revoked_at, tool_filter ON api_keys
BEGIN UPDATE auth_generation SET generation = generation + 1 WHERE id = 1; END;
DROP TRIGGER auth_gen_personal_urls_update;
CREATE TRIGGER auth_gen_personal_urls_update
AFTER UPDATE OF id, url_hash, account_id, project_id, name, scope, created_at, expires_at,
    revoked_at, tool_filter ON personal_urls
BEGIN UPDATE auth_generation SET generation = generation + 1 WHERE id = 1; END;
