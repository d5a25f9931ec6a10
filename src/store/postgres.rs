//! `PostgreSQL` spellings of the statements that differ between engines (`tsvector` search).

use super::Dialect;

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
}
