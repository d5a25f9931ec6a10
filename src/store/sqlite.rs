//! `SQLite` spellings of the statements that differ between engines (FTS5 full-text search,
//! several statements in one round trip).

use super::{Dialect, consent_read};

macro_rules! rotate_mark {
    () => {
        "UPDATE refresh_tokens SET rotated_at = $1, successor_hash = $2, successor_sealed = $3 \
         WHERE token_hash = $4 AND rotated_at IS NULL \
         AND family_id IN (SELECT id FROM token_families WHERE id = $5 AND revoked_at IS NULL) \
         AND EXISTS (SELECT 1 FROM consents c JOIN accounts a ON a.id = c.account_id \
           WHERE c.id = $12 AND c.revoked_at IS NULL AND c.scope = $13 AND a.status = 'active' \
           AND (c.expires_at IS NULL OR c.expires_at > $1))"
    };
}
macro_rules! rotate_insert_refresh {
    () => {
        "INSERT INTO refresh_tokens (token_hash, family_id, created_at) \
         SELECT $2, $5, $1 WHERE changes() = 1"
    };
}
macro_rules! rotate_insert_access {
    () => {
        "INSERT INTO access_tokens (token_hash, family_id, account_id, client_id, scope, audience, created_at, expires_at, jkt) \
         SELECT $10, $5, $6, $7, $8, $9, $1, $11, $14 WHERE changes() = 1"
    };
}

/// A refresh rotation (OAuth 2.1 §4.3.1) on `SQLite`, in order, with the binds of
/// [`super::rotations::RotationWrite`] (`$1` now, `$2` new refresh hash, `$3` sealed successor,
/// `$4` presented hash, `$5` family id, `$6` account id, `$7` client id, `$8` scope, `$9`
/// audience, `$10` new access hash, `$11` access expiry, `$12` consent id, `$13` consent
/// scope, `$14` DPoP key thumbprint): mark the presented token rotated (storing the sealed
/// successor) while it is unrotated, its family unrevoked, its consent unrevoked with exactly
/// the scope read and its account active; then insert the successor refresh token and the new
/// access token, each only when the statement before it changed one row (`changes()`). Run
/// inside a `BEGIN IMMEDIATE` transaction, whose write lock keeps any revocation out until it
/// ends. Rows changed in all: 3 when won, 0 otherwise.
pub(super) const ROTATE_REFRESH: [&str; 3] = [
    rotate_mark!(),
    rotate_insert_refresh!(),
    rotate_insert_access!(),
];

/// The `SQLite` dialect.
pub struct Sqlite;

impl Dialect for Sqlite {
    fn search_notes_sql(&self) -> &'static str {
        "SELECT n.id AS id, n.title AS title, \
         COALESCE(snippet(notes_fts, 1, '[', ']', '…', 12), '') AS snippet, bm25(notes_fts) AS rank \
         FROM notes_fts JOIN notes n ON n.rowid = notes_fts.rowid \
         WHERE n.project_id = $1 AND notes_fts MATCH $2 ORDER BY rank, n.id LIMIT $3 OFFSET $4"
    }

    /// A plain read: the transaction's `BEGIN IMMEDIATE` already holds the database's write
    /// lock, which no revocation passes until it ends.
    fn lock_consent_sql(&self) -> &'static str {
        consent_read!()
    }
}
