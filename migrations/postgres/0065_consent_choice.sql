-- Per-app project choice (issue 37 item 2): what the person chose on the consent page, kept
-- with the grant and changed on the app's page. `project_ids`: a JSON array of the project ids
-- the grant reaches, NULL for every project of the account (including later ones);
-- `read_only`: 1 when the person allowed reading only (the grant's tokens act without
-- `mcp:write` whatever they carry); `expires_at`: Unix seconds after which the grant ends
-- (no token of it is accepted or refreshed), NULL until revoked. Every change of a consent row
-- already notifies the validation caches (0012), so a narrowing applies at once everywhere.
ALTER TABLE consents ADD COLUMN project_ids TEXT;
ALTER TABLE consents ADD COLUMN read_only BIGINT NOT NULL DEFAULT 0;
ALTER TABLE consents ADD COLUMN expires_at BIGINT;
