//! `search_notes`, `get_note`, `create_note` and `update_note`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::domain::notes::ResourceUri;
use crate::domain::scope::Scope;
use crate::mcp::args::{Count, Id, List, Text};
use crate::mcp::catalog::{ProjectAccess, ToolCtx, ToolDef, ToolError, ToolOk, ToolSpec};
use crate::mcp::tool_meta::CostClass;
use crate::mcp::views::NoteView;
use crate::store::notes::{NewNote, Note, NotePatch};

#[cfg(test)]
mod cursor_tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_are_bound_to_their_search() {
        let fp = SearchCursor::fingerprint("p1", "june plans");
        let c = SearchCursor {
            offset: 7,
            end: 50,
            fingerprint: fp.clone(),
        };
        assert_eq!(SearchCursor::decode(&c.encode(), &fp), Some(c.clone()));
        // Another project or other words: refused.
        assert_eq!(
            SearchCursor::decode(&c.encode(), &SearchCursor::fingerprint("p2", "june plans")),
            None
        );
        assert_eq!(
            SearchCursor::decode(&c.encode(), &SearchCursor::fingerprint("p1", "june")),
            None
        );
        for bad in [
            SearchCursor {
                offset: 50,
                end: 50,
                fingerprint: fp.clone(),
            },
            SearchCursor {
                offset: 0,
                end: 51,
                fingerprint: fp.clone(),
            },
        ] {
            assert_eq!(SearchCursor::decode(&bad.encode(), &fp), None);
        }
        assert_eq!(SearchCursor::decode("!!", &fp), None);
    }
}

/// A note's title: 1 to 200 characters, no control or bidirectional formatting characters.
pub type Title = Text<1, 200>;
/// A note's text: up to 20 000 characters; line breaks and tabs, but no other control or
/// bidirectional formatting characters.
pub type Body = Text<0, 20_000, true>;
/// Labels: up to 20, each 1 to 40 characters, no control or bidirectional formatting
/// characters.
pub type Tags = List<Text<1, 40>, 20>;

fn note_answer(note: Note) -> ToolOk<NoteView> {
    let view = NoteView::from(note);
    let uri = view.uri.clone();
    let title = view.title.clone();
    ToolOk::new(view).link(uri, title)
}

fn note_not_found(note_id: &str) -> ToolError {
    ToolError::NotFound(format!(
        "No note with id \"{note_id}\" in this project. Use search_notes to find note ids."
    ))
}

/// Input of `search_notes`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchNotesInput {
    /// The project to search, from `list_projects`.
    pub project_id: Id,
    /// Words to look for in titles, texts and tags; every word must match.
    pub query: Text<1, 200>,
    /// Most results to return (1-50, default 10).
    pub limit: Option<Count<1, 50>>,
    /// The `nextCursor` of a result that was cut to fit: continues it with the results after
    /// those it held. Give the same `project_id` and query (limit is then ignored).
    pub cursor: Option<Text<1, 200>>,
}

/// Where a cut `search_notes` result continues: hits `offset..end` of the same search, bound to
/// its project and words by a fingerprint. Opaque to clients (base64url).
#[derive(Debug, Clone, PartialEq, Eq)]
struct SearchCursor {
    offset: usize,
    end: usize,
    fingerprint: String,
}

/// Most hits one search may page through (the `limit` bound).
const MAX_SEARCH_HITS: usize = 50;

impl SearchCursor {
    /// Ties a cursor to one project and query (SHA-256, first 64 bits, hex).
    fn fingerprint(project_id: &str, query: &str) -> String {
        use sha2::Digest;
        let digest = sha2::Sha256::digest(format!("{project_id}\n{query}").as_bytes());
        digest[..8].iter().map(|b| format!("{b:02x}")).collect()
    }

    fn encode(&self) -> String {
        use base64::Engine as _;
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!(
            "search:{}:{}:{}",
            self.offset, self.end, self.fingerprint
        ))
    }

    /// The cursor `raw` if it continues a search with `fingerprint`; `None` for anything else.
    fn decode(raw: &str, fingerprint: &str) -> Option<SearchCursor> {
        use base64::Engine as _;
        let text = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(raw)
            .ok()?;
        let text = String::from_utf8(text).ok()?;
        let mut parts = text.split(':');
        let (Some("search"), Some(offset), Some(end), Some(fp), None) = (
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
        ) else {
            return None;
        };
        let offset: usize = offset.parse().ok()?;
        let end: usize = end.parse().ok()?;
        (offset < end && end <= MAX_SEARCH_HITS && fp == fingerprint).then(|| SearchCursor {
            offset,
            end,
            fingerprint: fp.to_string(),
        })
    }
}

/// One search hit.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SearchHit {
    /// Note id: pass it as `note_id` to `get_note`.
    pub id: String,
    /// Note title.
    pub title: String,
    /// The passage that matched, matched words marked.
    pub snippet: String,
    /// MCP resource URI of the note.
    pub uri: String,
}

/// Output of `search_notes`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SearchResults {
    /// The project searched.
    pub project_id: String,
    /// The words searched for.
    pub query: String,
    /// Hits, most relevant first.
    pub results: Vec<SearchHit>,
    /// Present when the result was cut to fit the server's size limit: pass it as `cursor`
    /// (with the same `project_id` and query) to get the results after these.
    #[serde(rename = "nextCursor", skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// `search_notes`.
pub fn search_notes() -> ToolDef {
    ToolDef::new(
        ToolSpec::lookup(
            "search_notes",
            "Search notes",
            "Full-text search in one project's notes. Returns the best matches first, each with a snippet of the matching text. Every word of the query must appear; punctuation is ignored. Use get_note to read a whole note. If a result is too large to send whole it is cut between results and carries nextCursor: call search_notes again with the same project_id and query and that cursor for the rest.",
            ProjectAccess::Read,
        )
        .cost(CostClass::Standard),
        |ctx: ToolCtx, input: SearchNotesInput| async move {
            let project = ctx.project();
            let fingerprint = SearchCursor::fingerprint(&project.project_id, input.query.as_str());
            let (offset, end) = match &input.cursor {
                None => (0, input.limit.map_or(10, |l| l.get() as usize)),
                Some(raw) => {
                    let c = SearchCursor::decode(raw.as_str(), &fingerprint).ok_or_else(|| {
                        ToolError::InvalidArguments(
                            "Invalid arguments: `cursor` does not continue a search of this project for these words. Give the same project_id and query as the call that returned it, or leave cursor out to start again.".into(),
                        )
                    })?;
                    (c.offset, c.end)
                }
            };
            let hits = ctx
                .state
                .store
                .search_notes_from(
                    &project.project_id,
                    input.query.as_str(),
                    offset as i64,
                    (end - offset) as i64,
                )
                .await?;
            let results: Vec<SearchHit> = hits
                .into_iter()
                .map(|h| SearchHit {
                    uri: ResourceUri::note(&project.project_id, &h.id),
                    id: h.id,
                    title: h.title,
                    snippet: h.snippet,
                })
                .collect();
            let links: Vec<(String, String)> = results
                .iter()
                .map(|h| (h.uri.clone(), h.title.clone()))
                .collect();
            let mut ok = ToolOk::new(SearchResults {
                project_id: project.project_id.clone(),
                query: input.query.into_string(),
                results,
                next_cursor: None,
            })
            .paged("results", move |kept| {
                SearchCursor {
                    offset: offset + kept,
                    end,
                    fingerprint: fingerprint.clone(),
                }
                .encode()
            });
            for (uri, title) in links {
                ok = ok.link(uri, title);
            }
            Ok::<_, ToolError>(ok)
        },
    )
}

/// Input of `get_note`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GetNoteInput {
    /// The project, from `list_projects`.
    pub project_id: Id,
    /// The note, from `search_notes` or `create_note`.
    pub note_id: Id,
    /// Where to continue a text too long for one result: the `next_body_from` of the previous
    /// answer (a character offset, 0-20000). Without it the text is read from its start.
    pub body_from: Option<Count<0, 20_000>>,
}

/// The most a result may hold besides the body, in bytes, when `get_note` sizes a page: the
/// other members three times over (structured, as text, escaped) and room for the resource
/// link and the envelope.
fn note_overhead(view: &NoteView) -> usize {
    3 * serde_json::to_vec(view).map_or(0, |v| v.len()) + 1200
}

/// The answer of `get_note`: the whole note when it fits `max_bytes`, else the part of its
/// text from `from` (characters) that surely fits — each character costs at most 8 bytes
/// across the structured copy and the escaped text copy — with `next_body_from` naming where
/// the rest starts, so a model reads a long text page by page and loses none of it.
fn note_page(
    note: Note,
    from: Option<usize>,
    max_bytes: usize,
) -> Result<ToolOk<NoteView>, ToolError> {
    let total = note.body.chars().count();
    let from = from.unwrap_or(0);
    if from > total {
        return Err(ToolError::InvalidArguments(format!(
            "body_from {from} is past the end of the text ({total} characters)"
        )));
    }
    let mut view = NoteView::from(note);
    let body = std::mem::take(&mut view.body);
    let whole_fits = from == 0 && note_overhead(&view) + 8 * body.len() <= max_bytes;
    if whole_fits {
        view.body = body;
    } else {
        view.body_from = Some(from);
        view.body_chars = Some(total);
        view.next_body_from = Some(total);
        let budget = (max_bytes.saturating_sub(note_overhead(&view)) / 8).max(1);
        let end = total.min(from + budget);
        view.body = body.chars().skip(from).take(end - from).collect();
        view.next_body_from = (end < total).then_some(end);
    }
    let (uri, title) = (view.uri.clone(), view.title.clone());
    Ok(ToolOk::new(view).link(uri, title))
}

/// `get_note`.
pub fn get_note() -> ToolDef {
    ToolDef::new(
        ToolSpec::lookup(
            "get_note",
            "Read a note",
            "Returns one note: title, text, tags and when it was created and last changed. A text too long for one answer comes in parts: the answer then carries next_body_from; call get_note again with body_from set to it until no next_body_from is returned.",
            ProjectAccess::Read,
        ),
        |ctx: ToolCtx, input: GetNoteInput| async move {
            let project = ctx.project();
            let note = ctx
                .state
                .store
                .note(&project.project_id, input.note_id.as_str())
                .await?
                .ok_or_else(|| note_not_found(input.note_id.as_str()))?;
            let from = input.body_from.map(|c| c.get() as usize);
            note_page(note, from, ctx.state.config.max_result_bytes)
        },
    )
}

/// Input of `create_note`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateNoteInput {
    /// The project to add the note to, from `list_projects` (needs the write role).
    pub project_id: Id,
    /// Title, 1-200 characters, without control or bidirectional formatting characters.
    pub title: Title,
    /// Text (Markdown is fine), up to 20 000 characters; line breaks and tabs are fine, other
    /// control or bidirectional formatting characters are not.
    pub body: Body,
    /// Labels, up to 20, each 1-40 characters.
    #[serde(default)]
    pub tags: Tags,
}

/// `create_note`.
pub fn create_note() -> ToolDef {
    ToolDef::new(
        ToolSpec {
            name: "create_note",
            title: "Create a note",
            description: "Adds a new note to a project where the person has the write role. Returns the stored note with its id.",
            scope: Scope::McpWrite,
            read_only: false,
            idempotent: false,
            open_world: false,
            background: false,
            project: ProjectAccess::Write,
            cost: CostClass::Standard,
            version: 1,
        },
        |ctx: ToolCtx, input: CreateNoteInput| async move {
            let project = ctx.project();
            let tags: Vec<String> = input
                .tags
                .into_vec()
                .into_iter()
                .map(Text::into_string)
                .collect();
            let note = ctx
                .state
                .store
                .create_note(
                    &NewNote {
                        project_id: &project.project_id,
                        author_account_id: &ctx.principal.account_id,
                        title: input.title.as_str(),
                        body: input.body.as_str(),
                        tags: &tags,
                    },
                    ctx.now,
                )
                .await?;
            Ok::<_, ToolError>(note_answer(note))
        },
    )
}

/// Input of `update_note`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateNoteInput {
    /// The project, from `list_projects` (needs the write role).
    pub project_id: Id,
    /// The note to change.
    pub note_id: Id,
    /// New title, 1-200 characters, without control or bidirectional formatting characters;
    /// leave out to keep it.
    pub title: Option<Title>,
    /// New text, up to 20 000 characters; leave out to keep it.
    pub body: Option<Body>,
    /// New labels (the whole list); leave out to keep them.
    pub tags: Option<Tags>,
}

/// `update_note`.
pub fn update_note() -> ToolDef {
    ToolDef::new(
        ToolSpec {
            name: "update_note",
            title: "Change a note",
            description: "Changes the title, text or tags of a note in a project where the person has the write role. Fields left out keep their value; tags, when given, become the whole new list.",
            scope: Scope::McpWrite,
            read_only: false,
            idempotent: true,
            open_world: false,
            background: false,
            project: ProjectAccess::Write,
            cost: CostClass::Standard,
            version: 1,
        },
        |ctx: ToolCtx, input: UpdateNoteInput| async move {
            if input.title.is_none() && input.body.is_none() && input.tags.is_none() {
                return Err(ToolError::InvalidArguments(
                    "Invalid arguments: give at least one of `title`, `body` or `tags`.".into(),
                ));
            }
            let project = ctx.project();
            let tags: Option<Vec<String>> = input
                .tags
                .map(|t| t.into_vec().into_iter().map(Text::into_string).collect());
            let patch = NotePatch {
                title: input.title.as_ref().map(Text::as_str),
                body: input.body.as_ref().map(Text::as_str),
                tags: tags.as_deref(),
            };
            let note = ctx
                .state
                .store
                .update_note(&project.project_id, input.note_id.as_str(), &patch, ctx.now)
                .await?
                .ok_or_else(|| note_not_found(input.note_id.as_str()))?;
            Ok(note_answer(note))
        },
    )
}
