//! Turning a tool's outcome into an MCP `CallToolResult` (MCP `server/tools` §Tool Result):
//! `structuredContent` matching the output schema, the same JSON as a text block for clients
//! that only read text, `resource_link` blocks for the resources it names, and `isError: true`
//! with a sentence the model can act on for expected failures.
//!
//! A result is bounded by `GATEHOUSE_MAX_RESULT_BYTES`: when its JSON (sent twice, structured
//! and as text) would not fit, the largest lists lose their last items and the longest texts
//! are cut, `"truncated": true` is added, and the text says so — it is never sent whole. A list
//! keeps its first item (cut) as long as anything can; links follow the items that remain. As a
//! last step only the ids and URIs are kept, so a write that was carried out always answers
//! success with what it made (an error would make a client retry it).
//!
//! `resources/read` is bounded the same way ([`resource_document`]): its JSON document is cut
//! by the same rules and stays JSON, with `"truncated": true` and a `"truncation_notice"`
//! saying what is missing and how to get it.
//!
//! Results that can be continued are cut between whole items instead, as many as fit, and name
//! the rest (issue "The rest of the MCP surface", part 4): a tool result whose list is paged
//! ([`super::catalog::ToolOk::paged`]) carries `nextCursor` for the same call, also named in the
//! note; a document read with [`resource_document_pages`] carries `next_page`, the URI of the
//! items after those it holds. At the lowest limits the note and links give way to whole items
//! (issue 38, part 3). Only when the first item alone does not fit is it sent alone, its texts
//! cut alike as long as the room allows (ids and URIs whole, [`cap_to_fit`]), with the cursor
//! or `next_page` past it, so paging always moves on and ends.

use rmcp::model::{CallToolResult, ContentBlock, ReadResourceResult, Resource, ResourceContents};
use serde_json::Value;

use super::catalog::{Link, Paging, Produced, ToolError};

/// The list at `path` (object members from the top) of `value`.
fn list_at<'a>(value: &'a mut Value, path: &[&str]) -> Option<&'a mut Vec<Value>> {
    let mut at = value;
    for key in path {
        at = at.as_object_mut()?.get_mut(*key)?;
    }
    at.as_array_mut()
}

/// Pages a result whose list at `path` is too long: `build(value with the list cut to its first
/// k items, k)` for the largest k from 1 to `len - 1` whose JSON fits `max_bytes`, items kept
/// whole. `None` when the list has fewer than two items or its first item alone does not fit
/// (the caller then cuts texts). Binary search: O(size × log len) work.
fn keep_whole_items<T: serde::Serialize>(
    value: &Value,
    path: &[&str],
    max_bytes: usize,
    build: impl Fn(Value, usize) -> T,
) -> Option<(T, usize)> {
    let mut shell = value.clone();
    let items = std::mem::take(list_at(&mut shell, path)?);
    if items.len() < 2 {
        return None;
    }
    let attempt = |k: usize| {
        let mut v = shell.clone();
        if let Some(list) = list_at(&mut v, path) {
            *list = items[..k].to_vec();
        }
        let out = build(v, k);
        (size(&out) + ENVELOPE <= max_bytes).then_some(out)
    };
    let mut best = (attempt(1)?, 1);
    let (mut lo, mut hi) = (2, items.len() - 1);
    while lo <= hi {
        let mid = lo + (hi - lo) / 2;
        match attempt(mid) {
            Some(out) => {
                best = (out, mid);
                lo = mid + 1;
            }
            None => hi = mid - 1,
        }
    }
    Some(best)
}

/// Fields that are never cut: ids and links must stay usable.
const KEEP_WHOLE: &[&str] = &[
    "id",
    "uri",
    "resource",
    "console_url",
    "project_id",
    "note_id",
    "kind",
    "status",
    "nextCursor",
    "next_page",
];
/// Strings shorter than this are not cut in the first pass; the second pass cuts any text.
const MIN_CUT: usize = 64;
/// What a cut text ends with.
const ELLIPSIS: char = '…';
/// Room kept for the note and the JSON-RPC envelope.
const OVERHEAD: usize = 256;
/// Room kept, whenever a result is measured against the limit, for what is added to it after
/// it is measured: `"resultType":"complete"` for 2026-07-28 peers, and on resource reads
/// their cache hints (`"ttlMs":0`, `"cacheScope":"private"`).
const ENVELOPE: usize = 64;

fn size<T: serde::Serialize + ?Sized>(v: &T) -> usize {
    serde_json::to_string(v).map(|s| s.len()).unwrap_or(0)
}

/// Removes about `excess` bytes of JSON from `v`, from its largest part, leaving texts of at
/// least `floor` bytes (plus the ellipsis). Returns `true` only when the JSON of `v` became
/// strictly shorter, so a loop that calls this until it answers `false` ends.
fn shrink(v: &mut Value, excess: usize, floor: usize) -> bool {
    match v {
        Value::String(s) => {
            let mark = ELLIPSIS.len_utf8();
            // Cut to `keep` bytes plus the ellipsis, only when that is shorter than now. The
            // cut is measured in JSON (a quote or a line break takes two bytes there), so a
            // text full of escapes keeps as much as the room allows, not the floor.
            if s.len() <= floor + mark {
                return false;
            }
            let written: usize = s.chars().map(json_len).sum();
            let mut keep = prefix_within(s, written.saturating_sub(excess.max(1) + mark))
                .len()
                .max(floor);
            while !s.is_char_boundary(keep) {
                keep -= 1;
            }
            if keep + mark >= s.len() {
                return false;
            }
            s.truncate(keep);
            s.push(ELLIPSIS);
            true
        }
        Value::Array(items) => {
            if items.is_empty() {
                return false;
            }
            let sizes: Vec<usize> = items.iter().map(size).collect();
            let total: usize = sizes.iter().sum();
            if let Some((i, &biggest)) = sizes.iter().enumerate().max_by_key(|(_, n)| **n)
                && (items.len() == 1 || biggest * 2 > total)
                && shrink(&mut items[i], excess, floor)
            {
                return true;
            }
            // The last item goes only once texts may be cut to nothing (`floor` 0).
            if items.len() == 1 && floor > 0 {
                return false;
            }
            // Drop trailing items worth about `excess` bytes in one step (each item is measured
            // once), so cutting a large list costs linear, not quadratic, time. At least one
            // item goes; the first one stays unless it alone is left and cannot be cut (so a
            // list keeps its best item, cut, before it is emptied).
            let mut removed = 0;
            while let Some(n) = sizes.get(items.len().wrapping_sub(1)) {
                if removed > 0 && (removed >= excess || items.len() == 1) {
                    break;
                }
                removed += n + 1;
                items.pop();
            }
            true
        }
        Value::Object(map) => {
            let mut fields: Vec<(String, usize)> = map
                .iter()
                .filter(|(k, _)| !KEEP_WHOLE.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), size(v)))
                .collect();
            fields.sort_by_key(|f| std::cmp::Reverse(f.1));
            fields
                .into_iter()
                .any(|(k, _)| map.get_mut(&k).is_some_and(|v| shrink(v, excess, floor)))
        }
        _ => false,
    }
}

/// The bytes `c` takes inside a JSON string (RFC 8259 §7, as `serde_json` writes it): two for
/// `"`, `\\` and the control characters with a short escape, six for the other control
/// characters, its UTF-8 length otherwise.
pub(crate) fn json_len(c: char) -> usize {
    match c {
        '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
        c if c < ' ' => 6,
        c => c.len_utf8(),
    }
}

/// The longest prefix of `text` whose JSON string body ([`json_len`]) is at most `budget`
/// bytes.
pub(crate) fn prefix_within(text: &str, budget: usize) -> &str {
    let mut used = 0;
    for (at, c) in text.char_indices() {
        used += json_len(c);
        if used > budget {
            return &text[..at];
        }
    }
    text
}

/// Cuts `value` until its JSON is at most `budget` bytes or nothing more can be cut at
/// `floor`. Returns whether anything was cut. Ends: every step makes the JSON strictly shorter.
fn fit(value: &mut Value, budget: usize, floor: usize) -> bool {
    let mut cut = false;
    loop {
        let n = size(value);
        if n <= budget || !shrink(value, n - budget, floor) {
            return cut;
        }
        cut = true;
    }
}

/// Cuts `value` until `build(&value)` serializes to at most `max_bytes`, starting with `value`
/// cut to `budget` bytes and tightening the budget by what the assembled answer still exceeds.
/// Texts are first kept to [`MIN_CUT`] bytes, then cut further if that is not enough. `None`
/// when nothing left to cut makes it fit (ids and URIs are never cut).
///
/// Ends: every round either returns, lowers the floor (once, going back to the first budget),
/// or lowers the budget by at least
/// 16 bytes and 1/16 of itself; at budget 0 or when a round can cut nothing, the last floor
/// gives up. [`fit`] itself ends because every cut makes the JSON strictly shorter.
fn cut_to_fit<T: serde::Serialize>(
    mut value: Value,
    max_bytes: usize,
    mut budget: usize,
    build: impl Fn(&Value) -> T,
) -> Option<T> {
    let mut floor = MIN_CUT;
    let first_budget = budget;
    loop {
        let cut = fit(&mut value, budget, floor);
        let out = build(&value);
        let n = size(&out);
        if n <= max_bytes {
            return Some(out);
        }
        // Nothing more can be cut at this floor, or no smaller budget is left: cut texts
        // further once, then give up.
        let stalled = !cut && size(&value) > budget;
        if stalled || budget == 0 {
            if floor == 0 {
                return None;
            }
            // Texts may now be cut to nothing: start again from the first budget, so what was
            // only too long at the old floor is cut rather than dropped.
            floor = 0;
            budget = first_budget;
            continue;
        }
        budget = budget.saturating_sub(((n - max_bytes) / 2 + 16).max(budget / 16));
    }
}

/// `value` cut, as a built-in result's JSON is cut (its largest lists lose their last items,
/// its longest texts are cut and end with an ellipsis; ids and URIs stay whole), until
/// `build(&value)` serializes to at most `max_bytes`, starting from a budget of `budget` bytes
/// for `value` itself. `None` when nothing left to cut makes it fit. Used for upstream
/// results' `structuredContent` ([`super::upstream::result`]).
pub(crate) fn cut_json_to_fit<T: serde::Serialize>(
    value: Value,
    max_bytes: usize,
    budget: usize,
    build: impl Fn(&Value) -> T,
) -> Option<T> {
    cut_to_fit(value, max_bytes, budget, build)
}

/// `v` with every string longer than `chars` characters cut to its first `chars` characters
/// and the ellipsis, except the ids and links ([`KEEP_WHOLE`]).
fn cap_texts(v: &Value, chars: usize) -> Value {
    match v {
        Value::String(s) if s.chars().nth(chars).is_some() => {
            let mut cut: String = s.chars().take(chars).collect();
            cut.push(ELLIPSIS);
            Value::String(cut)
        }
        Value::Array(items) => Value::Array(items.iter().map(|i| cap_texts(i, chars)).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, x)| {
                    let x = if KEEP_WHOLE.contains(&k.as_str()) {
                        x.clone()
                    } else {
                        cap_texts(x, chars)
                    };
                    (k.clone(), x)
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

/// The longest string of `v`, in characters.
fn longest_text(v: &Value) -> usize {
    match v {
        Value::String(s) => s.chars().count(),
        Value::Array(items) => items.iter().map(longest_text).max().unwrap_or(0),
        Value::Object(map) => map.values().map(longest_text).max().unwrap_or(0),
        _ => 0,
    }
}

/// `build(v)` with the texts of `v` capped ([`cap_texts`]) at the most characters that let it
/// fit `max_bytes` with [`ENVELOPE`] to spare, found by binary search (O(size × log longest
/// text)); nothing is dropped, so a page cut this way still holds its one item. `None` when
/// even texts of no characters do not fit.
fn cap_to_fit<T: serde::Serialize>(
    value: &Value,
    max_bytes: usize,
    build: impl Fn(&Value) -> T,
) -> Option<T> {
    let attempt = |chars: usize| {
        let out = build(&cap_texts(value, chars));
        (size(&out) + ENVELOPE <= max_bytes).then_some(out)
    };
    let mut best = attempt(0)?;
    let (mut lo, mut hi) = (1, longest_text(value));
    while lo <= hi {
        let mid = lo + (hi - lo) / 2;
        match attempt(mid) {
            Some(out) => {
                best = out;
                lo = mid + 1;
            }
            None => hi = mid - 1,
        }
    }
    Some(best)
}

/// Results whose JSON is at most this many bytes (by [`is_small`]) are prepared on the async
/// worker that produced them: preparing one takes a few microseconds, less than handing it to
/// another thread and back.
pub const INLINE_RESULT_BYTES: usize = 16 * 1024;

/// Whether the outcome is small enough to prepare where it is ([`INLINE_RESULT_BYTES`]): an
/// error, or a value and links whose JSON is at most that many bytes. Walks at most about
/// that many bytes of the value, however large it is.
pub fn is_small(result: &Result<Produced, ToolError>) -> bool {
    let Ok(produced) = result else {
        return true;
    };
    let mut budget = INLINE_RESULT_BYTES;
    for link in &produced.links {
        let used = link.uri.len() + link.name.len() + 64;
        let Some(left) = budget.checked_sub(used) else {
            return false;
        };
        budget = left;
    }
    json_fits(&produced.value, &mut budget)
}

/// Whether the JSON of `v` is at most `budget` bytes (an estimate: string escapes are not
/// counted, a number counts 20 bytes), taking what it uses from `budget`; stops at the first part that does not
/// fit, so it visits at most about `budget` bytes' worth of `v`.
fn json_fits(v: &Value, budget: &mut usize) -> bool {
    match v {
        Value::Null | Value::Bool(_) => take(budget, 5),
        Value::Number(_) => take(budget, 20),
        Value::String(s) => take(budget, s.len() + 2),
        Value::Array(items) => {
            take(budget, 2)
                && items
                    .iter()
                    .all(|item| take(budget, 1) && json_fits(item, budget))
        }
        Value::Object(map) => {
            take(budget, 2)
                && map
                    .iter()
                    .all(|(k, item)| take(budget, k.len() + 4) && json_fits(item, budget))
        }
    }
}

/// Takes `n` from `budget`; `false` (and `budget` unchanged) when it has less.
fn take(budget: &mut usize, n: usize) -> bool {
    match budget.checked_sub(n) {
        Some(left) => {
            *budget = left;
            true
        }
        None => false,
    }
}

/// Runs CPU-bound work — cutting and serializing a result, which takes time proportional to
/// its size — on tokio's blocking pool, at most one job per CPU at once, so the async workers
/// stay free to serve other requests, timers and the stop signal (a stop abandons what is
/// still running here after its grace period). `None` if the work panicked.
pub async fn off_runtime<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Option<T> {
    static SLOTS: std::sync::OnceLock<tokio::sync::Semaphore> = std::sync::OnceLock::new();
    let slots = SLOTS.get_or_init(|| {
        let cpus = std::thread::available_parallelism().map_or(2, std::num::NonZero::get);
        tokio::sync::Semaphore::new(cpus)
    });
    // The semaphore is never closed, so acquiring only waits.
    let _slot = slots.acquire().await.ok()?;
    tokio::task::spawn_blocking(work).await.ok()
}

fn link_block(link: Link) -> ContentBlock {
    ContentBlock::resource_link(
        Resource::new(link.uri, link.name).with_mime_type("application/json"),
    )
}

fn assemble(value: Value, links: &[ContentBlock], note: Option<&str>) -> CallToolResult {
    let text = serde_json::to_string(&value).unwrap_or_default();
    assemble_with_text(value, text, links, note)
}

/// [`assemble`] with the JSON text of `value` already made.
fn assemble_with_text(
    value: Value,
    mut text: String,
    links: &[ContentBlock],
    note: Option<&str>,
) -> CallToolResult {
    if let Some(note) = note {
        text.push_str("\n\n");
        text.push_str(note);
    }
    let mut out = CallToolResult::structured(value);
    out.content = std::iter::once(ContentBlock::text(text))
        .chain(links.iter().cloned())
        .collect();
    out
}

/// The most bytes of JSON a `CallToolResult` adds around its parts (member names, the content
/// block of the text, punctuation), beyond the text, the structured copy and the links.
const RESULT_FRAME_BYTES: usize = 256;

/// A bound on the JSON size of the whole result of `text` (the JSON of the structured
/// content) and `links`, found without serializing it: the structured copy takes `text.len()`
/// bytes, the text copy at most six times that once escaped (`\u00XX`), the links what their
/// own JSON takes, and the rest [`RESULT_FRAME_BYTES`]. A result within the limit by this
/// bound is sent without being measured.
fn size_bound(text: &str, links: &[ContentBlock]) -> usize {
    text.len()
        .saturating_mul(7)
        .saturating_add(RESULT_FRAME_BYTES)
        .saturating_add(links.iter().map(|l| size(l) + 1).sum::<usize>())
}

/// The `CallToolResult` for one call, bounded by `max_bytes` (its JSON, both copies and the
/// links included; `max_bytes` ≥ 1024, the lowest `GATEHOUSE_MAX_RESULT_BYTES`).
///
/// A result that does not fit is cut (the last list items, the end of long texts; ids and
/// URIs stay whole) and carries `"truncated": true` and a note. When even the cut result does
/// not fit (ids too long for the limit), the answer is an `isError` result saying so — never
/// more than `max_bytes`. CPU work proportional to the result's size: call it off the async
/// workers for large results (see [`crate::mcp::server`]).
pub fn render(result: Result<Produced, ToolError>, max_bytes: usize) -> CallToolResult {
    let mut produced = match result {
        Ok(p) => p,
        Err(e) => return CallToolResult::error(vec![ContentBlock::text(e.message())]),
    };
    let links: Vec<ContentBlock> = produced.links.iter().cloned().map(link_block).collect();
    let value = std::mem::take(&mut produced.value);
    let text = serde_json::to_string(&value).unwrap_or_default();
    if size_bound(&text, &links) + ENVELOPE <= max_bytes {
        return assemble_with_text(value, text, &links, None);
    }
    let whole = assemble_with_text(value.clone(), text, &links, None);
    let whole_size = size(&whole);
    if whole_size + ENVELOPE <= max_bytes {
        return whole;
    }
    drop(whole);
    if let Some((paging, tool)) = &produced.paging
        && let Some(out) = resumable(&value, paging, tool, &produced.links, max_bytes)
    {
        return out;
    }
    // Not resumable, or the first item alone does not fit: it is the one item kept, its
    // texts are cut below and the cursor points past it.
    cut(&produced, value, whole_size, max_bytes)
}

/// Links follow the cut: only those of `links` whose item is still in `v`, names shortened.
fn links_in(links: &[Link], v: &Value) -> Vec<ContentBlock> {
    let text = serde_json::to_string(v).unwrap_or_default();
    links
        .iter()
        .filter(|l| text.contains(l.uri.as_str()))
        .map(|l| link_block(short_link(l)))
        .collect()
}

/// A resumable result (`paging`, of `tool`) cut to whole items within `max_bytes`, saying how
/// to get the rest: as many as fit with the long note and the items' links, with the short
/// note, or with the short note and no links (at the lowest limits the links and the note take
/// the room of whole items), the variant keeping the most items winning (the richer one on a
/// tie). `None` when not even the first item fits whole.
fn resumable(
    value: &Value,
    paging: &Paging,
    tool: &str,
    links: &[Link],
    max_bytes: usize,
) -> Option<CallToolResult> {
    let total = value
        .get(paging.list)
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let continued = |mut v: Value, kept: usize, short: bool, with_links: bool| {
        let cursor = (paging.resume)(kept);
        if let Value::Object(map) = &mut v {
            map.insert("truncated".to_string(), Value::Bool(true));
            map.insert("nextCursor".to_string(), Value::String(cursor.clone()));
        }
        let list = paging.list;
        let note = if short {
            format!(
                "[Cut to fit {max_bytes} bytes: the first {kept} of {total} {list}. For the \
                 rest call {tool} again with the same arguments and \"cursor\": \
                 \"{cursor}\".]"
            )
        } else {
            format!(
                "[Result cut to fit {max_bytes} bytes: it holds the first {kept} of these \
                 {total} {list}. For the rest, call {tool} again with the same arguments \
                 and \"cursor\": \"{cursor}\" (also in structuredContent.nextCursor); \
                 repeat while a nextCursor is returned.]"
            )
        };
        let kept_links = if with_links {
            links_in(links, &v)
        } else {
            Vec::new()
        };
        assemble(v, &kept_links, Some(&note))
    };
    [(false, true), (true, true), (true, false)]
        .into_iter()
        .filter_map(|(short, with_links)| {
            keep_whole_items(value, &[paging.list], max_bytes, |v, kept| {
                continued(v, kept, short, with_links)
            })
        })
        .fold(
            None::<(CallToolResult, usize)>,
            |best, (out, kept)| match best {
                Some((_, most)) if most >= kept => best,
                _ => Some((out, kept)),
            },
        )
        .map(|(out, _)| out)
}

/// `value` (of `produced`, `whole_size` bytes whole) cut to `max_bytes`: the last list items
/// and the end of long texts dropped (a paged result down to its first item, its texts cut
/// alike, the cursor past it), with a note; at last only its ids; an `isError` result when
/// even that does not fit.
fn cut(produced: &Produced, value: Value, whole_size: usize, max_bytes: usize) -> CallToolResult {
    let total = produced
        .paging
        .as_ref()
        .and_then(|(p, _)| value.get(p.list))
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    // A paged result whose first item alone does not fit keeps only that item, cut, with no
    // links (they would take the room of its texts), and the cursor points past it.
    let mut value = value;
    if let Some((paging, _)) = &produced.paging
        && let Some(list) = list_at(&mut value, &[paging.list])
    {
        list.truncate(1);
    }
    let cutter = Cutter {
        produced,
        total,
        max_bytes,
    };
    let notes = CutNotes::new(max_bytes, whole_size);
    let first = notes.first(produced.paging.is_some(), max_bytes);
    produced
        .paging
        .as_ref()
        .and_then(|_| cutter.capped(&value, &notes.paged))
        .or_else(|| cutter.chain(&value, &notes, first, true))
        .or_else(|| cutter.chain(&value, &notes, first, false))
        .unwrap_or_else(|| {
            CallToolResult::error(vec![ContentBlock::text(format!(
                "The result ({whole_size} bytes) does not fit the server's limit of {max_bytes} \
                 bytes even when cut. The call itself was carried out; ask for less (e.g. a \
                 smaller limit) or read one item at a time."
            ))])
        })
}

/// The notes a [`cut`] result may carry, from the longest to the shortest.
struct CutNotes {
    /// What is missing and how to ask for less.
    long: String,
    /// At the lowest limits the note itself is a fair share of the room: a short one is tried
    /// before giving up.
    short: String,
    /// For a result cut down to its ids ([`ids_only`]).
    ids: String,
    /// A paged result is already down to its first item: the shortest note leaves its texts
    /// the most room (the sentence naming the cursor is added to it).
    paged: String,
}

impl CutNotes {
    /// The notes of a result of `whole_size` bytes cut to `max_bytes`.
    fn new(max_bytes: usize, whole_size: usize) -> CutNotes {
        CutNotes {
            long: format!(
                "[Result cut to fit {max_bytes} bytes (it was {whole_size}): the last list items and the \
                 end of long texts are missing. Ask for less, e.g. a smaller limit, or read one note at \
                 a time.]"
            ),
            short: format!("[Result cut to fit {max_bytes} bytes; ask for less.]"),
            ids: format!(
                "[Result cut to fit {max_bytes} bytes: only its ids are left; read the item for the rest.]"
            ),
            paged: format!("[Cut to fit {max_bytes} bytes.]"),
        }
    }

    /// The note tried first: the paged one for a `paged` result, else the short one below a few
    /// KiB of `max_bytes` (the long note would take room from the items themselves), else the
    /// long one.
    fn first(&self, paged: bool, max_bytes: usize) -> &str {
        if paged {
            &self.paged
        } else if max_bytes < 4 * 1024 {
            &self.short
        } else {
            &self.long
        }
    }
}

/// What the steps of [`cut`] share: the result cut, the length of its paged list when whole,
/// and the limit.
struct Cutter<'a> {
    produced: &'a Produced,
    /// Items of the paged list in the whole result (0 when it is not paged).
    total: usize,
    max_bytes: usize,
}

impl Cutter<'_> {
    /// The links of the items still in `v`; none for a paged result (they would take the room
    /// of its texts).
    fn links_in(&self, v: &Value) -> Vec<ContentBlock> {
        if self.produced.paging.is_some() {
            Vec::new()
        } else {
            links_in(&self.produced.links, v)
        }
    }

    /// The cursor past the item the cut left in `v` (past the first item even if the cut could
    /// not keep it, so paging always moves on) and the sentence naming it; none when the result
    /// is not paged or held one item only.
    fn resume(&self, v: &Value) -> Option<(String, String)> {
        let (paging, tool) = self.produced.paging.as_ref()?;
        let kept = v
            .get(paging.list)
            .and_then(Value::as_array)
            .map_or(0, Vec::len)
            .max(1);
        if kept >= self.total {
            return None;
        }
        let cursor = (paging.resume)(kept);
        let sentence =
            format!(" For the rest, call {tool} again with \"cursor\" set to nextCursor.");
        Some((cursor, sentence))
    }

    /// `v` marked `truncated` and the `note` it carries; `with_cursor`, also its `nextCursor`
    /// ([`Cutter::resume`]), named by a sentence added inside the note's brackets.
    fn mark(&self, v: &Value, note: &str, with_cursor: bool) -> (Value, String) {
        let mut marked = v.clone();
        let mut note = note.to_string();
        if let Value::Object(map) = &mut marked {
            map.insert("truncated".to_string(), Value::Bool(true));
            if let Some((cursor, sentence)) = self.resume(v).filter(|_| with_cursor) {
                map.insert("nextCursor".to_string(), Value::String(cursor));
                note.insert_str(note.len() - 1, &sentence);
            }
        }
        (marked, note)
    }

    /// `value` cut ([`cut_to_fit`]) until it fits with `note` (and its cursor when
    /// `with_cursor`) and its links; `None` when it does not.
    fn attempt(&self, value: Value, note: &str, with_cursor: bool) -> Option<CallToolResult> {
        // The JSON is sent twice (structured and as escaped text): start from half the room
        // left; `cut_to_fit` tightens the budget by what the assembled answer still exceeds.
        let budget = self.max_bytes.saturating_sub(note.len() + OVERHEAD) / 2;
        let build = |v: &Value| {
            let (marked, note) = self.mark(v, note, with_cursor);
            let kept = self.links_in(&marked);
            assemble(marked, &kept, Some(&note))
        };
        cut_to_fit(
            value,
            self.max_bytes.saturating_sub(ENVELOPE),
            budget,
            build,
        )
    }

    /// The attempts in order: `value` with the `first` note, then with the short note; at last
    /// only its ids ([`ids_only`]), as a carried-out write must still say it succeeded and name
    /// what it made ([`KEEP_WHOLE`]).
    fn chain(
        &self,
        value: &Value,
        notes: &CutNotes,
        first: &str,
        with_cursor: bool,
    ) -> Option<CallToolResult> {
        self.attempt(value.clone(), first, with_cursor)
            .or_else(|| self.attempt(value.clone(), &notes.short, with_cursor))
            .or_else(|| self.attempt(ids_only(value), &notes.ids, with_cursor))
    }

    /// A paged result's one item in `value`, its texts kept as long as the room allows, all cut
    /// alike ([`cap_to_fit`]), with the `paged_note` and the cursor; no links.
    fn capped(&self, value: &Value, paged_note: &str) -> Option<CallToolResult> {
        cap_to_fit(value, self.max_bytes, |v| {
            let (marked, note) = self.mark(v, paged_note, true);
            assemble(marked, &[], Some(&note))
        })
    }
}

/// The JSON size, in bytes, of the result [`render`] sends uncut for `value` and `links`, plus
/// the room kept for what rmcp adds after it is measured ([`ENVELOPE`]): a tool that sizes its
/// own parts (`get_note`) keeps this within `GATEHOUSE_MAX_RESULT_BYTES`, so they are never cut.
pub fn sent_size(value: &Value, links: &[Link]) -> usize {
    let blocks: Vec<ContentBlock> = links.iter().cloned().map(link_block).collect();
    size(&assemble(value.clone(), &blocks, None)) + ENVELOPE
}

/// The bytes one character of a string member adds to [`sent_size`]: its JSON escape in the
/// structured copy plus the escape of that escape in the text copy — 2 for most ASCII, 5 for a
/// line break or tab, 6 for `"` and `\`, twice its UTF-8 length for other characters (8 at
/// most for printable text; 13 for other control characters).
pub fn char_cost(c: char) -> usize {
    let mut buf = [0u8; 4];
    let once = serde_json::to_string(c.encode_utf8(&mut buf) as &str).unwrap_or_default();
    let twice = serde_json::to_string(&once).unwrap_or_default();
    // `once` is quoted (2 bytes); `twice` holds those quotes escaped (4) and its own (2).
    once.len().saturating_sub(2) + twice.len().saturating_sub(6)
}

/// Longest link name kept in a cut result, in characters.
const SHORT_LINK_NAME: usize = 32;

/// `link` with its name cut to [`SHORT_LINK_NAME`] characters (plus the ellipsis).
fn short_link(link: &Link) -> Link {
    let mut name: String = link.name.chars().take(SHORT_LINK_NAME).collect();
    if name.len() < link.name.len() {
        name.push(ELLIPSIS);
    }
    Link {
        uri: link.uri.clone(),
        name,
    }
}

/// `value` with only its [`KEEP_WHOLE`] members (ids, URIs, status), when it is an object.
fn ids_only(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| KEEP_WHOLE.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// The `resources/read` result holding the JSON document `value` of `uri`, bounded by
/// `max_bytes` (the JSON of the whole result; ≥ 1024). A document that does not fit is cut
/// like a tool result (the last list items, the end of long texts; ids and URIs stay whole)
/// and gets `"truncated": true` and a `"truncation_notice"`: what was cut, then `rest` — how
/// to get the rest. When even that does not fit, the document is only `truncated` and the
/// notice. `uri` is one of the server's own resource URIs (short).
pub fn resource_document(
    uri: &str,
    value: Value,
    max_bytes: usize,
    rest: &str,
) -> ReadResourceResult {
    cut_document(uri, value, max_bytes, rest, None)
}

/// `value` as the one JSON text content of resource `uri`.
fn json_contents(uri: &str, value: &Value) -> ReadResourceResult {
    let text = serde_json::to_string(value).unwrap_or_default();
    ReadResourceResult::new(vec![
        ResourceContents::text(text, uri).with_mime_type("application/json"),
    ])
}

/// A paged list of a document: where it is, how many items the document held, and the URI of
/// the page after the first `kept` items.
type PagedList<'a> = (&'a [&'a str], usize, &'a dyn Fn(usize) -> String);

/// [`resource_document`], with `next_page` set after the items of `paged` that a cut keeps
/// (none when it keeps every item or none).
fn cut_document(
    uri: &str,
    value: Value,
    max_bytes: usize,
    rest: &str,
    paged: Option<PagedList<'_>>,
) -> ReadResourceResult {
    let build = |v: &Value| json_contents(uri, v);
    let whole = build(&value);
    let whole_size = size(&whole);
    // A paged document reaches here with its list cut to one item, which must name the page
    // after it even when it fits.
    if whole_size + ENVELOPE <= max_bytes && paged.is_none() {
        return whole;
    }
    drop(whole);
    // A page whose one item is cut is already short of room: its notice is short too.
    let notice = if paged.is_some() {
        format!("Texts cut to fit {max_bytes} bytes. {rest}")
    } else {
        format!(
            "This document was cut to fit {max_bytes} bytes (it was {whole_size}): the last \
             list items and the end of long texts are missing. {rest}"
        )
    };
    let mark = |v: &Value, notice: &str| {
        let mut marked = v.clone();
        let notice = notice.to_string();
        if let Some((path, total, next_page)) = paged {
            let mut probe = v.clone();
            // Past the first item even if the cut could not keep it, so paging moves on.
            // (`next_page` speaks for itself: the page has no room for a sentence about it.)
            let kept = list_at(&mut probe, path).map_or(0, |l| l.len()).max(1);
            if kept < total {
                let next = next_page(kept);
                if let Value::Object(map) = &mut marked {
                    map.insert("next_page".to_string(), Value::String(next));
                }
            }
        }
        if let Value::Object(map) = &mut marked {
            map.insert("truncated".to_string(), Value::Bool(true));
            map.insert("truncation_notice".to_string(), Value::String(notice));
        }
        build(&marked)
    };
    // The document is sent as escaped text: start from the room left.
    let budget = max_bytes.saturating_sub(uri.len() + notice.len() + OVERHEAD);
    cut_to_fit(value, max_bytes.saturating_sub(ENVELOPE), budget, |v| {
        mark(v, &notice)
    })
    .unwrap_or_else(|| {
        let empty = Value::Object(serde_json::Map::new());
        let out = mark(&empty, &notice);
        if size(&out) + ENVELOPE <= max_bytes {
            out
        } else {
            mark(
                &empty,
                &format!("This document does not fit {max_bytes} bytes."),
            )
        }
    })
}

/// Like [`resource_document`] for a document whose list at `path` can be read in pages: a
/// document that does not fit keeps the first items of that list whole (as many as fit),
/// `"truncated": true`, `"next_page"` = `next_page(kept)` (the URI that reads the items after
/// them) and a `"truncation_notice"` naming it. A first item that alone does not fit is sent
/// cut by the rules of [`resource_document`], with `next_page` past it.
pub fn resource_document_pages(
    uri: &str,
    mut value: Value,
    max_bytes: usize,
    rest: &str,
    path: &[&str],
    next_page: impl Fn(usize) -> String,
) -> ReadResourceResult {
    let build = |v: &Value| json_contents(uri, v);
    let whole = build(&value);
    if size(&whole) + ENVELOPE <= max_bytes {
        return whole;
    }
    drop(whole);
    let mut total = 0;
    if let Some(list) = list_at(&mut value, path) {
        total = list.len();
    }
    let list = path.join(".");
    let continued = |mut v: Value, kept: usize, short: bool| {
        let next = next_page(kept);
        let notice = if short {
            format!(
                "Cut to fit {max_bytes} bytes: the first {kept} of {total} {list}. Read \
                 {next} for the rest."
            )
        } else {
            format!(
                "This document was cut to fit {max_bytes} bytes: it holds the first {kept} of \
                 these {total} items of {list}, whole. Read the resource {next} for the items \
                 after them; repeat while a next_page is given."
            )
        };
        if let Value::Object(map) = &mut v {
            map.insert("truncated".to_string(), Value::Bool(true));
            map.insert("truncation_notice".to_string(), Value::String(notice));
            map.insert("next_page".to_string(), Value::String(next));
        }
        build(&v)
    };
    // As many whole items as fit with the long notice or the short one (at the lowest limits
    // the notice takes the room of whole items): the one keeping more wins, the long on a tie.
    let long = keep_whole_items(&value, path, max_bytes, |v, k| continued(v, k, false));
    let short = keep_whole_items(&value, path, max_bytes, |v, k| continued(v, k, true));
    let best = match (long, short) {
        (Some(l), Some(s)) if s.1 > l.1 => Some(s),
        (Some(l), _) => Some(l),
        (None, s) => s,
    };
    if let Some((out, _)) = best {
        return out;
    }
    // The first item alone does not fit: it is the one item kept, its texts cut, and
    // next_page points past it.
    if let Some(list) = list_at(&mut value, path) {
        list.truncate(1);
    }
    let notice = format!("Texts cut to fit {max_bytes} bytes. {rest}");
    let next = (total > 1).then(|| next_page(1));
    cap_to_fit(&value, max_bytes, |v| {
        let mut marked = v.clone();
        if let Value::Object(map) = &mut marked {
            map.insert("truncated".to_string(), Value::Bool(true));
            map.insert(
                "truncation_notice".to_string(),
                Value::String(notice.clone()),
            );
            if let Some(next) = &next {
                map.insert("next_page".to_string(), Value::String(next.clone()));
            }
        }
        build(&marked)
    })
    .unwrap_or_else(|| cut_document(uri, value, max_bytes, rest, Some((path, total, &next_page))))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bound that lets a result skip its exact measuring is never below the result's real
    /// size, for texts that escape the most (control characters, quotes, backslashes),
    /// non-ASCII text and many links.
    #[test]
    fn the_size_bound_is_never_below_the_real_size() {
        let values = [
            json!({}),
            json!({"projects": []}),
            json!({"t": "\u{1}\u{2}\u{1f}\"\\\n"}),
            json!({"t": "\u{0}".repeat(500)}),
            json!({"t": "é😀\u{202e}".repeat(100), "n": [1, 2.5, null, true]}),
            json!({"projects": (0..50).map(|i| json!({"id": format!("p{i}"), "name": "\"x\""})).collect::<Vec<_>>()}),
        ];
        for value in values {
            for n in [0usize, 1, 20] {
                let links: Vec<ContentBlock> = (0..n)
                    .map(|i| {
                        link_block(Link {
                            uri: format!("gatehouse://projects/p{i}"),
                            name: format!("Project \"{i}\"\u{1}"),
                        })
                    })
                    .collect();
                let text = serde_json::to_string(&value).unwrap();
                let bound = size_bound(&text, &links);
                let whole = assemble(value.clone(), &links, None);
                assert!(size(&whole) <= bound, "{value} with {n} links");
            }
        }
    }
    use proptest::prelude::*;
    use serde_json::json;

    fn produced(value: Value) -> Produced {
        Produced {
            paging: None,
            value,
            links: vec![Link {
                uri: "gatehouse://projects/p1".into(),
                name: "p1".into(),
            }],
        }
    }

    /// Small results are prepared in place; one whose JSON is over the limit — one long
    /// text, or many small items — is not; a JSON size just under the limit is small.
    #[test]
    fn a_result_is_small_up_to_the_inline_limit() {
        assert!(is_small(&Ok(produced(json!({"projects": [{"id": "p1"}]})))));
        assert!(is_small(&Err(ToolError::InvalidArguments("bad".into()))));
        let long = "x".repeat(INLINE_RESULT_BYTES + 1);
        assert!(!is_small(&Ok(produced(json!({"body": long})))));
        let many: Vec<Value> = (0..INLINE_RESULT_BYTES / 4).map(|i| json!(i)).collect();
        assert!(!is_small(&Ok(produced(json!({"ids": many})))));
        // Half the limit in one text: small.
        let under = json!({"body": "y".repeat(INLINE_RESULT_BYTES / 2)});
        assert!(size(&under) < INLINE_RESULT_BYTES);
        assert!(is_small(&Ok(produced(under))));
    }

    fn paged(value: Value) -> Produced {
        let paging = Paging {
            list: "results",
            resume: std::sync::Arc::new(|kept| format!("cursor-{kept}")),
        };
        Produced {
            value,
            links: vec![],
            paging: Some((paging, "search_notes")),
        }
    }

    #[test]
    fn a_paged_result_keeps_whole_items_and_names_the_cursor_after_them() {
        let hits: Vec<Value> = (0..60)
            .map(|i| json!({"id": format!("n{i}"), "snippet": format!("{i} {}", "word ".repeat(20))}))
            .collect();
        let r = render(
            Ok(paged(json!({"project_id": "p", "results": hits.clone()}))),
            4096,
        );
        assert!(serde_json::to_string(&r).unwrap().len() <= 4096);
        let sc = r.structured_content.unwrap();
        let kept = sc["results"].as_array().unwrap();
        assert!(kept.len() > 1 && kept.len() < 60, "{}", kept.len());
        assert_eq!(kept[..], hits[..kept.len()], "whole items, in order");
        assert_eq!(sc["nextCursor"], format!("cursor-{}", kept.len()));
        let text = &r.content[0].as_text().unwrap().text;
        assert!(
            text.contains(&format!("\"cursor\": \"cursor-{}\"", kept.len())),
            "{text}"
        );
        // Whole results carry no cursor.
        let r = render(Ok(paged(json!({"results": hits[..2].to_vec()}))), 65536);
        assert_eq!(r.structured_content.unwrap().get("nextCursor"), None);
    }

    #[test]
    fn a_first_item_too_large_alone_is_cut_and_any_cursor_points_past_what_is_kept() {
        for n in [2, 3, 8] {
            let hits: Vec<Value> = (0..n)
                .map(|i| json!({"id": format!("n{i}"), "snippet": "x".repeat(5000)}))
                .collect();
            let r = render(Ok(paged(json!({"results": hits}))), 1024);
            assert!(serde_json::to_string(&r).unwrap().len() <= 1024);
            let sc = r.structured_content.unwrap();
            let kept = sc["results"].as_array().unwrap();
            assert!(!kept.is_empty(), "{sc}");
            for (i, hit) in kept.iter().enumerate() {
                assert_eq!(hit["id"], format!("n{i}"), "a prefix, in order");
            }
            if kept.len() < n {
                assert_eq!(sc["nextCursor"], format!("cursor-{}", kept.len()), "{sc}");
            } else {
                assert_eq!(sc.get("nextCursor"), None, "{sc}");
            }
        }
    }

    #[test]
    fn a_paged_document_keeps_whole_items_and_names_the_next_page() {
        let notes: Vec<Value> = (0..40)
            .map(|i| json!({"id": format!("n{i}"), "body": "text ".repeat(40)}))
            .collect();
        let doc = json!({"id": "j", "document": {"notes": notes.clone()}});
        let r = resource_document_pages(
            "gatehouse://jobs/export/j",
            doc,
            4096,
            "Rest.",
            &["document", "notes"],
            |k| format!("gatehouse://jobs/export/j?from={k}"),
        );
        assert!(serde_json::to_string(&r).unwrap().len() <= 4096);
        let d = document_of(&r);
        let kept = d["document"]["notes"].as_array().unwrap();
        assert!(kept.len() > 1 && kept.len() < 40);
        assert_eq!(kept[..], notes[..kept.len()]);
        assert_eq!(
            d["next_page"],
            format!("gatehouse://jobs/export/j?from={}", kept.len())
        );
        assert!(d["truncation_notice"].as_str().unwrap().contains("?from="));
    }

    #[test]
    fn small_results_carry_structured_content_text_and_links() {
        let r = render(Ok(produced(json!({"id": "n1", "title": "t"}))), 65536);
        assert_eq!(r.is_error, Some(false));
        assert_eq!(
            r.structured_content,
            Some(json!({"id": "n1", "title": "t"}))
        );
        assert_eq!(
            r.content[0].as_text().unwrap().text,
            r#"{"id":"n1","title":"t"}"#
        );
        assert_eq!(
            r.content[1].as_resource_link().unwrap().uri,
            "gatehouse://projects/p1"
        );
    }

    #[test]
    fn large_results_are_cut_with_a_note() {
        let hits: Vec<Value> = (0..200)
            .map(|i| json!({"id": format!("n{i}"), "snippet": "word ".repeat(40)}))
            .collect();
        let r = render(
            Ok(produced(json!({"project_id": "p", "results": hits}))),
            4096,
        );
        let text = &r.content[0].as_text().unwrap().text;
        assert!(text.contains("[Result cut to fit 4096 bytes"));
        assert!(serde_json::to_string(&r).unwrap().len() <= 4096);
        let sc = r.structured_content.unwrap();
        assert_eq!(sc["truncated"], true);
        assert_eq!(sc["project_id"], "p");
        let kept = sc["results"].as_array().unwrap().len();
        assert!(kept > 0 && kept < 200, "{kept}");
    }

    #[test]
    fn one_long_body_is_shortened_not_dropped() {
        let body = "é".repeat(50_000);
        let r = render(
            Ok(produced(
                json!({"id": "n1", "uri": "gatehouse://x", "body": body}),
            )),
            2048,
        );
        let total = serde_json::to_string(&r).unwrap().len();
        let sc = r.structured_content.unwrap();
        assert_eq!(sc["id"], "n1");
        assert_eq!(sc["uri"], "gatehouse://x");
        let cut = sc["body"].as_str().unwrap();
        assert!(cut.ends_with('…') && cut.len() < 1024);
        assert!(total <= 2048, "{total}");
    }

    #[test]
    fn errors_are_is_error_results() {
        let r = render(Err(ToolError::NotFound("No such note.".into())), 65536);
        assert_eq!(r.is_error, Some(true));
        assert_eq!(r.content[0].as_text().unwrap().text, "No such note.");
        assert!(r.structured_content.is_none());
        let r = render(Err(ToolError::Internal("db down".into())), 65536);
        assert!(!r.content[0].as_text().unwrap().text.contains("db down"));
    }

    fn document_of(r: &ReadResourceResult) -> Value {
        let ResourceContents::TextResourceContents { text, .. } = &r.contents[0] else {
            panic!("text contents");
        };
        serde_json::from_str(text).expect("still JSON")
    }

    #[test]
    fn small_resources_are_sent_whole() {
        let doc = json!({"id": "n1", "body": "short"});
        let r = resource_document("gatehouse://x", doc.clone(), 2048, "Use get_note.");
        assert_eq!(document_of(&r), doc);
    }

    #[test]
    fn large_resources_are_cut_and_stay_json() {
        let notes: Vec<Value> = (0..100)
            .map(|i| json!({"id": format!("n{i}"), "body": "word ".repeat(100)}))
            .collect();
        let doc = json!({"id": "job1", "uri": "gatehouse://jobs/export/job1", "document": {"project_id": "p", "notes": notes}});
        let r = resource_document("gatehouse://jobs/export/job1", doc, 4096, "Use get_note.");
        assert!(size(&r) <= 4096, "{}", size(&r));
        let cut = document_of(&r);
        assert_eq!(cut["truncated"], true);
        assert_eq!(cut["id"], "job1");
        assert_eq!(cut["uri"], "gatehouse://jobs/export/job1");
        let notice = cut["truncation_notice"].as_str().unwrap();
        assert!(
            notice.contains("4096 bytes") && notice.ends_with("Use get_note."),
            "{notice}"
        );
        let kept = cut["document"]["notes"].as_array().unwrap().len();
        assert!(kept > 0 && kept < 100, "{kept}");

        let body = "é".repeat(20_000);
        let r = resource_document(
            "gatehouse://n",
            json!({"id": "n1", "body": body}),
            2048,
            "x",
        );
        assert!(size(&r) <= 2048, "{}", size(&r));
        let cut = document_of(&r);
        assert!(cut["body"].as_str().unwrap().ends_with('…'));
    }

    /// Runs `f` on its own thread; `None` when it has not returned within `secs` (a loop that
    /// does not end).
    fn returns_within<T: Send + 'static>(
        secs: u64,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Option<T> {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(std::time::Duration::from_secs(secs)).ok()
    }

    #[test]
    fn a_text_just_over_the_cut_floor_at_the_lowest_limit_ends() {
        // The issue's case: a 600-character note body at GATEHOUSE_MAX_RESULT_BYTES=1024.
        let note = json!({
            "id": "3f1c2b9e-7d4a-4c8e-9b1a-2e5f6a7b8c9d",
            "project_id": "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d",
            "title": "A note",
            "body": "b".repeat(600),
            "tags": [],
            "uri": "gatehouse://projects/0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d/notes/3f1c2b9e-7d4a-4c8e-9b1a-2e5f6a7b8c9d",
            "created_at": 1_700_000_000,
            "updated_at": 1_700_000_000
        });
        let n = note.clone();
        let r = returns_within(10, move || render(Ok(produced(n)), 1024)).expect("render returns");
        assert!(serde_json::to_string(&r).unwrap().len() <= 1024);
        let r = returns_within(10, move || {
            resource_document("gatehouse://x", note, 1024, "Use get_note.")
        })
        .expect("resource_document returns");
        assert!(size(&r) <= 1024);
    }

    #[test]
    fn ids_too_long_to_fit_still_give_a_bounded_answer() {
        let doc = json!({"id": "i".repeat(5000), "uri": "u".repeat(5000), "title": "t"});
        let d = doc.clone();
        let r = returns_within(10, move || render(Ok(produced(d)), 1024)).expect("returns");
        assert!(serde_json::to_string(&r).unwrap().len() <= 1024);
        assert_eq!(
            r.is_error,
            Some(true),
            "nothing usable fits: said so, not sent whole"
        );
        let r = returns_within(10, move || {
            resource_document("gatehouse://x", doc, 1024, "Use get_note.")
        })
        .expect("returns");
        assert!(size(&r) <= 1024);
        assert_eq!(document_of(&r)["truncated"], true);
    }

    /// Random JSON: multibyte and escaped text, deep nesting, long arrays, the never-cut keys.
    fn payload() -> impl Strategy<Value = Value> {
        let text = prop_oneof![
            "[a-z ]{0,80}",
            "\\PC{0,300}",
            "[\"\\\\\\x00-\\x1f]{0,200}",
            "[é€😀a]{0,2000}",
        ];
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            text.prop_map(Value::String),
        ];
        leaf.prop_recursive(10, 2000, 40, |inner| {
            let key = prop_oneof![
                "[a-z_]{1,12}",
                proptest::sample::select(KEEP_WHOLE.to_vec()).prop_map(str::to_string),
            ];
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..120).prop_map(Value::Array),
                proptest::collection::btree_map(key, inner, 0..8)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    const PROJECT: &str = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d";

    /// The `k`-th id, as the server mints them.
    fn uuid(k: usize) -> String {
        format!("3f1c2b9e-7d4a-4c8e-9b1a-{k:012}")
    }

    /// The page of `search_notes` holding the hits from `offset` on (as the tool builds it,
    /// with a link per hit), continued at `offset + kept`.
    fn search_page(hits: &[Value], offset: usize) -> Produced {
        let paging = Paging {
            list: "results",
            // As long as the real cursors (base64url of the offset, end and fingerprint).
            resume: std::sync::Arc::new(move |kept| format!("{:038}", offset + kept)),
        };
        Produced {
            value: json!({"project_id": PROJECT, "query": "q", "results": hits[offset..]}),
            links: hits[offset..]
                .iter()
                .map(|h| Link {
                    uri: h["uri"].as_str().unwrap().into(),
                    name: h["title"].as_str().unwrap().into(),
                })
                .collect(),
            paging: Some((paging, "search_notes")),
        }
    }

    /// Pages through `hits` at `max` as a client does: every page fits and moves on, a page
    /// holds whole hits unless its one hit alone cannot fit (then its ids are whole), and the
    /// hits come back once each, in order. The number of pages.
    fn page_search(hits: &[Value], max: usize) -> usize {
        let (mut offset, mut pages, mut ids) = (0, 0, Vec::new());
        loop {
            let r = render(Ok(search_page(hits, offset)), max);
            let sent = serde_json::to_string(&r).unwrap().len();
            assert!(sent <= max, "page of {sent} bytes > {max}");
            let sc = r.structured_content.unwrap();
            let kept = sc["results"].as_array().unwrap();
            for (i, hit) in kept.iter().enumerate() {
                let original = &hits[offset + i];
                if kept.len() > 1 || hit == original {
                    assert_eq!(hit, original, "whole hits");
                } else {
                    assert_eq!(hit["id"], original["id"]);
                    assert_eq!(hit["uri"], original["uri"]);
                    assert_eq!(sc["truncated"], true);
                }
                ids.push(hit["id"].clone());
            }
            pages += 1;
            match sc.get("nextCursor").and_then(Value::as_str) {
                Some(next) => {
                    let next: usize = next.parse().unwrap();
                    assert!(!kept.is_empty(), "a page with a cursor holds a hit");
                    assert_eq!(next, offset + kept.len(), "the cursor follows the page");
                    offset = next;
                }
                None => break,
            }
        }
        let all: Vec<Value> = hits.iter().map(|h| h["id"].clone()).collect();
        assert_eq!(ids, all, "every hit once, in order, at {max}");
        pages
    }

    fn hit(k: usize, title: &str, snippet: &str) -> Value {
        json!({
            "id": uuid(k),
            "title": title,
            "snippet": snippet,
            "uri": format!("gatehouse://projects/{PROJECT}/notes/{}", uuid(k)),
        })
    }

    /// The export job's resource from note `from` on, as the resource reader builds it.
    fn export_page(notes: &[Value], from: usize, max: usize) -> ReadResourceResult {
        let base = "gatehouse://jobs/export/9e0f1a2b-3c4d-4a6b-8c7d-0a1b2c3d4e5f";
        let mut document = json!({
            "project_id": PROJECT, "exported_at": 1_700_000_000, "notes": notes[from..],
        });
        if from > 0 {
            document["notes_from"] = json!(from);
        }
        let value = json!({
            "kind": "export", "id": "9e0f1a2b-3c4d-4a6b-8c7d-0a1b2c3d4e5f",
            "status": "completed", "project_id": PROJECT, "created_at": 1_700_000_000,
            "finished_at": 1_700_000_001, "note_count": notes.len(), "resource": base,
            "document": document,
        });
        let uri = if from > 0 {
            format!("{base}?from={from}")
        } else {
            base.to_string()
        };
        resource_document_pages(
            &uri,
            value,
            max,
            "Read the note whole with get_note.",
            &["document", "notes"],
            |k| format!("{base}?from={}", from + k),
        )
    }

    /// Reads the export page by page at `max`: every page fits and moves on, whole notes
    /// except a note that alone cannot fit (alone on its page, ids whole), every note once in
    /// order. The number of pages.
    fn page_export(notes: &[Value], max: usize) -> usize {
        let (mut from, mut pages, mut ids) = (0, 0, Vec::new());
        loop {
            let r = export_page(notes, from, max);
            assert!(size(&r) <= max, "page of {} bytes > {max}", size(&r));
            let d = document_of(&r);
            let kept = d["document"]["notes"].as_array().unwrap();
            for (i, note) in kept.iter().enumerate() {
                let original = &notes[from + i];
                if kept.len() > 1 || note == original {
                    assert_eq!(note, original, "whole notes");
                } else {
                    assert_eq!(note["id"], original["id"]);
                }
                ids.push(note["id"].clone());
            }
            pages += 1;
            match d.get("next_page").and_then(Value::as_str) {
                Some(next) => {
                    let (_, n) = next.split_once("?from=").unwrap();
                    let n: usize = n.parse().unwrap();
                    assert!(!kept.is_empty(), "a page with a next_page holds a note");
                    assert_eq!(n, from + kept.len(), "next_page follows the page");
                    // A page of whole notes names the next page in its notice too.
                    let notice = d["truncation_notice"].as_str().unwrap();
                    assert!(kept.len() == 1 || notice.contains(next), "{notice}");
                    from = n;
                }
                None => break,
            }
        }
        let all: Vec<Value> = notes.iter().map(|n| n["id"].clone()).collect();
        assert_eq!(ids, all, "every note once, in order, at {max}");
        pages
    }

    fn export_note(k: usize, title: &str, body: &str, tags: &[String]) -> Value {
        json!({
            "id": uuid(k), "title": title, "body": body, "tags": tags,
            "created_at": 1_700_000_000, "updated_at": 1_700_000_000,
        })
    }

    /// The issue's case at the lowest bound: 12 hits and 12 notes page to the end (before: one
    /// hit and no cursor; no note and no `next_page`).
    #[test]
    fn twelve_hits_and_twelve_notes_page_to_the_end_at_the_lowest_bound() {
        let hits: Vec<Value> = (0..12)
            .map(|k| {
                hit(
                    k,
                    &format!("Alpha {k:03}"),
                    &format!("alpha note {k}: lorem ipsum dolor sit amet"),
                )
            })
            .collect();
        assert_eq!(page_search(&hits, 1024), 12);
        let notes: Vec<Value> = (0..12)
            .map(|k| {
                export_note(
                    k,
                    &format!("Alpha {k:03}"),
                    &"lorem ipsum ".repeat(25),
                    &[format!("t{k}")],
                )
            })
            .collect();
        assert_eq!(page_export(&notes, 1024), 12);
        // Short notes share pages.
        let notes: Vec<Value> = (0..12).map(|k| export_note(k, "A", "b", &[])).collect();
        assert!(page_export(&notes, 1024) < 12);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        #[test]
        fn every_result_fits_its_limit_and_the_cut_returns(
            value in payload(),
            max in prop_oneof![1024usize..4096, 1024usize..=70_000, Just(1024usize)],
        ) {
            let v = value.clone();
            let r = returns_within(20, move || render(Ok(produced(v)), max));
            prop_assert!(r.is_some(), "render did not return (limit {})", max);
            let n = serde_json::to_string(&r.unwrap()).unwrap().len();
            prop_assert!(n <= max, "tool result {} > {}", n, max);

            let r = returns_within(20, move || {
                resource_document("gatehouse://projects/p/notes/n", value, max, "Use get_note.")
            });
            prop_assert!(r.is_some(), "resource_document did not return (limit {})", max);
            let r = r.unwrap();
            let n = size(&r);
            prop_assert!(n <= max, "resource {} > {}", n, max);
            document_of(&r);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]

        /// Every bound from the lowest up, multibyte and escaped texts: search results and the
        /// export document page to the end and reassemble exactly.
        #[test]
        fn search_and_export_reassemble_exactly_at_every_bound(
            items in proptest::collection::vec(
                ("[a-zé😀 \"]{1,200}", "[a-z \n\"\\\\é€😀]{0,600}",
                 proptest::collection::vec("[a-z😀]{1,40}", 0..=3)),
                0..=30,
            ),
            max in prop_oneof![Just(1024usize), 1024usize..4096, 1024usize..=70_000],
        ) {
            let hits: Vec<Value> = items.iter().enumerate().map(|(k, (t, b, _))| hit(k, t, b)).collect();
            page_search(&hits, max);
            let notes: Vec<Value> = items.iter().enumerate().map(|(k, (t, b, tags))| export_note(k, t, b, tags)).collect();
            page_export(&notes, max);
        }
    }
}
