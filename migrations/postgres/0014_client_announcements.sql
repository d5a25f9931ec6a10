-- Registered clients are kept in the validation cache too (docs/architecture.md "Validation
-- cache"), so a client updated or deleted — by the sweeper of unused registrations, the command
-- line, or anyone with access to the database — is announced like a credential (see 0012).
-- Row by row: a sweep that deletes nothing announces nothing.
CREATE TRIGGER auth_gen_oauth_clients AFTER UPDATE OR DELETE ON oauth_clients
    FOR EACH ROW EXECUTE FUNCTION gatehouse_auth_changed();
