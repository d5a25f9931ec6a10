-- A key's or personal URL's last use (`last_used_at`, written at most once a minute per
-- credential) no longer raises the validation cache's generation (issue 30): it emptied the
-- cache once a minute per credential in use, and nothing a cached answer is trusted for
-- depends on it. Every other column still raises it; a test (`tests/integration/cache.rs`)
-- checks that the lists below name every column of the tables but `last_used_at`.
DROP TRIGGER auth_gen_api_keys_update;
CREATE TRIGGER auth_gen_api_keys_update
AFTER UPDATE OF id, key_hash, account_id, project_id, name, scope, allowed_ips, created_at,
    expires_at, revoked_at ON api_keys
BEGIN UPDATE auth_generation SET generation = generation + 1 WHERE id = 1; END;
DROP TRIGGER auth_gen_personal_urls_update;
CREATE TRIGGER auth_gen_personal_urls_update
AFTER UPDATE OF id, url_hash, account_id, project_id, name, scope, created_at, expires_at,
    revoked_at ON personal_urls
BEGIN UPDATE auth_generation SET generation = generation + 1 WHERE id = 1; END;
