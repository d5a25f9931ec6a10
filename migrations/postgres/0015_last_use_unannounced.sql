-- A key's or personal URL's last use (`last_used_at`, written at most once a minute per
-- credential) is no longer announced to the validation caches (issue 30): announcing it
-- emptied every instance's cache once a minute per credential in use. Nothing a cached answer
-- is trusted for depends on it (the once-a-minute write is decided by each process's own
-- record and a conditional UPDATE). Every other change of a row is announced as before, also
-- of columns added later: the rows are compared whole, less `last_used_at`.
DROP TRIGGER auth_gen_api_keys ON api_keys;
CREATE TRIGGER auth_gen_api_keys_update AFTER UPDATE ON api_keys FOR EACH ROW
    WHEN ((to_jsonb(OLD) - 'last_used_at') IS DISTINCT FROM (to_jsonb(NEW) - 'last_used_at'))
    EXECUTE FUNCTION gatehouse_auth_changed();
CREATE TRIGGER auth_gen_api_keys_delete AFTER DELETE ON api_keys
    FOR EACH STATEMENT EXECUTE FUNCTION gatehouse_auth_changed();
DROP TRIGGER auth_gen_personal_urls ON personal_urls;
CREATE TRIGGER auth_gen_personal_urls_update AFTER UPDATE ON personal_urls FOR EACH ROW
    WHEN ((to_jsonb(OLD) - 'last_used_at') IS DISTINCT FROM (to_jsonb(NEW) - 'last_used_at'))
    EXECUTE FUNCTION gatehouse_auth_changed();
CREATE TRIGGER auth_gen_personal_urls_delete AFTER DELETE ON personal_urls
    FOR EACH STATEMENT EXECUTE FUNCTION gatehouse_auth_changed();
