//! `PostgreSQL` spellings of the statements that differ between engines (`tsvector` search,
//! row locks, data-modifying `WITH`).

use super::{Dialect, consent_read};

/// The `PostgreSQL` dialect.
pub struct Postgres;

impl Dialect for Postgres {
    fn search_notes_sql(&self) -> &'static str {
        "SELECT n.id AS id, n.title AS title, \
         COALESCE(ts_headline('simple', n.body, websearch_to_tsquery('simple', $2), 'StartSel=[, StopSel=], MaxWords=24, MinWords=8'), '') AS snippet, \
         -ts_rank(n.search, websearch_to_tsquery('simple', $2))::float8 AS rank \
         FROM notes n WHERE n.project_id = $1 AND n.search @@ websearch_to_tsquery('simple', $2) \
         ORDER BY rank, n.id LIMIT $3 OFFSET $4"
    }

    /// `FOR SHARE`: a revocation's update of the row waits for the issuing transaction (or
    /// makes it wait and then see the revocation), while issuances under one consent do not
    /// wait for each other.
    fn lock_consent_sql(&self) -> &'static str {
        concat!(consent_read!(), " FOR SHARE")
    }
}

/// The refresh rotations of one group commit ([`super::rotations`]) in one statement, so in
/// one transaction, with one round trip and one commit for the whole group: each rotation the
/// same guarded writes as `SQLite`'s [`super::sqlite::ROTATE_REFRESH`] (consents read `FOR SHARE`, the
/// presented token marked rotated only while it is unrotated, its family unrevoked, its
/// consent unrevoked with exactly the scope read, not past its chosen end, and its account
/// active; the successor refresh
/// token and the new access token inserted only for a rotation that marked its token).
///
/// Binds `$1`: a JSON array with one object per rotation, members `i` (its place in the
/// group), `now`, `refresh_hash`, `sealed` (the sealed successor, lowercase hex), `presented`,
/// `family_id`, `account_id`, `client_id`, `scope`, `resource`, `access_hash`,
/// `access_expires_at`, `consent_id`, `consent_scope`, `jkt`. Returns one row, `i`, per rotation that
/// won. Two rotations of one token in one group: the token is marked once, for one of them.
pub(super) const ROTATE_REFRESH_GROUP: &str = "WITH input AS ( \
       SELECT * FROM json_to_recordset($1::text::json) AS x( \
         i bigint, now bigint, refresh_hash text, sealed text, presented text, family_id text, \
         account_id text, client_id text, scope text, resource text, access_hash text, \
         access_expires_at bigint, consent_id text, consent_scope text, jkt text) \
     ), consent AS ( \
       SELECT c.id, c.scope, c.expires_at FROM consents c JOIN accounts a ON a.id = c.account_id \
       WHERE c.id IN (SELECT consent_id FROM input) AND c.revoked_at IS NULL AND a.status = 'active' \
       FOR SHARE OF c \
     ), won AS ( \
       UPDATE refresh_tokens r \
       SET rotated_at = x.now, successor_hash = x.refresh_hash, successor_sealed = decode(x.sealed, 'hex') \
       FROM input x \
       WHERE r.token_hash = x.presented AND r.rotated_at IS NULL \
       AND r.family_id IN (SELECT id FROM token_families WHERE id = x.family_id AND revoked_at IS NULL) \
       AND EXISTS (SELECT 1 FROM consent c WHERE c.id = x.consent_id AND c.scope = x.consent_scope \
         AND (c.expires_at IS NULL OR c.expires_at > x.now)) \
       RETURNING x.* \
     ), successor AS ( \
       INSERT INTO refresh_tokens (token_hash, family_id, created_at) \
       SELECT refresh_hash, family_id, now FROM won \
     ), access AS ( \
       INSERT INTO access_tokens (token_hash, family_id, account_id, client_id, scope, audience, created_at, expires_at, jkt) \
       SELECT access_hash, family_id, account_id, client_id, scope, resource, now, access_expires_at, jkt FROM won \
     ) \
     SELECT i FROM won";
