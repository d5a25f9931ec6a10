-- A client's connection timeline (every account's steps, for the operator) reads the audit
-- rows of one client, newest first.
CREATE INDEX audit_events_client ON audit_events (client_id, id);
