-- The validation cache's invalidations (docs/architecture.md "Validation cache"): every change
-- to a row that the credential lookups read (access tokens, families, consents, accounts,
-- projects, memberships, service clients, API keys, personal URLs) sends a notification on the
-- channel `gatehouse_auth` when its transaction commits, whoever writes: any server instance,
-- the command line, or anyone with access to the database. Every instance listens and drops
-- its cached lookups. (SQLite keeps a generation row instead: 0011 of migrations/sqlite.)

CREATE FUNCTION gatehouse_auth_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('gatehouse_auth', '');
    RETURN NULL;
END;
$$;

CREATE TRIGGER auth_gen_access_tokens AFTER UPDATE OR DELETE ON access_tokens
    FOR EACH STATEMENT EXECUTE FUNCTION gatehouse_auth_changed();
CREATE TRIGGER auth_gen_token_families AFTER UPDATE OR DELETE ON token_families
    FOR EACH STATEMENT EXECUTE FUNCTION gatehouse_auth_changed();
CREATE TRIGGER auth_gen_consents AFTER UPDATE OR DELETE ON consents
    FOR EACH STATEMENT EXECUTE FUNCTION gatehouse_auth_changed();
CREATE TRIGGER auth_gen_accounts AFTER UPDATE OF status OR DELETE ON accounts
    FOR EACH STATEMENT EXECUTE FUNCTION gatehouse_auth_changed();
CREATE TRIGGER auth_gen_projects AFTER UPDATE OF status OR DELETE ON projects
    FOR EACH STATEMENT EXECUTE FUNCTION gatehouse_auth_changed();
CREATE TRIGGER auth_gen_memberships AFTER UPDATE OR DELETE ON memberships
    FOR EACH STATEMENT EXECUTE FUNCTION gatehouse_auth_changed();
CREATE TRIGGER auth_gen_service_clients AFTER INSERT OR UPDATE OR DELETE ON service_clients
    FOR EACH STATEMENT EXECUTE FUNCTION gatehouse_auth_changed();
CREATE TRIGGER auth_gen_api_keys
    AFTER UPDATE OR DELETE ON api_keys FOR EACH STATEMENT EXECUTE FUNCTION gatehouse_auth_changed();
CREATE TRIGGER auth_gen_personal_urls
    AFTER UPDATE OR DELETE ON personal_urls FOR EACH STATEMENT EXECUTE FUNCTION gatehouse_auth_changed();
