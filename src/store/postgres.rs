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

    /// One statement, so its own transaction: the consent read `FOR SHARE` in a `WITH` (a
    /// concurrent revocation's update of the row waits for this statement, or this statement
    /// waits for it and then finds the row revoked), the update guarded by it, both inserts fed
    /// by the update's returned row, so they insert nothing when it changed nothing. Rows
    /// affected: 1 when won, 0 otherwise.
    fn rotate_refresh_sql(&self) -> &'static str {
        "WITH consent AS ( \
           SELECT c.id FROM consents c JOIN accounts a ON a.id = c.account_id \
           WHERE c.id = $12 AND c.revoked_at IS NULL AND c.scope = $13 AND a.status = 'active' \
           FOR SHARE OF c \
         ), won AS ( \
           UPDATE refresh_tokens SET rotated_at = $1, successor_hash = $2, successor_sealed = $3 \
           WHERE token_hash = $4 AND rotated_at IS NULL \
           AND family_id IN (SELECT id FROM token_families WHERE id = $5 AND revoked_at IS NULL) \
           AND EXISTS (SELECT 1 FROM consent) \
           RETURNING 1 \
         ), successor AS ( \
           INSERT INTO refresh_tokens (token_hash, family_id, created_at) \
           SELECT $2, $5, $1 FROM won RETURNING 1 \
         ) \
         INSERT INTO access_tokens (token_hash, family_id, account_id, client_id, scope, audience, created_at, expires_at) \
         SELECT $10, $5, $6, $7, $8, $9, $1, $11 FROM won"
    }
}
