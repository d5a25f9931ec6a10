-- The validation cache's generation (docs/architecture.md "Validation cache"): every change to
-- a row that the credential lookups read (access tokens, families, consents, accounts,
-- projects, memberships, service clients, API keys, personal URLs) raises it, whoever writes:
-- this server, the command line in another process, or anyone with the file. A server reads it
-- before it trusts a cached lookup.
CREATE TABLE auth_generation (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    generation INTEGER NOT NULL
);
INSERT INTO auth_generation (id, generation) VALUES (1, 0);

CREATE TRIGGER auth_gen_access_tokens_update AFTER UPDATE ON access_tokens
BEGIN UPDATE auth_generation SET generation = generation + 1 WHERE id = 1; END;
CREATE TRIGGER auth_gen_access_tokens_delete AFTER DELETE ON access_tokens
BEGIN UPDATE auth_generation SET generation = generation + 1 WHERE id = 1; END;
CREATE TRIGGER auth_gen_token_families_update AFTER UPDATE ON token_families
BEGIN UPDATE auth_generation SET generation = generation + 1 WHERE id = 1; END;
CREATE TRIGGER auth_gen_token_families_delete AFTER DELETE ON token_families
BEGIN UPDATE auth_generation SET generation = generation + 1 WHERE id = 1; END;
CREATE TRIGGER auth_gen_consents_update AFTER UPDATE ON consents
BEGIN UPDATE auth_generation SET generation = generation + 1 WHERE id = 1; END;
CREATE TRIGGER auth_gen_consents_delete AFTER DELETE ON consents
BEGIN UPDATE auth_generation SET generation = generation + 1 WHERE id = 1; END;
CREATE TRIGGER auth_gen_accounts_update AFTER UPDATE OF status ON accounts
BEGIN UPDATE auth_generation SET generation = generation + 1 WHERE id = 1; END;
CREATE TRIGGER auth_gen_accounts_delete AFTER DELETE ON accounts
BEGIN UPDATE auth_generation SET generation = generation + 1 WHERE id = 1; END;
CREATE TRIGGER auth_gen_projects_update AFTER UPDATE OF status ON projects
BEGIN UPDATE auth_generation SET generation = generation + 1 WHERE id = 1; END;
CREATE TRIGGER auth_gen_projects_delete AFTER DELETE ON projects
BEGIN UPDATE auth_generation SET generation = generation + 1 WHERE id = 1; END;
CREATE TRIGGER auth_gen_memberships_update AFTER UPDATE ON memberships
BEGIN UPDATE auth_generation SET generation = generation + 1 WHERE id = 1; END;
CREATE TRIGGER auth_gen_memberships_delete AFTER DELETE ON memberships
BEGIN UPDATE auth_generation SET generation = generation + 1 WHERE id = 1; END;
CREATE TRIGGER auth_gen_service_clients_insert AFTER INSERT ON service_clients
BEGIN UPDATE auth_generation SET generation = generation + 1 WHERE id = 1; END;
CREATE TRIGGER auth_gen_service_clients_update AFTER UPDATE ON service_clients
BEGIN UPDATE auth_generation SET generation = generation + 1 WHERE id = 1; END;
CREATE TRIGGER auth_gen_service_clients_delete AFTER DELETE ON service_clients
BEGIN UPDATE auth_generation SET generation = generation + 1 WHERE id = 1; END;
CREATE TRIGGER auth_gen_api_keys_update
AFTER UPDATE ON api_keys
BEGIN UPDATE auth_generation SET generation = generation + 1 WHERE id = 1; END;
CREATE TRIGGER auth_gen_api_keys_delete AFTER DELETE ON api_keys
BEGIN UPDATE auth_generation SET generation = generation + 1 WHERE id = 1; END;
CREATE TRIGGER auth_gen_personal_urls_update
AFTER UPDATE ON personal_urls
BEGIN UPDATE auth_generation SET generation = generation + 1 WHERE id = 1; END;
CREATE TRIGGER auth_gen_personal_urls_delete AFTER DELETE ON personal_urls
BEGIN UPDATE auth_generation SET generation = generation + 1 WHERE id = 1; END;
