-- Workload identity (MCP's draft workload identity federation extension, SEP-1933): a service
-- client made with `gatehouse client add NAME --service --workload-issuer URL --workload-subject
-- SUB` gets access tokens with the JWT-bearer grant (RFC 7523 §2.1) by presenting a JWT its
-- platform issued (a Kubernetes service-account token, a SPIFFE JWT-SVID): `iss` = issuer,
-- `sub` = subject, signed by a key of `jwks_uri` (or, when NULL, of the `jwks_uri` named by
-- the issuer's OpenID Connect discovery document). One client per (issuer, subject).
CREATE TABLE workload_identities (
    client_id  TEXT PRIMARY KEY REFERENCES oauth_clients(client_id) ON DELETE CASCADE,
    issuer     TEXT NOT NULL,                    -- the workload issuer's URL, as configured
    subject    TEXT NOT NULL,                    -- the workload's `sub`
    jwks_uri   TEXT,                             -- NULL: discovered from the issuer
    created_at BIGINT NOT NULL,
    UNIQUE (issuer, subject)
);
