-- `gatehouse client revoke`: a revoked client is refused everywhere (its lookup finds nothing),
-- its grants ended with it. NULL = active. Unix seconds.
ALTER TABLE oauth_clients ADD COLUMN revoked_at INTEGER;
