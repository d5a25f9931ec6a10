-- A revoked approval stays revoked. Approving a client again after a revocation creates a new
-- consent row (a new grant generation) instead of reviving the old one, so nothing minted under
-- the revoked row (codes, refresh-token families, access tokens) can join the new approval.
-- At most one live consent per account, client and redirect URI.
DROP INDEX consents_live;
CREATE UNIQUE INDEX consents_live ON consents (account_id, client_id, redirect_uri) WHERE revoked_at IS NULL;

-- The issuer that issued a code and the family it was redeemed into: a code or refresh token is
-- redeemed only by that issuer, for the resource it was issued for (RFC 8707 §2.2). NULL for
-- grants made before this column existed (their resource is still compared).
ALTER TABLE authorization_codes ADD COLUMN issuer TEXT;
ALTER TABLE token_families ADD COLUMN issuer TEXT;

-- Unused codes issued before their consent's latest approval may predate a revocation that the
-- old schema undid: use them up.
UPDATE authorization_codes SET used_at = created_at
 WHERE used_at IS NULL
   AND consent_id IN (SELECT c.id FROM consents c
                      WHERE c.revoked_at IS NOT NULL OR c.updated_at > authorization_codes.created_at);
