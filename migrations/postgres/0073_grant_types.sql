-- The grant each access token descends from, named by token introspection (RFC 7662 §2.2
-- allows members of our own): the grant that started its family (a consent's code, a device
-- code, an identity assertion, or a service client's own family), and on a token, the grant
-- that issued it when it differs from its family's (a workload's JWT-bearer token issued on a
-- service client's family). Both columns are only read; nothing changes them after insert.
ALTER TABLE token_families ADD COLUMN grant_type TEXT NOT NULL DEFAULT 'authorization_code';
ALTER TABLE access_tokens ADD COLUMN grant_type TEXT;
UPDATE token_families SET grant_type = 'client_credentials'
  WHERE id IN (SELECT family_id FROM service_clients);
UPDATE token_families SET grant_type = 'urn:ietf:params:oauth:grant-type:jwt-bearer'
  WHERE consent_id IN (SELECT id FROM consents WHERE redirect_uri = 'urn:ietf:params:oauth:grant-type:jwt-bearer');
UPDATE token_families SET grant_type = 'urn:ietf:params:oauth:grant-type:device_code'
  WHERE id IN (SELECT family_id FROM authorization_codes
               WHERE redirect_uri = 'urn:ietf:params:oauth:grant-type:device_code' AND family_id IS NOT NULL);
