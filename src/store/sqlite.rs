//! `SQLite` spellings of the statements that differ between engines (FTS5 full-text search).

use super::Dialect;

/// The `SQLite` dialect.
pub struct Sqlite;

impl Dialect for Sqlite {
    fn search_notes_sql(&self) -> &'static str {
        "SELECT n.id AS id, n.title AS title, \
         COALESCE(snippet(notes_fts, 1, '[', ']', '…', 12), '') AS snippet, bm25(notes_fts) AS rank \
         FROM notes_fts JOIN notes n ON n.rowid = notes_fts.rowid \
         WHERE n.project_id = $1 AND notes_fts MATCH $2 ORDER BY rank, n.id LIMIT $3 OFFSET $4"
    }
}
