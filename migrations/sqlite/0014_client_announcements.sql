-- Registered clients are kept in the validation cache too (docs/architecture.md "Validation
-- cache"), so a client updated or deleted — by the sweeper of unused registrations, the command
-- line, or anyone with the file — raises the generation like a credential (see 0012).
CREATE TRIGGER auth_gen_oauth_clients_update AFTER UPDATE ON oauth_clients
BEGIN UPDATE auth_generation SET generation = generation + 1 WHERE id = 1; END;
CREATE TRIGGER auth_gen_oauth_clients_delete AFTER DELETE ON oauth_clients
BEGIN UPDATE auth_generation SET generation = generation + 1 WHERE id = 1; END;
